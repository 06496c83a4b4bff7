"""Turns on VP actors: record them, start them, follow each to its one result, abort them.

Every turn is recorded in the store (``store.turns``) before it is sent, so
a turn outlives the processes that run it. It is sent to its VP actor, which
returns its :class:`~actors.turns.TurnOutcome`; the VP marks the record
started in the same store step as the turn's first status, before anything
of it is visible. So when a VP actor dies, the dispatcher reads that one
record to know whether the turn had started: one that had not goes to the
restarted actor; one that had ends with an error result. (No message from
the VP says so on the way: a Ray call per turn, on the VP's path to its
model call, would cost more than this read on the rare failure path.)

When the coordinator itself starts again, or shuts down gracefully, its
open turns are taken over or drained (``coordinator.recovery``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

from ray.actor import ActorHandle
from ray.exceptions import ActorUnavailableError, RayError

from actors.config import RuntimeConfig
from actors.group_events import GroupEvents, error_stop
from actors.turns import (
    TurnOrigin,
    TurnOutcome,
    TurnRequest,
    TurnState,
    TurnTracker,
    question_vp,
)
from actors.vp_commands import (
    Abort,
    AnswerQuestion,
    AnswerReceipt,
    AnswerVerdict,
    Ping,
    QuestionOf,
    RunTurn,
    Stats,
    VPStats,
)
from actors.vp_host import VPHost
from actors.writer import TurnWriter
from coordinator.admission import Admission
from coordinator.lane_stamps import LaneStamps
from coordinator.recovery import FollowedTurn, OnOutcome, TurnRecovery
from coordinator.results import CancelResult
from coordinator.vps import VPClient, host_names, pooled_hosts, start_named
from engine.events import StopReason
from store.base import Group, Store, StoreError
from store.turns import TurnEnd, TurnPhase
from telemetry import tracing

log = logging.getLogger(__name__)

# A turn sent while its VP actor restarts waits for it, this often and this long.
RESTART_RETRIES = 3
RESTART_WAIT_S = 30.0


class Dispatcher(TurnRecovery):
    """The turns of one coordinator's groups, from dispatch to their single result.

    ``host`` is the coordinator's own actor name, handed to every turn (for
    tool approvals and, in groups of more than one VP, ``route_forward``). ``on_outcome`` runs
    after each turn that ended with an outcome (it routes replies on).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        store: Store,
        host: str,
        on_outcome: OnOutcome,
    ) -> None:
        self.config = config
        self.store = store
        self._host = host
        self._on_outcome = on_outcome
        self._vps: dict[str, VPClient] = {}
        # The VP hosts' handles by actor name: a pooled host's VPs share one.
        self._hosts: dict[str, ActorHandle[VPHost]] = {}
        self._turns: dict[str, dict[str, FollowedTurn]] = {}
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}
        # Counts every turn from its dispatch until its task ends.
        self.admission = Admission.for_shard(config)
        # Each (group, VP) lane's order, stamped on its turns as they are sent.
        self.lanes = LaneStamps()

    async def vp(self, vp_id: str) -> VPClient:
        """The VP, in its host actor (started on first use, found by name if it exists)."""
        client = self._vps.get(vp_id)
        if client is None:
            await self.place([vp_id])
            client = self._vps[vp_id]
        return client

    async def place(self, vp_ids: Iterable[str]) -> None:
        """Find the hosts of the VPs not known yet (a pooled host: from the store, once)."""
        new = [vp_id for vp_id in dict.fromkeys(vp_ids) if vp_id not in self._vps]
        if new:
            names = await host_names(self.config, self.store, new)
            for vp_id, name in zip(new, names, strict=True):
                self._vps.setdefault(vp_id, VPClient(self._host_named(name), vp_id))

    def _host_named(self, name: str) -> ActorHandle[VPHost]:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = start_named(self.config, name)
        return host

    def reach_hosts(self) -> None:
        """Call each pooled VP host once now (not awaited), so no turn's call is the first.

        The first call from a process to an actor waits while Ray finds
        where the actor runs: 150-280 ms from a coordinator to a pooled
        host, measured on the first message after a start. A host not
        running yet is started, as :func:`~coordinator.vps.start_pool` would.
        """
        for name in pooled_hosts(self.config):
            self._host_named(name).reach.remote()

    def plan(
        self,
        group: Group,
        vp: str,
        origin: TurnOrigin,
        turn_id: str | None = None,
        trace: str | None = None,
    ) -> TurnRequest:
        """The request of a turn of ``vp`` in ``group`` (a new turn id unless given).

        It is in the trace ``trace`` names, else in the current one.
        """
        turn_id = turn_id or TurnRequest.new_turn_id(vp)
        forward = len(group.roster) > 1
        return TurnRequest(
            group.id,
            vp,
            turn_id,
            origin,
            self._host,
            forward,
            time.time(),
            trace=trace or tracing.traceparent(),
        )

    async def record(self, group_id: str, reqs: list[TurnRequest]) -> None:
        """Write the turns' durable records, and find their VPs: done before they are sent."""
        await self.place(req.vp_id for req in reqs)
        await self.store.add_turns(group_id, [req.record() for req in reqs])

    async def start(self, group: Group, vp: str, origin: TurnOrigin) -> str:
        """Record one turn of ``vp`` and send it; returns its turn id."""
        req = self.plan(group, vp, origin)
        await self.record(group.id, [req])
        return self.launch(req)

    def launch(self, req: TurnRequest) -> str:
        """Send a recorded turn to its VP and follow it to its result."""
        return self._track(req, self._run, send=True).request.turn_id

    async def run(self, req: TurnRequest) -> TurnOutcome | None:
        """Send a recorded turn and wait for its outcome (None: lost or ended from outside)."""
        return await self._track(req, self._run, send=True).ended

    def _track(
        self, req: TurnRequest, body: Callable[[FollowedTurn], Awaitable[None]], send: bool = False
    ) -> FollowedTurn:
        """Follow a turn with ``body`` in a task of its own; ``send``: call its VP now.

        A turn to be sent takes its lane stamp here, in the order turns are
        sent, which is the order its VP runs them in.
        """
        if send and req.lane is None:
            req = replace(req, lane=self.lanes.stamp(req.group_id, req.vp_id))
        ended: asyncio.Future[TurnOutcome | None] = asyncio.get_running_loop().create_future()
        turn = FollowedTurn(req, TurnTracker(req.turn_id), ended)
        # A recorded turn's VP is known (``record``); any other is sent by the task.
        if send and (client := self._vps.get(req.vp_id)) is not None:
            try:
                turn.sent = client.send(RunTurn(req, trace=req.trace))
            except Exception:
                # Sent again by the turn's task, which reports why it cannot be.
                log.warning("turn %s not sent at once", req.turn_id, exc_info=True)
        self._turns.setdefault(req.group_id, {})[req.turn_id] = turn
        self.admission.hold(req.group_id, req.vp_id)
        task = asyncio.create_task(self._guarded(turn, body))
        self._tasks.setdefault(req.group_id, set()).add(task)
        task.add_done_callback(lambda t: self._done(req.group_id, req.turn_id, t))
        task.add_done_callback(lambda _: self.admission.release(req.group_id, req.vp_id))
        task.add_done_callback(lambda _: self.lanes.landed(req.group_id, req.vp_id, req.lane))
        task.add_done_callback(lambda _: _resolve(ended))
        return turn

    @staticmethod
    async def _guarded(turn: FollowedTurn, body: Callable[[FollowedTurn], Awaitable[None]]) -> None:
        # Nobody awaits these tasks: a failure is logged here, not left in
        # the task for the garbage collector to report.
        try:
            await body(turn)
        except Exception:
            log.exception("turn %s failed in its coordinator", turn.request.turn_id)

    def _done(self, group_id: str, turn_id: str, task: asyncio.Task[None]) -> None:
        self._tasks.get(group_id, set()).discard(task)
        self._turns.get(group_id, {}).pop(turn_id, None)

    async def _run(self, turn: FollowedTurn) -> None:
        req = turn.request
        outcome: TurnOutcome | None = None
        for attempt in range(RESTART_RETRIES + 1):
            try:
                outcome = await self._follow(turn)
                break
            except ActorUnavailableError as exc:
                # The actor is restarting. A turn that never started can simply
                # go to the restarted actor; one that was running is lost.
                started = await self.began(req)
                if attempt < RESTART_RETRIES and not started and await self._wait_alive(req.vp_id):
                    continue
                await self._lost(turn, exc)
                return
            except (RayError, StoreError) as exc:
                await self._lost(turn, exc)
                return
        if outcome is None:
            await self._lost(turn, RuntimeError("no outcome"))
            return
        if not turn.ended.done():
            turn.ended.set_result(outcome)
        try:
            await self._on_outcome(req, outcome)
        except Exception:
            log.exception("follow-up of turn %s failed", req.turn_id)

    async def _follow(self, turn: FollowedTurn) -> TurnOutcome:
        """Send the turn (unless it was sent already) and wait for its outcome."""
        sent, turn.sent = turn.sent, None
        if sent is None:
            req = turn.request
            if req.lane is not None:
                # Sent again (its VP restarted): the lane's floor may have risen since.
                turn.request = req = replace(req, lane=self.lanes.refresh(req))
            sent = (await self.vp(req.vp_id)).send(RunTurn(req, trace=req.trace))
        outcome: TurnOutcome = await sent
        if not turn.tracker.finished:  # a shutdown may have ended it meanwhile
            turn.tracker.advance(TurnState.FINISHED)
        return outcome

    async def withdraw(self, req: TurnRequest, message: str) -> None:
        """End a recorded turn that will not be sent after all, with an aborted result."""
        writer = TurnWriter(
            GroupEvents(self.store, req.group_id, req.origin.thread_id),
            req.vp_id,
            req.turn_id,
            trigger_id=req.origin.trigger_id,
        )
        await writer.finish(error_stop(StopReason.ABORTED, message, "aborted"), TurnEnd.INTERRUPTED)

    def busy(self, group_id: str, vp_id: str) -> bool:
        """Whether ``vp_id`` has a turn in ``group_id`` that has not ended."""
        return any(t.request.vp_id == vp_id for t in self._turns.get(group_id, {}).values())

    def running_on(self, group_id: str, message_id: str) -> list[str]:
        """The VPs with a turn not ended in the chain ``message_id`` started, or answering it."""
        return sorted(
            {
                t.request.vp_id
                for t in self._turns.get(group_id, {}).values()
                if message_id in (t.request.origin.chain_id, t.request.origin.trigger_id)
            }
        )

    async def began(self, req: TurnRequest) -> bool:
        """Whether the turn's record says it started: clients may have seen some of it.

        True when the store cannot say: a turn is never run twice on a guess.
        """
        try:
            records = await self.store.turns_of(req.group_id, req.origin.trigger_id)
        except StoreError:
            log.warning("turn %s: its record could not be read", req.turn_id, exc_info=True)
            return True
        return any(r.turn_id == req.turn_id and r.phase is not TurnPhase.REQUESTED for r in records)

    async def _wait_alive(self, vp_id: str) -> bool:
        """Ping a restarting VP actor until it answers (about half a minute at most)."""
        delay = 0.1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_S
        while loop.time() < deadline:
            try:
                await (await self.vp(vp_id)).send(Ping())
                return True
            except ActorUnavailableError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except RayError:
                return False
        return False

    async def _lost(self, turn: FollowedTurn, exc: BaseException) -> None:
        """The VP actor died with the turn: end it with an error result.

        The message says what happens next: Ray restarts an actor that is
        unavailable; one that died for good (killed, out of restarts) stays
        gone until an operator acts.
        """
        req = turn.request
        log.warning("turn %s lost: %s", req.turn_id, exc)
        # The lane's later turns, sent again to a restarted VP, need not wait for it.
        self.lanes.landed(req.group_id, req.vp_id, req.lane)
        if isinstance(exc, ActorUnavailableError):
            advice = "Ray is restarting it: send the message again."
        elif isinstance(exc, RayError):
            advice = "It could not be restarted; an operator must look at the cluster."
        else:
            advice = "Send the message again."
        message = (
            f"@{turn.request.vp_id} stopped unexpectedly and this turn was lost "
            f"({type(exc).__name__}). {advice}"
        )
        await self._interrupt(turn, message, "actor_died")

    async def _interrupt(self, turn: FollowedTurn, message: str, kind: str) -> None:
        """End a turn from outside with an error result (none if it has ended already).

        The record says ``interrupted``, so the person's resend of the same
        message gets a new answer from this VP.
        """
        req = turn.request
        writer = TurnWriter(
            GroupEvents(self.store, req.group_id, req.origin.thread_id),
            req.vp_id,
            req.turn_id,
            trigger_id=req.origin.trigger_id,
        )
        # The result says how long the turn went on, from when the coordinator sent it.
        took = int((time.time() - req.sent_at) * 1000)
        await writer.finish(error_stop(StopReason.ERROR, message, kind, took), TurnEnd.INTERRUPTED)
        if not turn.tracker.finished:
            turn.tracker.advance(TurnState.FINISHED)

    async def cancel(self, group_id: str, vp_id: str | None = None) -> CancelResult:
        """Abort the running and queued turns of a group, or of one VP in it.

        The cancel is stamped with the time, so a turn sent before it that
        reaches its VP after the abort is aborted on arrival. The VPs named
        are those with a turn no earlier cancel had stopped.
        """
        at = time.time()
        # Turns a cancel stopped already, still ending, are not stopped again.
        turns = [
            t
            for t in self._turns.get(group_id, {}).values()
            if not t.cancelled and (vp_id is None or t.request.vp_id == vp_id)
        ]
        for turn in turns:
            turn.cancelled = True
        vps = sorted({t.request.vp_id for t in turns})
        counts = await asyncio.gather(
            *(self._abort(v, group_id, at) for v in vps), return_exceptions=True
        )
        aborted = 0
        for count in counts:
            if isinstance(count, int):
                aborted += count
        return CancelResult(aborted, tuple(vps))

    async def _abort(self, vp_id: str, group_id: str, at: float) -> int:
        return await (await self.vp(vp_id)).send(Abort(group_id, None, at))

    async def answer(
        self, group: Group, request_id: str, answer: str | tuple[str, ...]
    ) -> AnswerReceipt:
        """Hand an answer to the VP that asked (its id is in the question's id)."""
        gone = AnswerReceipt(AnswerVerdict.NOT_OPEN)
        vp = question_vp(request_id)
        if vp is None or vp not in group.roster:
            return gone
        try:
            return await (await self.vp(vp)).send(AnswerQuestion(request_id, answer, group.id))
        except (RayError, StoreError):
            return gone

    async def question_group(self, request_id: str) -> str | None:
        """The group an open question was asked in, asked of the VP its id names."""
        vp = question_vp(request_id)
        if vp is None:
            return None
        try:
            group_id = await (await self.vp(vp)).send(QuestionOf(request_id))
        except (RayError, StoreError):
            return None
        return group_id

    async def wait_idle(self, group_id: str, timeout_s: float) -> bool:
        """Wait until no turn of the group is running or about to be dispatched."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while tasks := set(self._tasks.get(group_id, ())):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait(tasks, timeout=remaining)
        return True

    async def warm(self, vp_ids: list[str]) -> None:
        """Place and start the actors of a new group's roster now, not on its first message.

        Placed in roster order, so the roster spreads over pooled hosts.
        Creating an actor returns at once; its process starts in the
        background, so the group's first turn does not wait for it.
        """
        await self.place(vp_ids)
        for vp_id in vp_ids:
            self._vps[vp_id].send(Ping())

    async def stats(self, vp_ids: list[str]) -> list[VPStats]:
        """Per-VP counters; also starts the actors (benchmarks warm up with it)."""
        await self.place(vp_ids)
        return list(await asyncio.gather(*(self._vps[v].send(Stats()) for v in vp_ids)))

    def forget(self, group_id: str) -> None:
        self._turns.pop(group_id, None)
        self.admission.forget(group_id)


def _resolve(ended: asyncio.Future[TurnOutcome | None]) -> None:
    """A turn's task ended without an outcome set (lost, interrupted): it resolves to None."""
    if not ended.done():
        ended.set_result(None)
