"""What a VP sees of a group when it answers in a thread, and what it does not.

The rule (``docs/architecture.md``, "Threads"): a turn in a thread sees the
message that started the thread and the thread's replies up to the one it
answers, nothing of the main timeline after the root and nothing of other
threads. Its context is read afresh from the group log for every turn
(``store.threads``), the VP's own earlier replies in the thread as its own
turns; it neither reads nor moves the VP's transcript of the group.
Conversely, a turn on the main timeline never sees a thread's replies
(:func:`main_timeline`): a side question asked in a thread does not
travel in every VP's context.

Versions follow the main timeline's rule (``actors.version_view``): of
another VP's reply with several versions the VP sees the one the group
shows, of its own the one it ran last, either in the place of the reply's
first version; an edited message reads as it does now (the thread is read
afresh, so its text is the current one).
"""

from __future__ import annotations

from typing import Protocol

from actors.visibility import group_view
from engine.messages import Message
from store.base import GroupLog, GroupMessage, ThreadLog
from store.threads import thread_of
from store.versions import chosen_versions, family_roots


def main_timeline(log: list[GroupMessage]) -> list[GroupMessage]:
    """The messages of ``log`` that are not replies in a thread."""
    return [m for m in log if thread_of(m.meta) is None]


def thread_view(
    root: GroupMessage | None, replies: list[GroupMessage], vp_id: str, upto_id: str
) -> tuple[list[Message], Message | None]:
    """The context and the trigger of ``vp_id``'s turn on ``upto_id`` in a thread.

    As :func:`actors.visibility.group_view` shows the group, except that the
    VP's own earlier replies are there as its own (no transcript holds them).
    """
    context: list[Message] = []
    trigger: Message | None = None
    shown = shown_versions(replies, vp_id)
    placed: set[str] = set()
    for gm in [*([root] if root is not None else []), *replies]:
        if trigger is not None:
            break  # nothing after the message the turn answers
        if gm.id in shown and gm.id != upto_id:
            family, version = shown[gm.id]
            if family in placed or version is None:
                continue  # one version of a reply, in the place of the first
            placed.add(family)
            gm = version
        if gm.role == "assistant" and gm.author == vp_id and gm.id != upto_id:
            if not gm.meta.get("deleted"):
                context.append(Message.assistant(gm.text, meta={"group_message_id": gm.id}))
            continue
        seen, answered = group_view([gm], vp_id, None, upto_id if gm.id == upto_id else "~")
        context.extend(seen)
        trigger = answered
    return context, trigger


def shown_versions(
    replies: list[GroupMessage], vp_id: str
) -> dict[str, tuple[str, GroupMessage | None]]:
    """Each version of a reply with several -> (its reply's root, the version ``vp_id`` sees).

    Another VP's reply is seen in the version the group shows
    (``store.versions.chosen_versions``); the VP's own in the newest one not
    deleted, the one it ran last, as its transcript would hold it on the main
    timeline. None: every version is deleted.
    """
    by_id = {m.id: m for m in replies}
    roots = family_roots(replies)
    chosen = chosen_versions(replies)
    seen: dict[str, GroupMessage | None] = {}
    for root in set(roots.values()):
        members = [by_id[m] for m, r in roots.items() if r == root and m in by_id]
        own = [m for m in members if m.author == vp_id and not m.meta.get("deleted")]
        if own:
            seen[root] = max(own, key=lambda m: m.id)
        else:
            seen[root] = by_id.get(chosen[root]) if root in chosen else None
    return {member: (root, seen[root]) for member, root in roots.items()}


class ThreadStore(GroupLog, ThreadLog, Protocol):
    """What :func:`thread_context` reads."""


async def thread_context(
    store: ThreadStore, group_id: str, thread_id: str, vp_id: str, upto_id: str
) -> tuple[list[Message], Message | None]:
    """Read the thread under ``thread_id`` and make ``vp_id``'s view of it (:func:`thread_view`)."""
    root = await store.get_message(group_id, thread_id)
    replies = await store.thread_replies(group_id, thread_id)
    return thread_view(root, replies, vp_id, upto_id)
