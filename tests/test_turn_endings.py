"""Every turn ends with exactly one ``result``, whenever a cancel comes and whatever fails.

The VP actor runs in process (no Ray) on both store backends. A tap on its
store, its memory and its turn writer calls a hook at each step boundary of a
turn; the hook aborts the turn there, so each case lands on its step without
sleeping. A ``run_turn`` that raised is what the coordinator reports as a
lost turn ("stopped unexpectedly"), so every case also checks that it returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from actors.config import RuntimeConfig
from actors.runner import QUICK_CATCH_UP
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import Abort, RunTurn
from actors.writer import TurnWriter
from engine.events import EngineEvent, StopReason
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from engine.settings import EngineConfig
from protocol import AgentState, AgentStatus, YeaftOutput
from store.base import Group, GroupMessage, StoreError
from tests.fixtures.stores import StoreFactory

Hook = Callable[[str, tuple[Any, ...]], Awaitable[None]]
Point = Callable[[str, tuple[Any, ...]], bool]
ABORTED, DONE, ERROR = StopReason.ABORTED, StopReason.END_TURN, StopReason.ERROR


class Tap:
    """A store or memory that awaits ``hook(name, args)`` before each coroutine method."""

    def __init__(self, inner: Any, prefix: str, hook: Hook) -> None:
        self._inner = inner
        self._prefix = prefix
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def tapped(*args: Any, **kwargs: Any) -> Any:
            await self._hook(f"{self._prefix}.{name}", args)
            return await attr(*args, **kwargs)

        return tapped


def tool_then_answer(request: ModelRequest) -> Reply:
    """One tool call, then a short answer: a turn with every kind of step."""
    if request.messages and request.messages[-1].role == "tool":
        return Reply("all done here")
    return Reply("let me think", tool_calls=[("rethink", {"reason": "check"})])


@pytest.fixture
async def make_worker(store_factory: StoreFactory) -> AsyncIterator[Callable[[], VPActor]]:
    made: list[VPActor] = []

    def make() -> VPActor:
        cfg = RuntimeConfig(
            store=store_factory.config,
            engine=EngineConfig(model="offline:default", offline_tps=0),
            provider_overrides={"offline": ScriptedModel(tool_then_answer)},
            dream_idle_s=0,
            dream_every_turns=0,
        )
        worker = VPActor("steve", cfg)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        await worker.close()


def tap(worker: VPActor, hook: Hook, monkeypatch: pytest.MonkeyPatch) -> None:
    """Route the worker's store, memory and every turn writer's events through ``hook``."""
    s = worker.services
    worker.services = dataclasses.replace(
        s, store=Tap(s.store, "store", hook), memory=Tap(s.memory, "memory", hook)
    )
    feed = TurnWriter.feed

    async def tapped_feed(self: TurnWriter, event: EngineEvent) -> None:
        await feed(self, event)
        await hook(f"feed.{event.type}", (event,))

    monkeypatch.setattr(TurnWriter, "feed", tapped_feed)


async def new_group(worker: VPActor) -> TurnRequest:
    """A group whose log is longer than a turn's first read, so the turn catches up."""
    store = worker.services.store
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await store.create_group(Group(id=gid, name="g", roster=["steve"]))
    for i in range(QUICK_CATCH_UP):
        await store.append_message(gid, GroupMessage(author="bob", role="user", text=f"n{i}"))
    msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text="hi"))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    return TurnRequest(gid, "steve", TurnRequest.new_turn_id("steve"), origin)


async def results(worker: VPActor, req: TurnRequest) -> list[dict[str, Any]]:
    batch = await worker.services.store.read_events(req.group_id, 0, limit=1000)
    envs = [event.envelope() for event in batch.events]
    return [
        env["data"]
        for env in envs
        if env.get("type") == "yeaft_output"
        and env["turnId"] == req.turn_id
        and env["data"]["type"] == "result"
    ]


async def one_result(worker: VPActor, req: TurnRequest, outcome: TurnOutcome) -> dict[str, Any]:
    """The turn's only result; it says what the outcome says."""
    found = await results(worker, req)
    assert len(found) == 1, found
    assert found[0]["stop_reason"] == outcome.reason.value
    return found[0]


def call(name: str) -> Point:
    return lambda point, _args: point == name


def frame(pred: Callable[[Any], bool]) -> Point:
    """A frame being written: appended, starting its turn, or finishing it (the result)."""

    def match(point: str, args: tuple[Any, ...]) -> bool:
        if point == "store.append_event":
            return pred(args[1])
        turn_step = point in ("store.start_turn", "store.finish_turn")
        return turn_step and len(args) > 2 and args[2] is not None and pred(args[2])

    return match


