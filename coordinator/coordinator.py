"""The coordinator actor: groups, roster, mention routing, fan-out, loop guard.

Groups are sharded over several coordinator actors by id, so each group has
exactly one coordinator and its loop guard and in-flight turns live in one
place. Every message is persisted before anything is dispatched, every turn
is recorded before it is sent, and every dispatched turn ends with a
``result`` envelope, even when its VP actor dies or the whole deployment
restarts: a coordinator recovers its shard's unfinished turns when it starts
(``recover``), before it takes any message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from actors.config import RuntimeConfig
from actors.process import settle
from actors.tools import vp_tools
from actors.turns import ForwardRequest, QueuePolicy, TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPStats
from actors.writer import GroupEvents
from coordinator.chains import rebuild_chain
from coordinator.dispatch import Dispatcher
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.groups import GroupBook, unknown_names
from coordinator.loop_guard import Chain, LoopGuard, Verdict
from coordinator.membership import GroupEdit, MemberOp, Membership, require_owner
from coordinator.regenerate import RegenerateResult, origin_of, regenerable_reply
from coordinator.results import (
    CancelResult,
    DrainResult,
    ForwardResult,
    IngestResult,
    RecoveryReport,
)
from coordinator.shards import shard_of
from coordinator.team import TeamDesk
from coordinator.team_calls import takes_task_path
from coordinator.team_run import TaskBoard, TeamServices
from engine.events import StopReason
from engine.mcp import McpConfig
from personas.directory import PersonaDirectory
from personas.mentions import extract_mentions
from personas.routing import Selection, Source, select_targets
from protocol import MessageChange, MessageChanged, split_queue_prefix
from protocol.settings import GroupSettingsPatch
from protocol.tasks import Task
from store.base import Group, GroupMessage, Store
from store.conversation import ConversationInfo, GroupKind
from store.turns import TurnRecord

log = logging.getLogger(__name__)

# Replies of turns that ended this way are never routed on.
_NOT_ROUTED = frozenset({StopReason.TOOL_HANDOFF, StopReason.ABORTED, StopReason.ERROR})


class CoordinatorWorker:
    """The one owner of a shard of groups: their records, chains and turns.

    A person's message is stored, then fanned out to the VPs its mentions
    select; a VP's reply that mentions others and a ``route_forward`` go
    through the same selection rules and the group's :class:`LoopGuard`.
    Operations that fail raise :class:`~coordinator.errors.GroupError`;
    forwards never raise (a refusal is a :class:`ForwardResult`).
    """

    def __init__(self, shard: int, config: RuntimeConfig) -> None:
        self.shard = shard
        self.config = config
        self.started_at = time.time()
        self.store: Store = config.open_store()
        self.personas = PersonaDirectory.open(config.personas_dir)
        self.groups = GroupBook(self.store, self.personas)
        self.membership = Membership(self.groups, self.store)
        name = config.actor_name("coordinator", shard)
        self.turns = Dispatcher(config, self.store, name, self._after_turn)
        services = TeamServices(
            self.store,
            self.turns,
            self.personas,
            TaskBoard(self.store),
            self._admit_run,
            config.store.data_dir,
            tool_names=frozenset(t.name for t in vp_tools(config.engine)),
        )
        self.team = TeamDesk(services, self._chat, self._start_chain)
        self._guards: dict[str, LoopGuard] = {}
        # Recovery starts with the actor (Ray runs an async actor's __init__
        # on its event loop), so a coordinator Ray restarts takes its turns
        # back even if no call comes; every turn operation waits for it.
        self._recovery: asyncio.Task[RecoveryReport] | None = None
        settle()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # built outside a loop (a test): the first call recovers
        else:
            self._recovery = self._start_recovery()

    def _guard(self, group: Group) -> LoopGuard:
        guard = self._guards.get(group.id)
        if guard is None:
            guard = self._guards[group.id] = LoopGuard(group.settings)
        guard.settings = group.settings
        return guard

    async def _resume_chain(self, group: Group, root_id: str) -> Chain:
        """The chain ``root_id``; one this coordinator does not hold is rebuilt from the store.

        So a restart keeps the loop guard's counts (``coordinator.chains``):
        a chain that was at its limit stays refused.
        """
        guard = self._guard(group)
        if guard.known(root_id):
            return guard.chain(root_id)
        return guard.adopt(await rebuild_chain(self.store, group.id, root_id))

    # -- group management ---------------------------------------------------
    async def create_group(
        self,
        group_id: str,
        name: str,
        roster: list[str],
        default_vp: str | None = None,
        members: list[str] | None = None,
        settings: GroupSettingsPatch | None = None,
    ) -> Group:
        group = await self.groups.create(
            group_id, name, roster, default_vp, list(members or []), settings
        )
        await self.turns.warm(group.roster)
        return group

    async def create_conversation(self, group_id: str, name: str, info: ConversationInfo) -> Group:
        """Create a one-to-one conversation: a private group of one VP and its owner."""
        return await self.groups.create_conversation(group_id, name, info)

    async def get_group(self, group_id: str) -> Group | None:
        return await self.groups.get(group_id)

    async def rename_group(self, group_id: str, name: str) -> Group:
        return await self.groups.rename(group_id, name)

    async def delete_group(self, group_id: str, actor: str | None = None) -> bool:
        group = await self.groups.get(group_id)
        if group is not None:
            if actor is not None:
                require_owner(group, actor, "delete the group")
            await self.cancel(group_id)
        await self.team.forget(group_id)
        self._guards.pop(group_id, None)
        self.turns.forget(group_id)
        deleted = await self.groups.forget(group_id)
        if group is not None and deleted:
            await self.membership.deleted(group, actor)
        return deleted

    async def add_vp(self, group_id: str, vp_id: str) -> Group:
        return await self.groups.add_vp(group_id, vp_id)

    async def remove_vp(self, group_id: str, vp_id: str) -> Group:
        _, vp = await self.groups.member_vp(group_id, vp_id)
        await self.turns.cancel(group_id, vp)
        return await self.groups.remove_vp(group_id, vp)

    async def set_default_vp(self, group_id: str, vp_id: str | None) -> Group:
        return await self.groups.set_default_vp(group_id, vp_id)

    async def update_settings(self, group_id: str, patch: GroupSettingsPatch) -> Group:
        return await self.groups.update_settings(group_id, patch)

    async def set_members(self, group_id: str, members: list[str]) -> Group:
        return await self.groups.set_members(group_id, members)

    async def change_members(self, group_id: str, actor: str, op: MemberOp) -> Group:
        return await self.membership.change(group_id, actor, op)

    async def edit_group(self, group_id: str, actor: str, edit: GroupEdit) -> Group:
        return await self.membership.edit(group_id, actor, edit)

    async def set_mcp(self, config: McpConfig) -> None:
        """VP actors this shard starts from now on get these MCP servers."""
        self.config = replace(self.config, mcp=config)
        self.turns.config = self.config

    async def allow_tool(self, group_id: str, tool: str, vp_id: str) -> None:
        """A person answered "always in this group" to ``vp_id``'s approval question."""
        await self.membership.allow_tool(group_id, tool, vp_id)

    # -- restarts -----------------------------------------------------------
    async def recover(self) -> RecoveryReport:
        """Take over this shard's turns that have no result (once per actor life)."""
        task = self._recovery
        if task is None:
            task = self._recovery = self._start_recovery()
        try:
            return await asyncio.shield(task)
        except Exception:
            if self._recovery is task:
                self._recovery = None  # the store was down, say: the next call tries again
            raise

    def _start_recovery(self) -> asyncio.Task[RecoveryReport]:
        task = asyncio.get_running_loop().create_task(self._recover())
        task.add_done_callback(_log_failure)
        return task

    async def _recover(self) -> RecoveryReport:
        shards = self.config.coordinator_shards
        records = [
            r for r in await self.store.open_turns() if shard_of(r.group_id, shards) == self.shard
        ]
        groups: dict[str, Group] = {}
        for group_id in {r.group_id for r in records}:
            group = await self.groups.get(group_id)
            if group is not None:
                groups[group_id] = group
        for record in records:
            if record.group_id in groups:
                await self._resume_chain(groups[record.group_id], record.chain_id)
        report = await self.turns.recover(records, groups, self.started_at)
        tasks = [
            t for t in await self.store.open_tasks() if shard_of(t.group_id, shards) == self.shard
        ]
        alive = {g for g in {t.group_id for t in tasks} if await self.groups.get(g) is not None}
        await self.team.recover(tasks, alive)
        if records:
            log.warning(
                "coordinator %d recovered %d unfinished turns: %d followed, %d sent again, "
                "%d ended as interrupted",
                self.shard,
                len(records),
                report.followed,
                report.rerun,
                report.interrupted,
            )
        return report

    async def reach_hosts(self) -> None:
        """Call the pooled VP hosts once now, so that no turn's call is the first."""
        self.turns.reach_hosts()

    async def drain(self, timeout_s: float) -> DrainResult:
        """A graceful shutdown: let turns finish for ``timeout_s``, end the rest with a result."""
        await self.recover()
        return await self.turns.drain(timeout_s)

    # -- messages -----------------------------------------------------------
    async def ingest(
        self,
        group_id: str,
        sender: str,
        text: str,
        mentions: list[str] | None = None,
        client_message_id: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
        member_of: GroupKind | None = None,
    ) -> IngestResult:
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
        await self.recover()
        group = await self.groups.require(group_id)
        if member_of is not None and (group.kind is not member_of or sender not in group.members):
            raise GroupError(GroupErrorCode.NOT_FOUND, "group not found")
        names = list(dict.fromkeys([*extract_mentions(text), *(mentions or [])]))
        if group.kind is GroupKind.CONVERSATION:
            names = []  # its one VP answers everything; an "@word" is just text
        if takes_task_path(group, text, names):
            # A team may give every VP of the group a turn.
            with self.turns.admission.reserve(group.id, list(group.roster)):
                return await self.team.ingest(group, sender, text, client_message_id, attachments)
        sel = self._select(group, names, Source.PERSON, None)
        with self.turns.admission.reserve(group.id, sel.targets):
            return await self._accept(group, sel, sender, text, client_message_id, attachments)

    async def _accept(
        self,
        group: Group,
        sel: Selection,
        sender: str,
        text: str,
        client_message_id: str | None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> IngestResult:
        """Store an admitted message with its turns, then dispatch them."""
        mode, text = split_queue_prefix(text)
        meta: dict[str, object] = {"trigger": str(sel.trigger)}
        if mode is not None:
            meta["queueMode"] = str(mode)
        if client_message_id:
            meta["clientMessageId"] = client_message_id
        if attachments:
            meta["attachments"] = list(attachments)
        msg = GroupMessage(author=sender, role="user", text=text, mentions=sel.targets, meta=meta)
        chain = self._guard(group).start_chain(msg.id)
        origin = TurnOrigin.of_message(msg)
        reqs, refused = self._admit_all(group, chain, sel.targets, origin, source=None)
        # A busy VP takes the message as the group (or the message's prefix) says.
        policy = QueuePolicy.of(group.settings, mode)
        reqs = [replace(req, queue=policy) for req in reqs]
        # The message and the turns that answer it are stored in one write:
        # nothing is acked without its turns, and a repeat records none.
        records = [req.record() for req in reqs]
        events = GroupEvents(self.store, group.id)
        stored, created = await events.store_message(msg, records)
        if not created:
            turns = await self._resend(group, stored)
            return IngestResult(stored.id, duplicate=True, trigger=str(sel.trigger), turns=turns)
        if sel.unknown:
            await unknown_names(events, group, sel.unknown, stored.id)
        elif not sel.targets:
            await _no_vp(events, stored.id)
        if refused is not None:
            await self._refused(group, chain, refused)
        turns = {req.vp_id: self.turns.launch(replace(req, trigger=stored)) for req in reqs}
        return IngestResult(
            stored.id,
            trigger=str(sel.trigger),
            unknown=tuple(sel.unknown),
            truncated=sel.truncated,
            turns=turns,
        )

    async def _chat(self, group: Group, message: GroupMessage) -> None:
        """Answer a message the router left as plain chat: the group's usual targets."""
        sel = self._select(group, [], Source.PERSON, None)
        if not sel.targets:
            await _no_vp(GroupEvents(self.store, group.id), message.id)
            return
        chain = await self._resume_chain(group, message.id)
        origin, policy = TurnOrigin.of_message(message), QueuePolicy.of(group.settings)
        await self._dispatch(group, chain, sel.targets, origin, source=None, queue=policy)

    def _start_chain(self, group: Group, root_id: str) -> None:
        self._guard(group).start_chain(root_id)

    async def _admit_run(self, group: Group, root_id: str, vp: str) -> str | None:
        """The loop guard's word on a task's run: None when admitted, else the refusal."""
        chain = await self._resume_chain(group, root_id)
        verdict = self._admit(group, chain, None, vp, 0)
        if verdict.ok:
            return None
        await self._refused(group, chain, verdict)
        return verdict.summary

    # -- tasks (team mode) ----------------------------------------------------
    async def accept_task(self, group_id: str, task_id: str, by: str) -> Task:
        return await self.team.accept(await self.groups.require(group_id), task_id, by)

    async def revise_task(self, group_id: str, task_id: str, by: str, text: str) -> Task:
        return await self.team.revise(await self.groups.require(group_id), task_id, by, text)

    async def abandon_task(self, group_id: str, task_id: str, by: str) -> Task:
        return await self.team.abandon(await self.groups.require(group_id), task_id, by)

    async def team_idle(self) -> None:
        """Wait until no routing, attempt or learning of this shard is running (tests)."""
        await self.team.idle()

    async def _resend(self, group: Group, stored: GroupMessage) -> dict[str, str]:
        """Dispatch a repeated message again to the VPs that never answered it."""
        by_vp: defaultdict[str, list[TurnRecord]] = defaultdict(list)
        for record in await self.store.turns_of(group.id, stored.id):
            by_vp[record.vp_id].append(record)
        again = [
            vp
            for vp in stored.mentions
            if vp in group.roster and all(r.finished and r.interrupted for r in by_vp[vp])
        ]
        if not again:
            return {}
        chain = await self._resume_chain(group, stored.id)
        return await self._dispatch(group, chain, again, TurnOrigin.of_message(stored), None)

    async def forward(self, request: ForwardRequest) -> ForwardResult:
        """The ``route_forward`` tool's way in. Never raises: refusals are data."""
        await self.recover()
        group = await self.groups.get(request.group_id)
        if group is None:
            return ForwardResult(False, error="group_not_found")
        if request.from_vp not in group.roster:
            return ForwardResult(False, error="sender_unknown")
        sel = self._select(group, [request.to], Source.FORWARD, request.from_vp)
        if sel.named_self and not sel.targets:
            return ForwardResult(False, error="self_forward_rejected")
        if not sel.targets:
            detail: dict[str, object] = {"to": request.to, "roster": list(group.roster)}
            return ForwardResult(False, error="target_not_in_roster", detail=detail)
        chain = self._guard(group).chain(request.origin.chain_id)
        dispatched: list[str] = []
        for target in sel.targets:
            # The forwarded turn is one hop further from the person's message.
            depth = request.origin.depth + 1
            verdict = self._admit(group, chain, request.from_vp, target, depth)
            if not verdict.ok:
                await self._refused(group, chain, verdict)
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
            stored, _ = await GroupEvents(self.store, group.id).store_message(msg)
            await self.turns.start(group, target, request.origin.next_hop(stored.id))
            dispatched.append(target)
        return ForwardResult(True, tuple(dispatched))

    async def regenerate(self, group_id: str, message_id: str, by: str) -> RegenerateResult:
        """Answer again the message a VP's latest reply answered (``coordinator.regenerate``).

        The new turn is admitted like any other (``busy``, the loop guard);
        the old reply is marked superseded and every member is told.
        """
        await self.recover()
        group = await self.groups.require(group_id)
        reply = await regenerable_reply(self.store, group, message_id)
        if self.turns.busy(group.id, reply.author):
            # Its next turn would rewind past what the running one writes.
            raise GroupError(
                GroupErrorCode.CONFLICT,
                f"@{reply.author} is still answering in this group: regenerate once it is done",
            )
        origin = await origin_of(self.store, group.id, reply, by)
        chain = await self._resume_chain(group, origin.chain_id)
        with self.turns.admission.reserve(group.id, [reply.author]):
            verdict = self._admit(group, chain, None, reply.author, origin.depth)
            if not verdict.ok:
                await self._refused(group, chain, verdict)
                raise GroupError(GroupErrorCode.CONFLICT, verdict.summary)
            req = replace(self.turns.plan(group, reply.author, origin), regenerates=reply.id)
            await self.turns.record(group.id, [req])
            await self.store.supersede_message(
                group.id, reply.id, turn_id=req.turn_id, by=by, ts=time.time()
            )
            await GroupEvents(self.store, group.id).changed(
                MessageChanged(
                    group_id=group.id,
                    message_id=reply.id,
                    change=MessageChange.SUPERSEDED,
                    by=by,
                    ts=time.time(),
                    turn_id=req.turn_id,
                )
            )
            turn_id = self.turns.launch(req)
        return RegenerateResult(reply.id, reply.author, turn_id, origin.trigger_id)

    async def cancel(self, group_id: str, vp_id: str | None = None) -> CancelResult:
        """Abort one VP's turns in a group, or every turn (which also ends its chains)."""
        group = await self.groups.require(group_id)
        await self.recover()
        if vp_id is None:
            self._guard(group).stop_all()
            await self.team.stop(group_id)
        return await self.turns.cancel(group_id, vp_id)

    async def answer(self, group_id: str, request_id: str, answer: str) -> bool:
        """Deliver an ``ask_user_answer`` to the VP that asked."""
        return await self.turns.answer(await self.groups.require(group_id), request_id, answer)

    async def question_group(self, request_id: str) -> str | None:
        """The group an open question was asked in (any shard may be asked)."""
        return await self.turns.question_group(request_id)

    async def wait_idle(self, group_id: str, timeout_s: float = 60.0) -> bool:
        """Wait until no turn of the group is running or about to be dispatched."""
        return await self.turns.wait_idle(group_id, timeout_s)

    async def warm(self, group_id: str) -> None:
        """Start the actors of the group's roster (someone opened it) unless they run."""
        await self.turns.warm(group.roster if (group := await self.groups.get(group_id)) else [])

    async def vp_stats(self, group_id: str, vp_ids: list[str] | None = None) -> list[VPStats]:
        """Per-VP counters (model calls, active turns); also starts the actors."""
        vps = vp_ids if vp_ids is not None else (await self.groups.require(group_id)).roster
        return await self.turns.stats(list(vps))

    # -- routing ------------------------------------------------------------
    def _select(
        self, group: Group, names: list[str], source: Source, sender: str | None
    ) -> Selection:
        return select_targets(
            names,
            group.roster,
            source=source,
            sender=sender,
            resolve=self.personas.resolve,
            cap=group.settings.fanout_cap,
            broadcast_when_unmentioned=group.settings.broadcast_when_unmentioned,
            default_vp=group.default_vp,
        )

    def _admit(
        self, group: Group, chain: Chain, source: str | None, target: str, depth: int
    ) -> Verdict:
        return self._guard(group).admit(chain, source=source, target=target, depth=depth)

    async def _dispatch(
        self,
        group: Group,
        chain: Chain,
        vps: Sequence[str],
        origin: TurnOrigin,
        source: str | None,
        queue: QueuePolicy | None = None,
    ) -> dict[str, str]:
        """Start a turn of each VP the loop guard admits, in order, until it refuses one.

        The turns are recorded in the store in one write before any is sent.
        Returns the turn id of each VP started.
        """
        reqs, refused = self._admit_all(group, chain, vps, origin, source)
        if queue is not None:
            reqs = [replace(req, queue=queue) for req in reqs]
        if refused is not None:
            await self._refused(group, chain, refused)
        if reqs:
            await self.turns.record(group.id, reqs)
        return {req.vp_id: self.turns.launch(req) for req in reqs}

    def _admit_all(
        self, group: Group, chain: Chain, vps: Sequence[str], origin: TurnOrigin, source: str | None
    ) -> tuple[list[TurnRequest], Verdict | None]:
        """The turns the loop guard admits, in order, and the refusal that stopped it (if any)."""
        reqs: list[TurnRequest] = []
        for vp in vps:
            verdict = self._admit(group, chain, source, vp, origin.depth)
            if not verdict.ok:
                return reqs, verdict
            reqs.append(self.turns.plan(group, vp, origin))
        return reqs, None

    async def _after_turn(self, req: TurnRequest, outcome: TurnOutcome) -> None:
        """Dispatch the VPs a finished reply mentions, if the group allows it.

        The VP actor already stored the reply (before its result went out)
        and chose its targets with the same rules as a person's message;
        this only routes it on.
        """
        group = await self.groups.get(req.group_id)
        if group is None or outcome.message_id is None or req.delegation is not None:
            return  # a task's run answers its attempt, which routes nothing on
        if outcome.reason in _NOT_ROUTED or not group.settings.vp_mentions_dispatch:
            return
        if outcome.unknown:
            events = GroupEvents(self.store, group.id)
            await unknown_names(events, group, outcome.unknown, outcome.message_id)
        chain = self._guard(group).chain(req.origin.chain_id)
        origin = req.origin.next_hop(outcome.message_id)
        targets = [vp for vp in outcome.mentions if vp in group.roster]
        await self._dispatch(group, chain, targets, origin, source=req.vp_id)

    # -- notices ------------------------------------------------------------
    async def _refused(self, group: Group, chain: Chain, verdict: Verdict) -> None:
        if not verdict.stopped_chain:
            return  # the chain was stopped before (or cancelled), and said so then
        events = GroupEvents(self.store, group.id)
        await events.notice(verdict.summary, chain.root, str(verdict.rule), **verdict.detail)


def _log_failure(task: asyncio.Task[RecoveryReport]) -> None:
    """Report a recovery that failed with nobody awaiting it (the next call retries)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("turn recovery failed", exc_info=task.exception())


async def _no_vp(events: GroupEvents, root: str) -> None:
    await events.notice("No VP is available to answer: add a VP to this group.", root, "no_vp")
