"""What a VP may see of its group (DESIGN.md, "What a VP sees").

A VP's own turns live in full in its transcript. From the group log it gets
every person's message and other VPs' replies as text only (no tool calls,
no thinking), plus forwards addressed to it. It reads only up to the
message that triggered its turn, so VPs dispatched together never see each
other's in-flight output.
"""

from __future__ import annotations

from engine.messages import Message
from store.base import GroupMessage


def group_view(
    log: list[GroupMessage],
    vp_id: str,
    after_id: str | None,
    upto_id: str,
    hidden: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[Message], Message | None]:
    """New group messages for ``vp_id`` since ``after_id``, and the trigger.

    Returns the context messages (oldest first) and the trigger message as
    the turn's input (None if the trigger is not in ``log``). ``hidden``
    messages are left out (reply versions not shown: ``actors.version_view``).
    """
    context: list[Message] = []
    trigger: Message | None = None
    for gm in sorted(log, key=lambda m: m.id):
        if (after_id and gm.id <= after_id) or gm.id > upto_id:
            continue
        if gm.meta.get("deleted") and gm.id != upto_id:
            continue  # its author deleted it: the VP never sees it
        if gm.id in hidden and gm.id != upto_id:
            continue
        msg = _as_seen_by(gm, vp_id)
        if gm.id == upto_id:
            trigger = msg or Message.user(gm.text, speaker=gm.author, meta=_files(gm))
        elif msg is not None:
            context.append(msg)
    return context, trigger


def _as_seen_by(gm: GroupMessage, vp_id: str) -> Message | None:
    meta: dict[str, object] = {"group_message_id": gm.id}
    if gm.meta.get("attachments"):
        # A message's files go wherever the message goes (actors.attachments).
        meta["attachments"] = gm.meta["attachments"]
    if gm.role == "system":
        return None
    if gm.meta.get("injectedBy") == "route_forward":
        if gm.meta.get("routeForwardTarget") != vp_id:
            return None
        reason = gm.meta.get("reason")
        why = f" (reason: {reason})" if reason else ""
        return Message.user(
            f"@{gm.author} handed this to you{why}:\n{gm.text}", speaker=gm.author, meta=meta
        )
    if gm.role == "assistant":
        if gm.author == vp_id:
            return None  # already in the VP's own transcript, in full
        return Message.user(f"[@{gm.author}] {gm.text}", speaker=gm.author, meta=meta)
    return Message.user(f"[{gm.author}] {gm.text}", speaker=gm.author, meta=meta)


def seen_text(gm: GroupMessage, vp_id: str) -> str:
    """The words of ``gm`` as another member's message in ``vp_id``'s context."""
    msg = _as_seen_by(gm, vp_id)
    content = msg.content if msg is not None else gm.text
    return content if isinstance(content, str) else gm.text


def trigger_text(gm: GroupMessage, vp_id: str) -> str:
    """The text of ``gm`` as ``vp_id``'s turn input, as :func:`group_view` makes it."""
    msg = _as_seen_by(gm, vp_id)
    return msg.content if msg is not None else gm.text


def _files(gm: GroupMessage) -> dict[str, object]:
    files = gm.meta.get("attachments")
    return {"group_message_id": gm.id, "attachments": files} if files else {}


DELETED_TEXT = "[a message deleted by its author]"


def forget_deleted(messages: list[Message], log: list[GroupMessage]) -> int:
    """Blank, in a VP's transcript, the group messages ``log`` shows as deleted.

    The entry stays (as :data:`DELETED_TEXT`) so the transcript keeps its
    shape, user and assistant in turn; its words are gone. Only messages in
    ``log`` (the turn's catch-up read) are looked for: one deleted after it
    left that window stays in the transcript, or in a compaction summary,
    until the transcript is compacted again. Returns how many were blanked.
    """
    deleted = {gm.id for gm in log if gm.meta.get("deleted")}
    if not deleted:
        return 0
    blanked = 0
    for i, msg in enumerate(messages):
        if msg.meta.get("group_message_id") in deleted and msg.content != DELETED_TEXT:
            messages[i] = msg.model_copy(update={"content": DELETED_TEXT})
            blanked += 1
    return blanked


def rewind(
    messages: list[Message], log: list[GroupMessage], vp_id: str, trigger_id: str
) -> Message | None:
    """Cut a VP's transcript back to just before ``trigger_id``, for a regenerated turn.

    Returns the trigger as the turn's input: the transcript's own copy when
    it is there (everything from it on, the superseded answer included, is
    removed), else the message as the VP would see it from ``log`` (the
    transcript was compacted past it; the old answer then stays in context).
    A trigger edited since is answered as it reads now.
    """
    current = next((gm for gm in log if gm.id == trigger_id), None)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].meta.get("group_message_id") == trigger_id:
            trigger = messages[i]
            del messages[i:]
            if current is not None and current.meta.get("editedAt"):
                return trigger.model_copy(update={"content": seen_text(current, vp_id)})
            return trigger
    for gm in log:
        if gm.id == trigger_id:
            return _as_seen_by(gm, vp_id) or Message.user(
                gm.text, speaker=gm.author, meta=_files(gm)
            )
    return None
