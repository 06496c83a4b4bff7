"""Queue modes: a person's message that reaches a busy (group, VP) lane.

The VP actor runs in process (no Ray) on both store backends. The model is
the offline provider behind gates the test opens, and a ``hold`` tool that
waits for the test, so each case puts the running turn exactly where it
wants it (in a stream, in a tool call) without sleeping. The collect
debounce runs on an injected clock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from actors.config import RuntimeConfig
from actors.queueing import SteerInbox
from actors.turns import QueuePolicy, TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import Abort, RunTurn
from engine.events import StopReason
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.scripted import Reply, ScriptedModel, Step
from engine.settings import EngineConfig
from engine.tools.registry import Tool, ToolContext
from protocol import GroupSettings, QueueMode, split_queue_prefix
from store.base import Group, GroupMessage
from tests.fixtures.stores import StoreFactory
from tests.test_attachments import attachment_record


class Gated(ScriptedModel):
    """The offline model; call ``n`` waits for ``gates[n]`` when the test set one."""

    def __init__(self, script: Callable[[ModelRequest], Step]) -> None:
        super().__init__(script)
        self.gates: dict[int, asyncio.Event] = {}
        self.reached: dict[int, asyncio.Event] = {}
        self.entered = 0

    def at(self, n: int) -> asyncio.Event:
        return self.reached.setdefault(n, asyncio.Event())

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        n = self.entered
        self.entered += 1
        self.at(n).set()
        gate = self.gates.get(n)
        if gate is not None:
            await gate.wait()
        async for item in super().stream(request):
            yield item


def said(request: ModelRequest) -> list[str]:
    """The user messages a model call was given, as text."""
    return [m.content for m in request.messages if m.role == "user"]


def echo(request: ModelRequest) -> Step:
    """Answer with the newest user message; call ``hold`` first when asked to."""
    last = request.messages[-1]
    if last.role == "user" and "please hold" in last.content:
        return Reply("", tool_calls=[("hold", {})])
    users = said(request)
    return Reply(f"answering: {users[-1] if users else ''}")


class _NoArgs(BaseModel):
    pass


class Fixture:
    def __init__(self, worker: VPActor, model: Gated) -> None:
        self.worker = worker
        self.model = model
        self.in_tool = asyncio.Event()
        self.release_tool = asyncio.Event()
        self.group = ""

    @property
    def store(self) -> Any:
        return self.worker.services.store

    async def new_group(self) -> None:
        self.group = f"grp_{uuid.uuid4().hex[:10]}"
        await self.store.create_group(Group(id=self.group, name="g", roster=["steve"]))

    async def say(
        self, text: str, policy: QueuePolicy | None, files: list[dict[str, Any]] | None = None
    ) -> TurnRequest:
        meta: dict[str, Any] = {"attachments": files} if files else {}
        msg, _ = await self.store.append_message(
            self.group, GroupMessage(author="ann", role="user", text=text, meta=meta)
        )
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        return TurnRequest(
            self.group, "steve", TurnRequest.new_turn_id("steve"), origin, queue=policy
        )

    def run(self, req: TurnRequest) -> asyncio.Task[TurnOutcome]:
        return asyncio.create_task(self.worker.call(RunTurn(req)))

    async def frames(self) -> list[dict[str, Any]]:
        batch = await self.store.read_events(self.group, 0, limit=1000)
        return [event.envelope() for event in batch.events]

    async def statuses(self, turn_id: str) -> list[dict[str, Any]]:
        return [
            f
            for f in await self.frames()
            if f.get("type") == "agent_status" and f.get("turnId") == turn_id
        ]

    async def results(self, turn_id: str) -> list[dict[str, Any]]:
        return [
            f["data"]
            for f in await self.frames()
            if f.get("type") == "yeaft_output"
            and f["turnId"] == turn_id
            and f["data"]["type"] == "result"
        ]


@pytest.fixture
async def fx(store_factory: StoreFactory) -> AsyncIterator[Fixture]:
    model = Gated(echo)
    cfg = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(model="offline:default", offline_tps=0),
        provider_overrides={"offline": model},
        dream_idle_s=0,
        dream_every_turns=0,
    )
    worker = VPActor("steve", cfg)
    fixture = Fixture(worker, model)

    async def hold(_: _NoArgs, ctx: ToolContext) -> str:
        fixture.in_tool.set()
        await fixture.release_tool.wait()
        return "held"

    worker.services.engine.tools.register(Tool("hold", "Wait.", _NoArgs, hold))
    await fixture.new_group()
    yield fixture
    await worker.close()


async def settle(cond: Callable[[], bool], within: float = 10.0) -> None:
    """Let the event loop run until ``cond`` holds (tasks reach a sync point).

    Bounded by time, not by turns of the loop: a step on the way may wait
    for a store write on another thread or server.
    """
    deadline = asyncio.get_running_loop().time() + within
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the condition never held")
        await asyncio.sleep(0)


def offered(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once a message is offered to a running turn's inbox."""
    got = asyncio.Event()
    inner = SteerInbox.offer

    async def spy(self: SteerInbox, *args: Any) -> Any:
        taken = await inner(self, *args)
        got.set()
        return taken

    monkeypatch.setattr(SteerInbox, "offer", spy)
    return got


