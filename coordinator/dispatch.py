"""Turns on VP actors: start them, follow each to its one result, abort them.

A turn is sent to its VP actor, which tells the coordinator when the turn
leaves its lane's queue (``turn_started``) and then returns its
:class:`~actors.turns.TurnOutcome`. The coordinator's copy of the turn's
state follows those two answers, so when a VP actor dies the dispatcher
knows without searching any log whether the turn had started: one that had
not goes to the restarted actor; one that had ends with an error result.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

import ray
from ray.actor import ActorHandle
from ray.exceptions import ActorUnavailableError, RayError

from actors.config import RuntimeConfig
from actors.turns import (
    TurnOrigin,
    TurnOutcome,
    TurnRequest,
    TurnState,
    TurnTracker,
    question_vp,
)
from actors.vp_actor import VPActor, VPStats
from actors.writer import GroupEvents, error_stop
from coordinator.admission import Admission
from coordinator.results import CancelResult
from engine.events import StopReason
from store.base import Group, Store

log = logging.getLogger(__name__)

VPActorClass = ray.remote(VPActor)
# A turn sent while its VP actor restarts waits for it, this often and this long.
RESTART_RETRIES = 3
RESTART_WAIT_S = 30.0

OnOutcome = Callable[[TurnRequest, TurnOutcome], Awaitable[None]]


@dataclass(slots=True)
class _Turn:
    request: TurnRequest
    tracker: TurnTracker


class Dispatcher:
    """The turns of one coordinator's groups, from dispatch to their single result.

    ``host`` is the coordinator's own actor name, handed to every turn (for
    its start and, in groups of more than one VP, for ``route_forward``). ``on_outcome`` runs
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
        self._vps: dict[str, ActorHandle[VPActor]] = {}
        self._turns: dict[str, dict[str, _Turn]] = {}
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}
        # Counts every turn from its dispatch until its task ends.
        self.admission = Admission.for_shard(config)

    def vp(self, vp_id: str) -> ActorHandle[VPActor]:
        """The VP's actor (started on first use, found by name if it exists)."""
        handle = self._vps.get(vp_id)
        if handle is None:
            started = VPActorClass.options(
                name=self.config.actor_name("vp", vp_id),
                namespace=self.config.namespace,
                get_if_exists=True,
                lifetime="detached",
                max_restarts=self.config.vp_max_restarts,
                max_task_retries=0,
                num_cpus=0,
                max_concurrency=1000,
            ).remote(vp_id, self.config)
            handle = self._vps[vp_id] = cast("ActorHandle[VPActor]", started)
        return handle

    def start(self, group: Group, vp: str, origin: TurnOrigin) -> str:
        """Send one turn to ``vp``; returns its turn id at once."""
        turn_id = TurnRequest.new_turn_id(vp)
        req = TurnRequest(group.id, vp, turn_id, origin, self._host, len(group.roster) > 1)
        turn = _Turn(req, TurnTracker(req.turn_id))
        self._turns.setdefault(group.id, {})[req.turn_id] = turn
        self.admission.hold(group.id, vp)
        task = asyncio.create_task(self._run(turn))
        self._tasks.setdefault(group.id, set()).add(task)
        task.add_done_callback(lambda t: self._done(group.id, req.turn_id, t))
        task.add_done_callback(lambda _: self.admission.release(group.id, vp))
        return req.turn_id

    def _done(self, group_id: str, turn_id: str, task: asyncio.Task[None]) -> None:
        self._tasks.get(group_id, set()).discard(task)
        self._turns.get(group_id, {}).pop(turn_id, None)

    async def _run(self, turn: _Turn) -> None:
        req = turn.request
        outcome: TurnOutcome | None = None
        for attempt in range(RESTART_RETRIES + 1):
            try:
                outcome = await self._follow(turn)
                break
            except ActorUnavailableError as exc:
                # The actor is restarting. A turn that never started can simply
                # go to the restarted actor; one that was running is lost.
                started = turn.tracker.state is not TurnState.QUEUED
                if attempt < RESTART_RETRIES and not started and await self._wait_alive(req.vp_id):
                    continue
                await self._lost(turn, exc)
                return
            except RayError as exc:
                await self._lost(turn, exc)
                return
        if outcome is None:
            await self._lost(turn, RuntimeError("no outcome"))
            return
        try:
            await self._on_outcome(req, outcome)
        except Exception:
            log.exception("follow-up of turn %s failed", req.turn_id)

    async def _follow(self, turn: _Turn) -> TurnOutcome:
        """Send the turn and wait for its outcome (its start is reported apart)."""
        outcome: TurnOutcome = await self.vp(turn.request.vp_id).run_turn.remote(turn.request)
        turn.tracker.advance(TurnState.FINISHED)
        return outcome

    def started(self, group_id: str, turn_id: str) -> None:
        """The VP acknowledged a turn's start (it may arrive after the outcome)."""
        turn = self._turns.get(group_id, {}).get(turn_id)
        if turn is not None and turn.tracker.state is TurnState.QUEUED:
            turn.tracker.advance(TurnState.STARTED)

    async def _wait_alive(self, vp_id: str) -> bool:
        """Ping a restarting VP actor until it answers (about half a minute at most)."""
        delay = 0.1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_WAIT_S
        while loop.time() < deadline:
            try:
                await self.vp(vp_id).ping.remote()
                return True
            except ActorUnavailableError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            except RayError:
                return False
        return False

    async def _lost(self, turn: _Turn, exc: BaseException) -> None:
        """The VP actor died with the turn: end it with an error result."""
        req = turn.request
        log.warning("turn %s lost: %s", req.turn_id, exc)
        message = (
            f"@{req.vp_id} stopped unexpectedly and this turn was lost "
            f"({type(exc).__name__}). It has been restarted: send the message again."
        )
        writer = GroupEvents(self.store, req.group_id).turn(req.vp_id, req.turn_id)
        await writer.finish(error_stop(StopReason.ERROR, message, "actor_died"))
        if not turn.tracker.finished:
            turn.tracker.advance(TurnState.FINISHED)

    async def cancel(self, group_id: str, vp_id: str | None = None) -> CancelResult:
        """Abort the running and queued turns of a group, or of one VP in it."""
        turns = self._turns.get(group_id, {}).values()
        vps = sorted({t.request.vp_id for t in turns if vp_id is None or t.request.vp_id == vp_id})
        counts = await asyncio.gather(
            *(self.vp(v).abort.remote(group_id) for v in vps), return_exceptions=True
        )
        aborted = 0
        for count in counts:
            if isinstance(count, int):
                aborted += count
        return CancelResult(aborted, tuple(vps))

    async def answer(self, group: Group, request_id: str, answer: str) -> bool:
        """Hand an answer to the VP that asked (its id is in the question's id)."""
        vp = question_vp(request_id)
        if vp is None or vp not in group.roster:
            return False
        try:
            delivered: bool = await self.vp(vp).answer.remote(request_id, answer)
        except RayError:
            return False
        return delivered

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

    async def stats(self, vp_ids: list[str]) -> list[VPStats]:
        """Per-VP counters; also starts the actors (benchmarks warm up with it)."""
        return list(await asyncio.gather(*(self.vp(v).stats.remote() for v in vp_ids)))

    def forget(self, group_id: str) -> None:
        self._turns.pop(group_id, None)
        self.admission.forget(group_id)
