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
"""

from __future__ import annotations

from typing import Protocol

from actors.visibility import group_view
from engine.messages import Message
from store.base import GroupLog, GroupMessage, ThreadLog
from store.threads import thread_of


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
    for gm in [*([root] if root is not None else []), *replies]:
        if trigger is not None:
            break  # nothing after the message the turn answers
        if gm.role == "assistant" and gm.author == vp_id and gm.id != upto_id:
            if not gm.meta.get("deleted"):
                context.append(Message.assistant(gm.text, meta={"group_message_id": gm.id}))
            continue
        seen, answered = group_view([gm], vp_id, None, upto_id if gm.id == upto_id else "~")
        context.extend(seen)
        trigger = answered
    return context, trigger


class ThreadStore(GroupLog, ThreadLog, Protocol):
    """What :func:`thread_context` reads."""


async def thread_context(
    store: ThreadStore, group_id: str, thread_id: str, vp_id: str, upto_id: str
) -> tuple[list[Message], Message | None]:
    """Read the thread under ``thread_id`` and make ``vp_id``'s view of it (:func:`thread_view`)."""
    root = await store.get_message(group_id, thread_id)
    replies = await store.thread_replies(group_id, thread_id)
    return thread_view(root, replies, vp_id, upto_id)
