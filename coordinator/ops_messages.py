"""Messages and turns: a person's message, a hand-off, regenerate, stop, answers (the handlers).

A person's message is stored before anything is dispatched, with the turns
that answer it in the same write; a VP's ``route_forward`` and a regenerate
go through the same selection rules and the group's loop guard
(``coordinator.shard``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from actors.commands import Forward
from actors.group_events import GroupEvents
from actors.turns import QueuePolicy, TurnOrigin
from actors.vp_commands import AnswerReceipt, VPStats
from coordinator import quota_gate
from coordinator.commands import (
    Answer,
    Cancel,
    Ingest,
    Regenerate,
    VPStatsOf,
    WaitIdle,
    Warm,
)
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.groups import unknown_names
from coordinator.people import people_mentioned
from coordinator.regenerate import RegenerateResult, regenerable_reply
from coordinator.results import CancelResult, ForwardResult, IngestResult
from coordinator.shard import OPS, Shard, no_vp
from coordinator.team.calls import takes_task_path
from coordinator.versions import rerun
from personas.mentions import extract_mentions
from personas.routing import Selection, Source
from protocol import Channel, split_queue_prefix
from store.base import Group, GroupMessage
from store.conversation import GroupKind
from store.threads import THREAD_KEY
from telemetry import tracing


@OPS.on(Ingest)
async def ingest(shard: Shard, cmd: Ingest) -> IngestResult:
    """Persist a person's message, then fan it out.

    With ``member_of``, a sender who is not a member of a group of that
    kind gets ``GroupError(NOT_FOUND)`` (the coordinator holds the group).

    ``attachments`` are the references of its files (``id``, ``name``,
    ``mime``, ``size``), already stored by the gateway; they are kept in
    the message's ``meta``.

    A message the group or one of its VPs has no room for is refused with
    ``GroupError(BUSY)`` before it is stored (``coordinator.admission``).
    A repeat of a stored ``client_message_id`` starts nothing new, except
    for the VPs whose turns on it were interrupted (by a restart, say) or
    never dispatched: those answer it now.
    """
    with tracing.span("ingest", {"yeaft.group.id": cmd.group_id}):
        return await _ingest(shard, cmd)


async def _ingest(shard: Shard, cmd: Ingest) -> IngestResult:
    await shard.recover()
    group = await shard.groups.require(cmd.group_id)
    sender, text = cmd.sender, cmd.text
    if cmd.member_of is not None and (
        group.kind is not cmd.member_of or sender not in group.members
    ):
        raise GroupError(GroupErrorCode.NOT_FOUND, "group not found")
    names = list(dict.fromkeys([*extract_mentions(text), *(cmd.mentions or [])]))
    if group.kind is GroupKind.CONVERSATION:
        names = []  # its one VP answers everything; an "@word" is just text
    attachments = cmd.attachments
    sel, people = people_mentioned(shard.select(group, names, Source.PERSON, None), group.members)
    if cmd.thread_id is None and takes_task_path(group, text, names):
        # A team may give every VP of the group a turn.
        with shard.turns.admission.reserve(group.id, list(group.roster)):
            return await shard.team.ingest(
                group, sender, text, cmd.client_message_id, attachments, cmd.channel, people
            )
    tracing.event(
        "route",
        {
            "yeaft.targets": list(sel.targets),
            "yeaft.trigger": str(sel.trigger),
            "yeaft.unknown": list(sel.unknown),
            "yeaft.people": list(people),
        },
    )
    with shard.turns.admission.reserve(group.id, sel.targets):
        return await _accept(
            shard,
            group,
            sel,
            sender,
            text,
            cmd.client_message_id,
            attachments,
            cmd.channel,
            people,
            cmd.thread_id,
        )


async def _accept(
    shard: Shard,
    group: Group,
    sel: Selection,
    sender: str,
    text: str,
    client_message_id: str | None,
    attachments: list[dict[str, Any]] | None,
    channel: Channel,
    people: list[str],
    thread_id: str | None = None,
) -> IngestResult:
    """Store an admitted message with its turns, then dispatch them.

    ``people`` are the members it mentions (``coordinator.people``): stored
    with it, and a message that names only people is for them, not for a VP.
    A reply in a thread (``thread_id``) keeps it in ``meta``; its turns, and
    the notices about it, answer in the thread (``store.threads``).
    """
    mode, text = split_queue_prefix(text)
    meta: dict[str, object] = {"trigger": str(sel.trigger)}
    if mode is not None:
        meta["queueMode"] = str(mode)
    if client_message_id:
        meta["clientMessageId"] = client_message_id
    if attachments:
        meta["attachments"] = list(attachments)
    meta["channel"] = str(channel)
    if thread_id is not None:
        meta[THREAD_KEY] = thread_id
    msg = GroupMessage(
        author=sender, role="user", text=text, mentions=sel.targets, people=people, meta=meta
    )
    chain = shard.guard(group).start_chain(msg.id)
    origin = TurnOrigin.of_message(msg)
    reqs, refused = shard.admit_all(group, chain, sel.targets, origin, source=None)
    # Reserved now, for the whole fan-out: a spent quota is one notice, not an error per VP.
    reqs, spent = await quota_gate.gate(shard.store, group, reqs)
    # A busy VP takes the message as the group (or the message's prefix) says.
    policy = QueuePolicy.of(group.settings, mode)
    reqs = [replace(req, queue=policy) for req in reqs]
    # The message and the turns that answer it are stored in one write:
    # nothing is acked without its turns, and a repeat records none.
    records = [req.record() for req in reqs]
    events = GroupEvents(shard.store, group.id, thread_id)
    stored, created = await events.store_message(msg, records)
    if not created:
        await quota_gate.release(shard.store, group.id, reqs)
        turns = await shard.resend(group, stored)
        return IngestResult(stored.id, duplicate=True, trigger=str(sel.trigger), turns=turns)
    if sel.unknown:
        await unknown_names(events, group, sel.unknown, stored.id)
    elif not sel.targets and not people:
        await no_vp(events, stored.id)
    if refused is not None:
        await shard.refused(group, chain, refused)
    if spent is not None:
        await quota_gate.quota_notice(events, spent, stored.id)
    turns = {req.vp_id: shard.turns.launch(replace(req, trigger=stored)) for req in reqs}
    return IngestResult(
        stored.id,
        trigger=str(sel.trigger),
        unknown=tuple(sel.unknown),
        truncated=sel.truncated,
        turns=turns,
        people=tuple(people),
    )


@OPS.on(Forward)
async def forward(shard: Shard, cmd: Forward) -> ForwardResult:
    """The ``route_forward`` tool's way in. Never raises: refusals are data."""
    request = cmd.request
    await shard.recover()
    group = await shard.groups.get(request.group_id)
    if group is None:
        return ForwardResult(False, error="group_not_found")
    if request.from_vp not in group.roster:
        return ForwardResult(False, error="sender_unknown")
    sel = shard.select(group, [request.to], Source.FORWARD, request.from_vp)
    if sel.named_self and not sel.targets:
        return ForwardResult(False, error="self_forward_rejected")
    if not sel.targets:
        detail: dict[str, object] = {"to": request.to, "roster": list(group.roster)}
        return ForwardResult(False, error="target_not_in_roster", detail=detail)
    chain = shard.guard(group).chain(request.origin.chain_id)
    dispatched: list[str] = []
    for target in sel.targets:
        # The forwarded turn is one hop further from the person's message.
        depth = request.origin.depth + 1
        verdict = shard.admit(group, chain, request.from_vp, target, depth)
        if not verdict.ok:
            await shard.refused(group, chain, verdict)
            return ForwardResult(
                False, tuple(dispatched), error=verdict.rule, detail=dict(verdict.detail)
            )
        msg = GroupMessage(
            author=request.from_vp,
            role="assistant",
            text=request.text,
            meta={
                "internal": True,
                "injectedBy": "route_forward",
                "routeForwardTarget": target,
                "senderVpId": request.from_vp,
                "reason": request.reason,
                "causedBy": [*request.origin.caused_by, request.origin.trigger_id],
                "chainId": request.origin.chain_id,
            },
        )
        # The hand-off is shown before the turn it starts writes anything.
        stored, _ = await GroupEvents(shard.store, group.id).store_message(msg)
        await shard.turns.start(group, target, request.origin.next_hop(stored.id))
        dispatched.append(target)
    return ForwardResult(True, tuple(dispatched))


