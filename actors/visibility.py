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
    log: list[GroupMessage], vp_id: str, after_id: str | None, upto_id: str
) -> tuple[list[Message], Message | None]:
    """New group messages for ``vp_id`` since ``after_id``, and the trigger.

    Returns the context messages (oldest first) and the trigger message as
    the turn's input (None if the trigger is not in ``log``).
    """
    context: list[Message] = []
    trigger: Message | None = None
    for gm in sorted(log, key=lambda m: m.id):
        if (after_id and gm.id <= after_id) or gm.id > upto_id:
            continue
        msg = _as_seen_by(gm, vp_id)
        if gm.id == upto_id:
            trigger = msg or Message.user(gm.text, speaker=gm.author)
        elif msg is not None:
            context.append(msg)
    return context, trigger


def _as_seen_by(gm: GroupMessage, vp_id: str) -> Message | None:
    meta = {"group_message_id": gm.id}
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
