"""Answering a message again: a regenerated reply and a resent message make reply versions.

Both go through :func:`rerun`: the VP's reply is marked superseded by a
new turn on the same message (``coordinator.regenerate`` says how the VP
rewinds and answers afresh), the reply's pick of a version is cleared so
the new answer is the one the group shows, and every member is told with
``message_changed superseded``. The new reply names the one it replaces
(``meta.regenerates``), so the two are versions of one reply
(``store.versions``).

A resend is a person's "answer my message again" (typically after editing
it): each VP whose current reply version answers the message reruns, as
long as that reply is still its latest in the group (answering again would
otherwise rewind past what it said since), it is not busy, and it is still
in the roster; the others are named with the reason they were left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from actors.group_events import GroupEvents
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.regenerate import REPLY_WINDOW, is_reply, origin_of
from protocol import MessageChange, MessageChanged
from store.base import Group, GroupMessage
from store.versions import family_roots

if TYPE_CHECKING:
    from coordinator.shard import Shard


@dataclass(frozen=True, slots=True)
class Rerun:
    """A VP answering again: its new turn and the reply version it replaces."""

    vp_id: str
    turn_id: str
    replaces: str


@dataclass(frozen=True, slots=True)
class ResendResult:
    """The turns that answer a resent message, and the VPs left out with why."""

    message_id: str
    turns: tuple[Rerun, ...]
    skipped: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class EditResult:
    """An edited message as stored, and the resend's result when one was asked."""

    message: GroupMessage
    resent: ResendResult | None = None


async def rerun(shard: Shard, group: Group, reply: GroupMessage, by: str) -> str:
    """Start the turn that answers ``reply``'s message again; its turn id.

    The caller checked the reply may be answered again and its VP is idle.
    """
    origin = await origin_of(shard.store, group.id, reply, by)
    chain = await shard.resume_chain(group, origin.chain_id)
    shard.guard(group).reopen(chain)  # a Stop all before does not refuse a person's ask
    with shard.turns.admission.reserve(group.id, [reply.author]):
        verdict = shard.admit(group, chain, None, reply.author, origin.depth)
        if not verdict.ok:
            await shard.refused(group, chain, verdict)
            raise GroupError(GroupErrorCode.CONFLICT, verdict.summary)
        req = replace(shard.turns.plan(group, reply.author, origin), regenerates=reply.id)
        await shard.turns.record(group.id, [req])
        now = time.time()
        await shard.store.supersede_message(group.id, reply.id, turn_id=req.turn_id, by=by, ts=now)
        root = await _root_of(shard, group, reply)
        await shard.store.choose_version(group.id, root, None, by=by, ts=now)
        await GroupEvents(shard.store, group.id).changed(
            MessageChanged(
                group_id=group.id,
                message_id=reply.id,
                change=MessageChange.SUPERSEDED,
                by=by,
                ts=now,
                turn_id=req.turn_id,
            )
        )
        return shard.turns.launch(req)


async def _root_of(shard: Shard, group: Group, reply: GroupMessage) -> str:
    """The first version of ``reply``, followed back through ``regenerates``."""
    current = reply
    for _ in range(REPLY_WINDOW):
        older = current.meta.get("regenerates")
        if not older:
            return current.id
        found = await shard.store.get_message(group.id, str(older))
        if found is None:
            return str(older)
        current = found
    return current.id


def replies_to(recent: list[GroupMessage], message_id: str) -> list[GroupMessage]:
    """The current (not superseded) VP replies that answer ``message_id`` directly."""
    return [
        m
        for m in recent
        if is_reply(m)
        and not m.meta.get("supersededBy")
        and list(m.meta.get("causedBy") or [])[-1:] == [message_id]
    ]


def latest_version(recent: list[GroupMessage], reply: GroupMessage) -> GroupMessage:
    """The newest version of the reply ``reply`` is a version of (itself when it has none)."""
    roots = family_roots(recent)
    root = roots.get(reply.id)
    if root is None:
        return reply
    versions = [m for m in recent if roots.get(m.id) == root and is_reply(m)]
    return max(versions, key=lambda m: m.id) if versions else reply


async def resend(shard: Shard, group: Group, message: GroupMessage, by: str) -> ResendResult:
    """Have the VPs that answered ``message`` answer its current text again."""
    recent = await shard.store.read_messages(group.id, limit=REPLY_WINDOW)
    turns: list[Rerun] = []
    skipped: list[tuple[str, str]] = []
    for reply in replies_to(recent, message.id):
        vp = reply.author
        newest = next((m for m in reversed(recent) if m.author == vp and is_reply(m)), None)
        if vp not in group.roster:
            skipped.append((vp, "not_in_roster"))
        elif newest is None or newest.id != reply.id:
            skipped.append((vp, "answered_since"))
        elif shard.turns.busy(group.id, vp):
            skipped.append((vp, "busy"))
        else:
            turns.append(Rerun(vp, await rerun(shard, group, reply, by), reply.id))
    if not turns:
        why = ", ".join(f"@{vp}: {reason.replace('_', ' ')}" for vp, reason in skipped)
        raise GroupError(
            GroupErrorCode.NOTHING_TO_RESEND,
            "no VP that answered this message can answer it again"
            + (f" ({why})" if why else ": none has answered it"),
            detail={"skipped": [{"vpId": vp, "reason": reason} for vp, reason in skipped]},
        )
    return ResendResult(message.id, tuple(turns), tuple(skipped))