@OPS.on(Regenerate)
async def regenerate(shard: Shard, cmd: Regenerate) -> RegenerateResult:
    """Answer again the message a VP's latest reply answered (``coordinator.regenerate``).

    The new turn is admitted like any other (``busy``, the loop guard);
    the old reply is marked superseded and every member is told; the two
    are versions of one reply (``coordinator.versions``).
    """
    await shard.recover()
    group = await shard.groups.require(cmd.group_id)
    reply = await regenerable_reply(shard.store, group, cmd.message_id)
    if shard.turns.busy(group.id, reply.author):
        # Its next turn would rewind past what the running one writes.
        raise GroupError(
            GroupErrorCode.CONFLICT,
            f"@{reply.author} is still answering in this group: regenerate once it is done",
        )
    turn_id = await rerun(shard, group, reply, cmd.by)
    trigger = str(list(reply.meta.get("causedBy") or [reply.id])[-1])
    return RegenerateResult(reply.id, reply.author, turn_id, trigger)


@OPS.on(Cancel)
async def cancel(shard: Shard, cmd: Cancel) -> CancelResult:
    return await shard.cancel(await shard.groups.require(cmd.group_id), cmd.vp_id)


@OPS.on(Answer)
async def answer(shard: Shard, cmd: Answer) -> AnswerReceipt:
    group = await shard.groups.require(cmd.group_id)
    return await shard.turns.answer(group, cmd.request_id, cmd.answer)


@OPS.on(WaitIdle)
async def wait_idle(shard: Shard, cmd: WaitIdle) -> bool:
    return await shard.turns.wait_idle(cmd.group_id, cmd.timeout_s)


@OPS.on(Warm)
async def warm(shard: Shard, cmd: Warm) -> None:
    group = await shard.groups.get(cmd.group_id)
    await shard.turns.warm(group.roster if group is not None else [])


@OPS.on(VPStatsOf)
async def vp_stats(shard: Shard, cmd: VPStatsOf) -> list[VPStats]:
    vps = (
        cmd.vp_ids if cmd.vp_ids is not None else (await shard.groups.require(cmd.group_id)).roster
    )
    return await shard.turns.stats(list(vps))
