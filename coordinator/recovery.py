"""The dispatcher's restarts and shutdown: turns taken over after a restart, turns drained.

When the coordinator starts again (a new deployment on the same store, or
Ray restarting the actor), :meth:`TurnRecovery.recover` takes every turn
without a result: a VP actor still running it is followed, a turn that
never started runs, and one that started is ended with an error result
that says why. A graceful shutdown (:meth:`TurnRecovery.drain`) lets turns
finish for a while and ends the rest the same way. Mixed into
:class:`coordinator.dispatch.Dispatcher`, whose turn-following it uses.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import ray
from ray.exceptions import RayError

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest, TurnState, TurnTracker
from actors.vp_commands import Abort, Follow, Running
from coordinator.results import CancelResult, DrainResult, RecoveryReport
from coordinator.vps import VPClient, find_host, host_names
from store.base import Group, Store
from store.turns import TurnEnd, TurnPhase, TurnRecord

OnOutcome = Callable[[TurnRequest, TurnOutcome], Awaitable[None]]


@dataclass(slots=True)
class FollowedTurn:
    """A turn the dispatcher follows, from its dispatch to its one result."""

    request: TurnRequest
    tracker: TurnTracker
    # Resolved when the turn's task ends: with its outcome, or None when it
    # was lost or ended from outside (a task's run awaits it).
    ended: asyncio.Future[TurnOutcome | None]
    # The call to the VP, made before the caller gets control back (an
    # ingest's answer then leaves after its turns, not before them); a
    # retry after a restart makes a new one.
    sent: ray.ObjectRef[TurnOutcome] | None = None
    # A cancel has stopped it; it may still be ending (a second cancel skips it).
    cancelled: bool = False


class TurnRecovery:
    """Restarts and shutdown of the turns a :class:`~coordinator.dispatch.Dispatcher` follows."""

    config: RuntimeConfig
    store: Store
    _vps: dict[str, VPClient]
    _turns: dict[str, dict[str, FollowedTurn]]
    _tasks: dict[str, set[asyncio.Task[None]]]
    _on_outcome: OnOutcome

    # -- the dispatcher's own (coordinator.dispatch) ------------------------------
    @abstractmethod
    def plan(
        self,
        group: Group,
        vp: str,
        origin: TurnOrigin,
        turn_id: str | None = None,
        trace: str | None = None,
    ) -> TurnRequest: ...

    @abstractmethod
    def launch(self, req: TurnRequest) -> str: ...

    @abstractmethod
    def _track(
        self,
        req: TurnRequest,
        body: Callable[[FollowedTurn], Awaitable[None]],
        send: bool = False,
    ) -> FollowedTurn: ...

    @abstractmethod
    async def vp(self, vp_id: str) -> VPClient: ...

    @abstractmethod
    async def _lost(self, turn: FollowedTurn, exc: BaseException) -> None: ...

    @abstractmethod
    async def _interrupt(self, turn: FollowedTurn, message: str, kind: str) -> None: ...

    @abstractmethod
    async def wait_idle(self, group_id: str, timeout_s: float) -> bool: ...

    @abstractmethod
    async def cancel(self, group_id: str, vp_id: str | None = None) -> CancelResult: ...

    # -- restarts and shutdown -------------------------------------------------------
    async def recover(
        self, records: list[TurnRecord], groups: dict[str, Group], since: float
    ) -> RecoveryReport:
        """Take over turns that have no result after a restart (see the module doc)."""
        held = await self._held_by_vps({r.vp_id for r in records})
        followed = rerun = interrupted = 0
        for record in records:
            group = groups.get(record.group_id)
            if group is None:
                # The group is gone: nobody is waiting for this turn.
                await self.store.finish_turn(
                    record.group_id, record.turn_id, None, TurnEnd.INTERRUPTED
                )
                continue
            origin = TurnOrigin.of_record(record)
            req = self.plan(group, record.vp_id, origin, record.turn_id, record.trace)
            alive = record.turn_id in held.get(record.vp_id, ())
            # A task's run is never followed or sent again on its own: its
            # delegation went with the attempt that sent it, which the
            # coordinator's recovery ends (``coordinator.team.desk``).
            task_run = record.task_id is not None
            if alive and not task_run:
                self._track(req, self._follow_again)
                followed += 1
            elif alive:
                self._track(req, self._stop_task_run)  # stopped, nothing routed on
                interrupted += 1
            elif record.phase is TurnPhase.REQUESTED and not task_run:
                self.launch(req)
                rerun += 1
            else:
                self._track(req, self._restarted)
                interrupted += 1
        return RecoveryReport(followed, rerun, interrupted, since)

    async def _held_by_vps(self, vp_ids: set[str]) -> dict[str, set[str]]:
        """The turns each live VP actor holds; a VP with no live actor holds none.

        Looked up by name, never started: a fresh deployment has no VP actor
        yet, and starting one only to ask would cost half a second each.
        """
        held: dict[str, set[str]] = {}
        ids = sorted(vp_ids)
        for vp_id, name in zip(ids, await host_names(self.config, self.store, ids), strict=True):
            host = find_host(self.config, name)
            if host is None:
                continue
            client = VPClient(host, vp_id)
            try:
                running: list[str] = await client.send(Running())
                held[vp_id] = set(running)
            except RayError:
                continue
            self._vps.setdefault(vp_id, client)
        return held

    async def _follow_again(self, turn: FollowedTurn) -> None:
        """Follow a turn a live VP actor still runs (its first follower is gone)."""
        req = turn.request
        try:
            outcome = await (await self.vp(req.vp_id)).send(Follow(req.turn_id))
        except RayError as exc:
            await self._lost(turn, exc)
            return
        if not turn.tracker.finished:
            turn.tracker.advance(TurnState.FINISHED)
        if outcome is not None:
            await self._on_outcome(req, outcome)

    async def _stop_task_run(self, turn: FollowedTurn) -> None:
        req = turn.request
        try:
            vp = await self.vp(req.vp_id)
            await vp.send(Abort(req.group_id, req.turn_id))
            await vp.send(Follow(req.turn_id))
        except RayError as exc:
            await self._lost(turn, exc)
            return
        if not turn.tracker.finished:
            turn.tracker.advance(TurnState.FINISHED)

    async def _restarted(self, turn: FollowedTurn) -> None:
        await self._interrupt(
            turn,
            f"The server restarted while @{turn.request.vp_id} was answering, and this turn "
            "was stopped. Send your message again to get an answer.",
            "restarted",
        )

    async def drain(self, timeout_s: float) -> DrainResult:
        """Let running turns finish for up to ``timeout_s``, then end the rest.

        The turns still open then (queued or running) end with an error result
        saying the server shut down, and their VPs stop working on them.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        groups = list(self._tasks)
        idle = [await self.wait_idle(g, max(0.0, deadline - loop.time())) for g in groups]
        open_turns = [t for turns in self._turns.values() for t in turns.values()]
        message = (
            "The server was shut down while @{vp} was answering, and this turn was stopped. "
            "Send your message again to get an answer."
        )
        for turn in open_turns:
            await self._interrupt(turn, message.format(vp=turn.request.vp_id), "shutdown")
        await asyncio.gather(
            *(self.cancel(g) for g in {t.request.group_id for t in open_turns}),
            return_exceptions=True,
        )
        return DrainResult(drained=all(idle), interrupted=len(open_turns))
