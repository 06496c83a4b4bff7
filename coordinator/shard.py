"""One coordinator shard's state: its groups' records, chains, turns and tasks.

Groups are sharded over several coordinator actors by id, so each group has
exactly one coordinator and its loop guard and in-flight turns live in one
place. Every message is persisted before anything is dispatched, every turn
is recorded before it is sent, and every dispatched turn ends with a
``result`` envelope, even when its VP actor dies or the whole deployment
restarts: a shard recovers its unfinished turns when it starts
(:meth:`Shard.recover`), before it takes any message.

What the shard does is in its commands' handlers (``coordinator.ops_*``),
registered in :data:`OPS`; this module holds what they share: routing a
selection through the loop guard to dispatched turns, and recovery.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from actors.commands import Handlers
from actors.config import RuntimeConfig
from actors.group_events import GroupEvents
from actors.tools import vp_tools
from actors.turns import QueuePolicy, TurnOrigin, TurnOutcome, TurnRequest
from coordinator import quota_gate
from coordinator.chains import rebuild_chain
from coordinator.dispatch import Dispatcher
from coordinator.groups import GroupBook, unknown_names
from coordinator.loop_guard import Chain, LoopGuard, Verdict
from coordinator.membership import Membership
from coordinator.results import CancelResult, RecoveryReport
from coordinator.shards import shard_of
from coordinator.team.desk import TeamDesk
from coordinator.team.run import TaskBoard, TeamServices
from engine.embeddings import open_embedder
from engine.events import StopReason
from personas.directory import PersonaDirectory
from personas.routing import Selection, Source, select_targets
from protocol.reply_routes import ReplyRouted
from store.base import Group, GroupMessage, Store
from store.turns import TurnRecord
from team.skills import EmbeddingRetriever
from telemetry import tracing

log = logging.getLogger(__name__)

# Replies of turns that ended this way are never routed on.
_NOT_ROUTED = frozenset({StopReason.TOOL_HANDOFF, StopReason.ABORTED, StopReason.ERROR})


class Shard:
    """The one owner of a shard of groups: their records, chains and turns.

    A person's message is stored, then fanned out to the VPs its mentions
    select; a VP's reply that mentions others and a ``route_forward`` go
    through the same selection rules and the group's :class:`LoopGuard`.
    """

    def __init__(self, number: int, config: RuntimeConfig) -> None:
        self.number = number
        self.config = config
        self.started_at = time.time()
        self.store: Store = config.open_store()
        self.personas = PersonaDirectory.open(config.personas_dir)
        self.groups = GroupBook(self.store, self.personas)
        self.membership = Membership(self.groups, self.store)
        name = config.actor_name("coordinator", number)
        self.turns = Dispatcher(config, self.store, name, self.after_turn)
        services = TeamServices(
            self.store,
            self.turns,
            self.personas,
            TaskBoard(self.store),
            self.admit_run,
            config.store.data_dir,
            tool_names=frozenset(t.name for t in vp_tools(config.engine)),
        )
        # Skills are recalled by embeddings when an embedding model is configured.
        self.embedder = open_embedder(config.engine)
        if self.embedder is not None:
            services.retriever = EmbeddingRetriever(self.embedder)
        self.team = TeamDesk(services, self.chat, self.start_chain)
        self._guards: dict[str, LoopGuard] = {}
        # Recovery starts with the shard (Ray runs an async actor's __init__
        # on its event loop), so a coordinator Ray restarts takes its turns
        # back even if no call comes; every turn operation waits for it.
        self._recovery: asyncio.Task[RecoveryReport] | None = None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # built outside a loop (a test): the first call recovers
        else:
            self._recovery = self._start_recovery()

    async def close(self) -> None:
        """End the open turns with a result, stop team-mode jobs, close the store."""
        await self.recover()
        await self.turns.drain(0.0)
        await self.team.close()
        if self.embedder is not None:
            await self.embedder.aclose()
        await self.store.close()

    # -- chains ---------------------------------------------------------------
    def guard(self, group: Group) -> LoopGuard:
        guard = self._guards.get(group.id)
        if guard is None:
            guard = self._guards[group.id] = LoopGuard(group.settings)
        guard.settings = group.settings
        return guard

    def forget(self, group_id: str) -> None:
        self._guards.pop(group_id, None)

    async def resume_chain(self, group: Group, root_id: str) -> Chain:
        """The chain ``root_id``; one this shard does not hold is rebuilt from the store.

        So a restart keeps the loop guard's counts (``coordinator.chains``):
        a chain that was at its limit stays refused.
        """
        guard = self.guard(group)
        if guard.known(root_id):
            return guard.chain(root_id)
        return guard.adopt(await rebuild_chain(self.store, group.id, root_id))

    def start_chain(self, group: Group, root_id: str) -> None:
        self.guard(group).start_chain(root_id)

    async def cancel(self, group: Group, vp_id: str | None) -> CancelResult:
        """Abort one VP's turns in a group, or every turn (which also ends its chains)."""
        await self.recover()
        if vp_id is None:
            self.guard(group).stop_all()
            await self.team.stop(group.id)
        return await self.turns.cancel(group.id, vp_id)

    # -- restarts ---------------------------------------------------------------
    async def recover(self) -> RecoveryReport:
        """Take over this shard's turns that have no result (once per shard life)."""
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
            r for r in await self.store.open_turns() if shard_of(r.group_id, shards) == self.number
        ]
        groups: dict[str, Group] = {}
        for group_id in {r.group_id for r in records}:
            group = await self.groups.get(group_id)
            if group is not None:
                groups[group_id] = group
        for record in records:
            if record.group_id in groups:
                await self.resume_chain(groups[record.group_id], record.chain_id)
        report = await self.turns.recover(records, groups, self.started_at)
        tasks = [
            t for t in await self.store.open_tasks() if shard_of(t.group_id, shards) == self.number
        ]
        alive = {g for g in {t.group_id for t in tasks} if await self.groups.get(g) is not None}
        await self.team.recover(tasks, alive)
        if records:
            log.warning(
                "coordinator %d recovered %d unfinished turns: %d followed, %d sent again, "
                "%d ended as interrupted",
                self.number,
                len(records),
                report.followed,
                report.rerun,
                report.interrupted,
            )
        return report

    # -- routing ------------------------------------------------------------------
    def select(
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

    def admit(
        self, group: Group, chain: Chain, source: str | None, target: str, depth: int
    ) -> Verdict:
        verdict = self.guard(group).admit(chain, source=source, target=target, depth=depth)
        tracing.event(
            "loop_guard",
            {
                "yeaft.vp.id": target,
                "yeaft.source": source,
                "yeaft.depth": depth,
                "yeaft.admitted": verdict.ok,
                "yeaft.rule": str(verdict.rule) if verdict.rule else None,
            },
        )
        return verdict

    def admit_all(
        self, group: Group, chain: Chain, vps: Sequence[str], origin: TurnOrigin, source: str | None
    ) -> tuple[list[TurnRequest], Verdict | None]:
        """The turns the loop guard admits, in order, and the refusal that stopped it (if any)."""
        reqs: list[TurnRequest] = []
        for vp in vps:
            verdict = self.admit(group, chain, source, vp, origin.depth)
            if not verdict.ok:
                return reqs, verdict
            reqs.append(self.turns.plan(group, vp, origin))
        return reqs, None

    async def dispatch(
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
        The turns are also reserved on the budgets (``coordinator.quota_gate``): a
        spent budget stops them with one notice per chain.
        Returns the turn id of each VP started.
        """
        reqs, refused = self.admit_all(group, chain, vps, origin, source)
        reqs, spent = await quota_gate.gate(self.store, group, reqs)
        if queue is not None:
            reqs = [replace(req, queue=queue) for req in reqs]
        if refused is not None:
            await self.refused(group, chain, refused)
        if spent is not None and not chain.quota_noticed:
            chain.quota_noticed = True
            await quota_gate.quota_notice(GroupEvents(self.store, group.id), spent, chain.root)
        if reqs:
            await self.turns.record(group.id, reqs)
        return {req.vp_id: self.turns.launch(req) for req in reqs}

    async def chat(self, group: Group, message: GroupMessage) -> None:
        """Answer a message the router left as plain chat: the group's usual targets."""
        sel = self.select(group, [], Source.PERSON, None)
        if not sel.targets:
            await no_vp(GroupEvents(self.store, group.id), message.id)
            return
        chain = await self.resume_chain(group, message.id)
        origin, policy = TurnOrigin.of_message(message), QueuePolicy.of(group.settings)
        await self.dispatch(group, chain, sel.targets, origin, source=None, queue=policy)

    async def admit_run(self, group: Group, root_id: str, vp: str) -> str | None:
        """The loop guard's word on a task's run: None when admitted, else the refusal."""
        chain = await self.resume_chain(group, root_id)
        verdict = self.admit(group, chain, None, vp, 0)
        if verdict.ok:
            return None
        await self.refused(group, chain, verdict)
        return verdict.summary

    async def resend(self, group: Group, stored: GroupMessage) -> dict[str, str]:
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
        chain = await self.resume_chain(group, stored.id)
        return await self.dispatch(group, chain, again, TurnOrigin.of_message(stored), None)

    async def after_turn(self, req: TurnRequest, outcome: TurnOutcome) -> None:
        """Dispatch the VPs a finished reply mentions, if the group allows it.

        The VP actor already stored the reply (before its result went out)
        and chose its targets with the same rules as a person's message;
        this only routes it on.
        """
        group = await self.groups.get(req.group_id)
        if group is None or outcome.message_id is None:
            return
        routed = ReplyRouted(
            group_id=group.id,
            chain_id=req.origin.chain_id,
            from_vp=req.vp_id,
            message_id=outcome.message_id,
        )
        events = GroupEvents(self.store, group.id)
        if (
            req.delegation is not None  # a task's run answers its attempt, which routes nothing on
            or outcome.reason in _NOT_ROUTED
            or not group.settings.vp_mentions_dispatch
        ):
            if outcome.mentions:  # its result promised one (actors.writer)
                await events.reply_routed(routed.model_copy(update={"refused": "not_routed"}))
            return
        if outcome.unknown:
            await unknown_names(events, group, outcome.unknown, outcome.message_id)
        chain = self.guard(group).chain(req.origin.chain_id)
        origin = req.origin.next_hop(outcome.message_id)
        targets = [vp for vp in outcome.mentions if vp in group.roster]
        started = await self.dispatch(group, chain, targets, origin, source=req.vp_id)
        if outcome.mentions:
            refused = None
            if len(started) < len(targets):
                refused = str(chain.stopped or ("quota" if chain.quota_noticed else "refused"))
            await events.reply_routed(
                routed.model_copy(update={"turns": started, "refused": refused})
            )

    async def refused(self, group: Group, chain: Chain, verdict: Verdict) -> None:
        """Tell the group the loop guard stopped a chain (once per chain)."""
        if not verdict.stopped_chain:
            return  # the chain was stopped before (or cancelled), and said so then
        events = GroupEvents(self.store, group.id)
        await events.notice(verdict.summary, chain.root, str(verdict.rule), **verdict.detail)


OPS: Handlers[Shard] = Handlers("coordinator")


def _log_failure(task: asyncio.Task[RecoveryReport]) -> None:
    """Report a recovery that failed with nobody awaiting it (the next call retries)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("turn recovery failed", exc_info=task.exception())


async def no_vp(events: GroupEvents, root: str) -> None:
    """Tell the group that no VP could take a message."""
    await events.notice("No VP is available to answer: add a VP to this group.", root, "no_vp")
