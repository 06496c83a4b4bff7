"""Regenerating a VP's reply: which reply may be, and the turn that answers again.

A person asks a VP to answer the same message again. The new turn is an
ordinary turn on the original message (same trigger, same chain, streamed
and stored like any other); it carries ``regenerates`` so the VP rewinds
its transcript to just before that message and answers it afresh, as if
its first reply had not been written. The first reply stays in the log,
marked ``supersededBy`` the new turn (clients dim it), so nothing anyone
read disappears.

Only a VP's newest reply in the group can be regenerated (as in ChatGPT,
where only the last answer has the button): rewinding past later turns
would drop what the VP said and saw since.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.turns import TurnOrigin, channel_of
from coordinator.errors import GroupError, GroupErrorCode
from engine.tools.approval import approval_marks
from store.base import Group, GroupLog, GroupMessage
from store.threads import thread_of

# How far back the newest reply of a VP is looked for.
REPLY_WINDOW = 200


@dataclass(frozen=True, slots=True)
class RegenerateResult:
    """The reply that was superseded and the turn that answers again."""

    message_id: str
    vp_id: str
    turn_id: str
    trigger_id: str


def is_reply(message: GroupMessage) -> bool:
    """A VP's own answer (not a hand-off, a notice or a deleted message)."""
    meta = message.meta
    return (
        message.role == "assistant"
        and not meta.get("injectedBy")
        and not meta.get("deleted")
        and bool(meta.get("causedBy"))
    )


async def regenerable_reply(log: GroupLog, group: Group, message_id: str) -> GroupMessage:
    """The reply ``message_id`` if it may be regenerated; else a GroupError saying why."""
    reply = await log.get_message(group.id, message_id)
    if reply is None or not is_reply(reply):
        raise GroupError(GroupErrorCode.NOT_FOUND, "no VP reply with that id in this group")
    if reply.meta.get("task"):
        raise GroupError(
            GroupErrorCode.CONFLICT,
            "this reply is part of a task: use Revise on the task card to ask again",
        )
    if reply.author not in group.roster:
        raise GroupError(
            GroupErrorCode.NOT_IN_ROSTER, f"@{reply.author} is no longer in this group"
        )
    recent = await log.read_messages(group.id, limit=REPLY_WINDOW)
    newest = next((m for m in reversed(recent) if m.author == reply.author and is_reply(m)), None)
    if newest is None or newest.id != reply.id:
        raise GroupError(
            GroupErrorCode.CONFLICT,
            f"only @{reply.author}'s latest reply in this group can be regenerated",
        )
    return reply


async def origin_of(log: GroupLog, group_id: str, reply: GroupMessage, by: str) -> TurnOrigin:
    """The origin of the new turn: the reply's own trigger and chain, acting for ``by``.

    The ``!approve`` marks of the chain's first message hold again when the
    person who wrote it asks; never for someone else.
    """
    caused = [str(c) for c in reply.meta.get("causedBy") or []]
    trigger = caused[-1]
    chain = str(reply.meta.get("chainId") or caused[0])
    first = await log.get_message(group_id, chain)
    approvals = approval_marks(first.text) if first is not None and first.author == by else ()
    return TurnOrigin(
        trigger_id=trigger,
        chain_id=chain,
        caused_by=tuple(caused[:-1]),
        user_id=by,
        approvals=approvals,
        channel=channel_of(first) if first is not None else None,
        # A regenerated reply in a thread is answered again there.
        thread_id=thread_of(reply.meta),
    )