def is_reply(point: str, args: tuple[Any, ...]) -> bool:
    return point == "store.append_message" and args[1].role == "assistant"


def is_result(f: Any) -> bool:
    return isinstance(f, YeaftOutput) and f.data.type == "result"


def is_status(state: AgentState) -> Callable[[Any], bool]:
    return lambda f: isinstance(f, AgentStatus) and f.state is state


# Each step boundary of a turn, and how a turn aborted there ends: before the
# engine ends the turn an abort stops it; from the engine's stop on, the
# turn's own end stands.
POINTS: dict[str, tuple[Point, StopReason]] = {
    "context": (call("store.group_and_messages"), ABORTED),
    "transcript": (call("store.load_transcript"), ABORTED),
    "catch_up": (call("store.read_messages"), ABORTED),
    "recall": (lambda point, _args: point.startswith("memory."), ABORTED),
    "thinking": (frame(is_status(AgentState.THINKING)), ABORTED),
    "streaming": (call("feed.text_delta"), ABORTED),
    "tool_call": (call("feed.tool_call"), ABORTED),
    "tool_result": (call("feed.tool_result"), ABORTED),
    "usage": (call("feed.usage"), ABORTED),
    "engine_stop": (call("feed.stop"), DONE),
    "reply": (is_reply, DONE),
    # The last status and the usage are written with the result, in one step.
    "result": (frame(is_result), DONE),
    "transcript_saved": (call("store.save_transcript"), DONE),
}


@pytest.mark.parametrize("swallow", [False, True], ids=["cancel", "swallowed-cancel"])
@pytest.mark.parametrize("where", list(POINTS))
async def test_a_cancel_at_any_step_gives_the_turn_one_result(
    make_worker: Callable[[], VPActor],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    swallow: bool,
) -> None:
    """``swallow``: the code the turn awaits there eats the cancel, as redis-py may."""
    worker = make_worker()
    req = await new_group(worker)
    point, expected = POINTS[where]
    hits: list[int] = []

    async def hook(name: str, args: tuple[Any, ...]) -> None:
        if hits or not point(name, args):
            return
        hits.append(await worker.call(Abort(req.group_id)))
        # A few loop turns here: the abort reaches the engine while the turn
        # is at this step, and its cancel lands on one of these awaits.
        for _ in range(10):
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                if not swallow:
                    raise

    tap(worker, hook, monkeypatch)
    outcome = await worker.call(RunTurn(req))
    assert hits == [1], "the turn never reached this step"
    assert outcome.reason is expected
    await one_result(worker, req, outcome)


async def test_a_cancel_while_queued_in_the_lane_ends_the_turn_aborted(
    make_worker: Callable[[], VPActor],
) -> None:
    worker = make_worker()
    req = await new_group(worker)
    async with worker.lanes.hold(req.group_id):
        task = asyncio.create_task(worker.call(RunTurn(req)))
        await asyncio.sleep(0)  # the turn registers, then waits for the lane
        assert await worker.call(Abort(req.group_id)) == 1
    outcome = await task
    assert outcome.reason is ABORTED
    await one_result(worker, req, outcome)


async def test_a_cancel_before_or_after_a_turn_reaches_nothing(
    make_worker: Callable[[], VPActor],
) -> None:
    worker = make_worker()
    req = await new_group(worker)
    assert await worker.call(Abort(req.group_id)) == 0
    outcome = await worker.call(RunTurn(req))
    assert await worker.call(Abort(req.group_id)) == 0
    assert outcome.reason is DONE
    await one_result(worker, req, outcome)


# A step that fails: before the result the turn ends with one error result;
# after it (the transcript save) the result already sent stands.
FAILURES: dict[str, tuple[Point, StopReason]] = {
    "context": (call("store.group_and_messages"), ERROR),
    "reply": (is_reply, ERROR),
    "transcript_saved": (call("store.save_transcript"), DONE),
}


@pytest.mark.parametrize("where", list(FAILURES))
async def test_a_step_that_fails_ends_the_turn_with_one_result(
    make_worker: Callable[[], VPActor], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    worker = make_worker()
    req = await new_group(worker)
    point, expected = FAILURES[where]

    async def hook(name: str, args: tuple[Any, ...]) -> None:
        if point(name, args):
            raise StoreError("the store is gone")

    tap(worker, hook, monkeypatch)
    outcome = await worker.call(RunTurn(req))
    assert outcome.reason is expected
    result = await one_result(worker, req, outcome)
    if expected is ERROR:
        # A store failure is named as one, so a person knows it was not the VP.
        assert result["error_kind"] == "store"
        assert "the store was unavailable" in result["error"]