STEER = QueuePolicy(QueueMode.STEER)


async def test_steer_during_a_tool_call_joins_the_running_turn(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = fx.run(await fx.say("please hold", STEER))
    await fx.in_tool.wait()
    was_offered = offered(monkeypatch)
    b_req = await fx.say("also use metres", STEER)
    b = fx.run(b_req)
    await was_offered.wait()
    fx.release_tool.set()
    done_a, done_b = await a, await b
    # The model call after the tool result saw the new message as a user message.
    assert fx.model.calls == 2
    assert said(fx.model.requests[1])[-1] == "[ann] also use metres"
    assert fx.model.requests[1].messages[-2].role == "tool"
    assert done_a.text == "answering: [ann] also use metres"
    # The steered turn ended at once, with one empty result, saying where its message went.
    assert done_b.skipped and done_b.reason is StopReason.END_TURN
    assert [r["stop_reason"] for r in await fx.results(b_req.turn_id)] == ["end_turn"]
    steered = [s for s in await fx.statuses(b_req.turn_id) if s.get("queue")]
    assert steered == [
        {**steered[0], "queue": "steered", "otherTurnId": done_a.turn_id, "state": "idle"}
    ]
    # The next turn starts after the steered message: it is not read twice.
    c = await fx.worker.call(RunTurn(await fx.say("thanks", STEER)))
    assert said(fx.model.requests[-1]).count("[ann] also use metres") == 1
    assert c.text == "answering: [ann] thanks"


async def test_a_steered_message_brings_its_files(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = b"# Plan\nship on Friday"
    record = attachment_record(fx.group, "plan.md", "text/markdown", plan)
    await fx.worker.services.attachments.put(record, plan)
    a = fx.run(await fx.say("please hold", STEER))
    await fx.in_tool.wait()
    was_offered = offered(monkeypatch)
    b = fx.run(await fx.say("see the plan", STEER, [record.ref()]))
    await was_offered.wait()
    fx.release_tool.set()
    await a
    assert (await b).skipped
    # The joined message reached the model with its file read in, as in a turn of its own.
    joined = said(fx.model.requests[1])[-1]
    assert joined.startswith("[ann] see the plan")
    assert '<file name="plan.md" type="text/markdown">\n# Plan\nship on Friday' in joined


async def test_steer_during_a_stream_gets_an_answer_in_the_same_turn(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = fx.model.gates[0] = asyncio.Event()
    a = fx.run(await fx.say("first question", STEER))
    await fx.model.at(0).wait()
    was_offered = offered(monkeypatch)
    b = fx.run(await fx.say("second thought", STEER))
    await was_offered.wait()
    gate.set()
    done_a, done_b = await a, await b
    # The stream ended the model's answer; the joined message got one more call.
    assert fx.model.calls == 2
    assert said(fx.model.requests[0])[-1] == "[ann] first question"
    assert said(fx.model.requests[1])[-1] == "[ann] second thought"
    assert "answering: [ann] second thought" in done_a.text
    assert done_b.skipped


async def test_a_steered_message_the_turn_did_not_take_gets_its_own_turn(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    fx.model.gates[0] = asyncio.Event()  # never opened: the turn is cancelled there
    a_req = await fx.say("first question", STEER)
    a = fx.run(a_req)
    await fx.model.at(0).wait()
    was_offered = offered(monkeypatch)
    b = fx.run(await fx.say("second thought", STEER))
    await was_offered.wait()
    # The running turn is cancelled before its next model call: the offer is refused.
    await fx.worker.call(Abort(fx.group, a_req.turn_id))
    done_a, done_b = await a, await b
    assert done_a.reason is StopReason.ABORTED
    assert not done_b.skipped and done_b.text == "answering: [ann] second thought"


async def test_followup_runs_a_turn_after_the_running_one(fx: Fixture) -> None:
    gate = fx.model.gates[0] = asyncio.Event()
    follow = QueuePolicy(QueueMode.FOLLOWUP)
    a = fx.run(await fx.say("one", follow))
    await fx.model.at(0).wait()
    b_req = await fx.say("two", follow)
    b = fx.run(b_req)
    await settle(lambda: fx.worker.lanes._waiting.get(fx.group) == 2)
    gate.set()
    done_a, done_b = await a, await b
    assert (done_a.text, done_b.text) == ("answering: [ann] one", "answering: [ann] two")
    assert fx.model.calls == 2
    states = [(s["state"], s.get("queue")) for s in await fx.statuses(b_req.turn_id)]
    assert states[0] == ("queued", "queued")
    assert ("thinking", None) in states


async def test_collect_merges_messages_after_the_quiet_window(fx: Fixture) -> None:
    now = [100.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    fx.worker.queue.clock = lambda: now[0]
    fx.worker.queue.sleep = sleep
    policy = QueuePolicy(QueueMode.COLLECT, debounce_s=1.0, cap=2)
    gate = fx.model.gates[0] = asyncio.Event()
    a = fx.run(await fx.say("start", policy))
    await fx.model.at(0).wait()
    carrier_req = await fx.say("msg b", policy)
    carrier = fx.run(carrier_req)
    await settle(lambda: fx.group in fx.worker.queue.batches)
    batch = fx.worker.queue.batches[fx.group]
    members = []
    for text, at in (("msg c", 100.3), ("msg d", 100.5)):
        now[0] = at
        req = await fx.say(text, policy)
        members.append((req, fx.run(req)))
        await settle(lambda: len(batch.triggers) == len(members) + 1)
    gate.set()
    await a
    done = await carrier
    # One quiet window after the last message (at 100.5), on the injected clock.
    assert slept == [pytest.approx(1.0)]
    assert fx.model.calls == 2
    seen = said(fx.model.requests[1])
    # cap=2: the two newest in full, the oldest shortened to a line.
    assert seen[-2:] == ["[ann] msg c", "[ann] msg d"]
    assert seen[-3].startswith("[1 earlier messages") and "- [ann] msg b" in seen[-3]
    assert done.text == "answering: [ann] msg d"
    for req, task in members:
        outcome = await task
        assert outcome.skipped
        merged = [s for s in await fx.statuses(req.turn_id) if s.get("queue")]
        assert [(s["queue"], s["otherTurnId"]) for s in merged] == [("merged", carrier_req.turn_id)]
        assert len(await fx.results(req.turn_id)) == 1
    carrier_states = [s.get("queue") for s in await fx.statuses(carrier_req.turn_id)]
    assert carrier_states[0] == "queued"


async def test_collect_on_an_idle_lane_runs_at_once(fx: Fixture) -> None:
    fx.worker.queue.sleep = _never_sleep
    done = await fx.worker.call(RunTurn(await fx.say("hello", QueuePolicy())))
    assert done.text == "answering: [ann] hello"


async def test_a_message_after_the_answer_is_out_does_not_wait_a_debounce(
    fx: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running turn has sent its result and is saving: the next message just follows it."""
    from actors.transcripts import TranscriptCache

    saving, saved = asyncio.Event(), asyncio.Event()
    inner = TranscriptCache.save

    async def slow_save(*args: Any) -> None:
        saving.set()
        await saved.wait()
        await inner(*args)

    monkeypatch.setattr(TranscriptCache, "save", slow_save)
    fx.worker.queue.sleep = _never_sleep
    first_req = await fx.say("one", QueuePolicy())
    first = fx.run(first_req)
    await saving.wait()
    assert len(await fx.results(first_req.turn_id)) == 1
    second_req = await fx.say("two", QueuePolicy())
    second = fx.run(second_req)
    await settle(lambda: fx.worker.lanes._waiting.get(fx.group) == 2)
    saved.set()
    assert (await first).text == "answering: [ann] one"
    assert (await second).text == "answering: [ann] two"
    assert all(s.get("queue") is None for s in await fx.statuses(second_req.turn_id))


async def _never_sleep(seconds: float) -> None:
    raise AssertionError("an idle lane does not wait")


async def test_interrupt_stops_the_running_turn_keeping_its_text(fx: Fixture) -> None:
    fx.model.push(Reply("partial answer that goes on and on", hang_after=2))
    interrupt = QueuePolicy(QueueMode.INTERRUPT)
    a_req = await fx.say("long question", interrupt)
    a = fx.run(a_req)
    await fx.model.at(0).wait()
    # Wait until the partial text has streamed (the writer released it).
    await _until_output(fx, a_req.turn_id)
    b_req = await fx.say("stop, answer this", interrupt)
    done_b = await fx.worker.call(RunTurn(b_req))
    done_a = await a
    assert done_a.reason is StopReason.ABORTED
    assert done_a.message_id is not None
    reply = await fx.store.get_message(fx.group, done_a.message_id)
    assert reply.text.startswith("partial") and reply.meta.get("incomplete") is True
    assert done_b.text == "answering: [ann] stop, answer this"
    marks = [s for s in await fx.statuses(b_req.turn_id) if s.get("queue")]
    assert [(s["queue"], s["otherTurnId"]) for s in marks] == [("interrupted", a_req.turn_id)]


async def _until_output(fx: Fixture, turn_id: str) -> None:
    for _ in range(500):
        frames = await fx.frames()
        if any(
            f.get("type") == "yeaft_output"
            and f["turnId"] == turn_id
            and f["data"]["type"] == "assistant"
            for f in frames
        ):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no output")


def test_prefix_and_group_setting_pick_the_mode() -> None:
    assert split_queue_prefix("/steer use metres") == (QueueMode.STEER, "use metres")
    assert split_queue_prefix("/queue later") == (QueueMode.FOLLOWUP, "later")
    assert split_queue_prefix("/interrupt\nnow") == (QueueMode.INTERRUPT, "now")
    assert split_queue_prefix("/steer") == (None, "/steer")
    assert split_queue_prefix("/steering wheel") == (None, "/steering wheel")
    settings = GroupSettings(queue_mode=QueueMode.FOLLOWUP, queue_debounce_s=0.5, queue_cap=5)
    assert QueuePolicy.of(settings) == QueuePolicy(QueueMode.FOLLOWUP, 0.5, 5)
    assert QueuePolicy.of(settings, QueueMode.STEER).mode is QueueMode.STEER
    assert GroupSettings().queue_mode is QueueMode.COLLECT
    with pytest.raises(ValueError):
        GroupSettings(queue_cap=0)
    with pytest.raises(ValueError):
        GroupSettings.model_validate({"queueMode": "sometimes"})
