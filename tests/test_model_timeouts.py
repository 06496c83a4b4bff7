"""A provider that fails on its side, hangs or stalls: reported as what it is, never a hang.

The SDK paths run the real ``openai`` and ``anthropic`` clients against the
local fake server; every deadline here is a fraction of a second, and
retries sleep on a recorder instead of the clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from engine.engine import Engine
from engine.errors import ErrorKind, ModelError
from engine.events import NoticeKind, StopEvent, StopReason, TextDelta, ToolCallEvent
from engine.messages import Conversation, Message
from engine.providers.base import PROGRESS, ModelRequest, StreamItem
from engine.providers.registry import ProviderRegistry
from engine.providers.scripted import Reply, ScriptedModel
from engine.settings import EngineConfig, EngineSettings
from engine.timeouts import StreamTimeouts, watch
from engine.turn_loop import TurnResult
from tests.engine_helpers import Recorder, scripted_engine
from tests.fixtures.llm_server import FakeLLM, ScriptedToolCall
from tests.fixtures.llm_server import Reply as Wire
from tests.fixtures.llm_wire import split
from tests.fixtures.sdk_engines import MakeEngine

VENDORS = ["openai", "anthropic"]
OTHER = {"openai": "anthropic", "anthropic": "openai"}
# Deadlines short enough to keep every test quick, long enough for a busy machine.
# Deadlines short enough to keep the tests quick, long enough for a loaded
# machine to reach the local server well within them.
FAST = {"model_first_token_timeout": 0.6, "model_stall_timeout": 0.6}
# A turn that would wait for the SDK's own timeout fails here instead of hanging.
GUARD = 15.0


async def turn(
    engine: Engine, recorder: Recorder | None = None, conv: Conversation | None = None
) -> TurnResult:
    return await asyncio.wait_for(
        engine.run_turn(
            conv or Conversation(id="c"), Message.user("hi"), system="Be brief.", emit=recorder
        ),
        GUARD,
    )


def notices(recorder: Recorder, kind: NoticeKind) -> list[Any]:
    return [n for n in recorder.of("notice") if n.kind is kind]


# --- configuration -------------------------------------------------------------


def test_timeouts_come_from_the_environment_through_the_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert EngineConfig().stream_timeouts() == StreamTimeouts(10.0, 60.0, 30.0, 600.0)
    monkeypatch.setenv("YEAFT_MODEL_CONNECT_TIMEOUT", "4")
    monkeypatch.setenv("YEAFT_MODEL_FIRST_TOKEN_TIMEOUT", "45")
    monkeypatch.setenv("YEAFT_MODEL_STALL_TIMEOUT", "20.5")
    monkeypatch.setenv("YEAFT_MODEL_TOTAL_TIMEOUT", "300")
    monkeypatch.setenv("YEAFT_IDLE_TIMEOUT", "7")  # the gateway's, not these

    config = EngineSettings().to_config()

    assert config.stream_timeouts() == StreamTimeouts(4.0, 45.0, 20.5, 300.0)
    with pytest.raises(ValidationError):
        config.replace(model_stall_timeout=0)


async def test_the_sdk_clients_get_the_connect_timeout_and_a_read_backstop() -> None:
    config = EngineConfig(
        openai_api_key=SecretStr("sk-test"),
        anthropic_api_key=SecretStr("sk-ant-test"),
        model_connect_timeout=3.5,
        model_first_token_timeout=40,
        model_stall_timeout=15,
    )
    registry = ProviderRegistry(config)
    try:
        clients = [registry.resolve(f"{v}:m")[0]._client for v in VENDORS]  # type: ignore[attr-defined]
    finally:
        await registry.aclose()
    for client in clients:
        assert client.timeout.connect == 3.5
        # Behind both engine deadlines, so the engine's clearer error comes first.
        assert client.timeout.read == 55.0


# --- the deadlines themselves, on the offline model ------------------------------


def _request() -> ModelRequest:
    return ModelRequest(model="test", system="s", messages=[Message.user("hi")])


async def collect(stream: AsyncIterator[StreamItem], limits: StreamTimeouts) -> list[StreamItem]:
    return [item async for item in watch(stream, limits, "offline:test")]


async def test_no_first_token_in_time_is_a_timeout_that_names_the_model() -> None:
    provider = ScriptedModel([Reply("never said", hang_after=0)])
    stream = provider.stream(_request())

    with pytest.raises(ModelError) as info:
        await collect(stream, StreamTimeouts(first_token=0.05, stall=5))

    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.message == "no first token from offline:test within 0.05 s"
    assert (info.value.provider, info.value.model) == ("offline", "test")


async def test_silence_after_some_output_is_a_stall() -> None:
    provider = ScriptedModel([Reply("one two three", hang_after=2)])
    received: list[StreamItem] = []

    with pytest.raises(ModelError) as info:
        limits = StreamTimeouts(first_token=5, stall=0.05)
        async for item in watch(provider.stream(_request()), limits, "offline:test"):
            received.append(item)

    assert [i.text for i in received if isinstance(i, TextDelta)] == ["one", " two"]
    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.message == (
        "the stream from offline:test stalled: nothing for 0.05 s after 2 chunks"
    )


async def test_progress_restarts_the_clock_and_is_not_passed_on() -> None:
    async def long_tool_call() -> AsyncIterator[StreamItem]:
        for _ in range(8):
            await asyncio.sleep(0.1)
            yield PROGRESS
        yield ToolCallEvent("c1", "write", {"text": "long"})

    # 0.8 s in all, more than either deadline, but never 0.5 s of silence.
    items = await collect(long_tool_call(), StreamTimeouts(first_token=0.5, stall=0.5))

    assert items == [ToolCallEvent("c1", "write", {"text": "long"})]


async def test_a_steady_stream_past_the_total_limit_is_a_timeout() -> None:
    async def drip() -> AsyncIterator[StreamItem]:
        for _ in range(20):
            await asyncio.sleep(0.1)
            yield TextDelta("x")

    received: list[StreamItem] = []
    with pytest.raises(ModelError) as info:
        limits = StreamTimeouts(first_token=0.6, stall=0.6, total=0.5)
        async for item in watch(drip(), limits, "offline:test"):
            received.append(item)

    # Never 0.6 s of silence, but 0.5 s of waiting in all.
    assert 2 <= len(received) < 20
    assert info.value.kind is ErrorKind.TIMEOUT
    assert info.value.message == "the call to offline:test ran past its 0.5 s limit"


async def test_time_the_consumer_takes_is_not_counted_as_silence() -> None:
    provider = ScriptedModel(["one two three"])
    limits = StreamTimeouts(first_token=0.1, stall=0.1)
    received = 0
    async for _ in watch(provider.stream(_request()), limits, "offline:test"):
        received += 1
        await asyncio.sleep(0.15)  # a slow client: longer than the stall limit
    assert received == 5  # three words, usage, stop
    provider.assert_complete()


async def test_a_steady_stream_sets_the_deadline_timer_once_not_per_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each wait has its deadline, but a stream that never nears one costs no timer per item."""
    loop = asyncio.get_running_loop()
    timers: list[float] = []
    call_at = loop.call_at

    def counted(when: float, *args: Any, **kw: Any) -> asyncio.TimerHandle:
        timers.append(when)
        return call_at(when, *args, **kw)

    monkeypatch.setattr(loop, "call_at", counted)
    provider = ScriptedModel([" ".join(["word"] * 200)])
    items = await collect(provider.stream(_request()), StreamTimeouts(first_token=60, stall=30))
    monkeypatch.undo()
    assert len(items) == 202  # 200 words, usage, stop
    # The first token's deadline, then the shorter stall deadline once: two timers.
    assert len(timers) == 2


async def test_a_cancel_from_outside_while_waiting_stays_a_cancel() -> None:
    """An abort while the model is silent is the abort, not a timeout, and ends the stream."""
    gate = asyncio.Event()
    closed: list[bool] = []

    async def silent() -> AsyncIterator[StreamItem]:
        try:
            yield TextDelta("one")
            await gate.wait()
            yield TextDelta("never")
        finally:
            closed.append(True)

    received: list[StreamItem] = []
    first = asyncio.Event()

    async def read() -> None:
        async for item in watch(silent(), StreamTimeouts(stall=5), "offline:test"):
            received.append(item)
            first.set()

    task = asyncio.create_task(read())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received == [TextDelta("one")] and closed == [True]


async def test_a_hung_model_is_retried_then_the_fallback_answers() -> None:
    backup = ScriptedModel(["from the backup"])
    engine, provider, sleep = scripted_engine(
        Reply("never", hang_after=0),
        Reply("never", hang_after=0),
        providers={"backup": backup},
        fallbacks=["backup:b1"],
        max_retries=1,
        model_first_token_timeout=0.05,
    )
    recorder = Recorder()

    result = await turn(engine, recorder)

    assert result.text == "from the backup" and result.model == "backup:b1"
    assert provider.calls == 2 and len(sleep.delays) == 1
    assert [a["reason"] for a in result.attempts] == ["timeout", "timeout"]
    assert len(notices(recorder, NoticeKind.RETRY)) == 1
    assert len(notices(recorder, NoticeKind.FALLBACK)) == 1
    provider.assert_complete()
    backup.assert_complete()


async def test_an_abort_after_a_stalled_attempt_keeps_only_the_new_attempts_text() -> None:
    engine, _, _ = scripted_engine(
        Reply("stale words", hang_after=1),
        Reply("fresh words", hang_after=1),
        max_retries=1,
        model_stall_timeout=0.2,
    )
    abort = asyncio.Event()
    recorder = Recorder()

    async def emit(event: Any) -> None:
        await recorder(event)
        if isinstance(event, TextDelta) and event.text == "fresh":
            abort.set()

    conv = Conversation(id="c")
    result = await engine.run_turn(conv, Message.user("x"), system="s", emit=emit, abort=abort)

    assert result.reason is StopReason.ABORTED
    # The stalled attempt's text was dropped when it failed; it is no part of the reply.
    assert conv.messages[-1].content == "fresh"


# --- server errors -----------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_500_is_reported_as_a_server_error_not_a_timeout(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.error(500, "The server had an error while processing your request")
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=0), recorder)

    assert result.error_kind == "server_error"
    assert result.error is not None
    assert f"{vendor}:primary: server_error 500 (The server had an error" in result.error
    assert "timeout" not in result.error
    assert len(recorder.of("stop")) == 1 and isinstance(recorder.events[-1], StopEvent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_500_is_retried_like_other_transient_failures(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.error(500).text("second try")

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=1))

    assert result.text == "second try"
    assert [a["reason"] for a in result.attempts] == ["server_error"]


# --- hangs and stalls through the real SDKs ------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("silent", ["no head", "head only"])
async def test_a_model_that_never_answers_is_retried_then_falls_back(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str, silent: str
) -> None:
    for _ in range(2):
        if silent == "no head":
            fake_llm.hang()
        else:
            fake_llm.push(Wire(text="never sent", stall_after=0))
    fake_llm.text("from the backup")
    backup = f"{OTHER[vendor]}:backup"
    engine = sdk_engine(f"{vendor}:primary", [backup], max_retries=1, **FAST)
    recorder = Recorder()

    result = await turn(engine, recorder)

    assert result.reason is StopReason.END_TURN
    assert result.text == "from the backup" and result.model == backup
    expected = f"no first token from {vendor}:primary within 0.6 s"
    assert [(a["reason"], a["message"]) for a in result.attempts] == [("timeout", expected)] * 2
    assert len(notices(recorder, NoticeKind.RETRY)) == 1
    assert notices(recorder, NoticeKind.FALLBACK)[0].detail["to"] == backup
    assert len(fake_llm.requests) == 3


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stream_that_stalls_mid_reply_ends_in_one_clear_error(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    text = "one two three four"
    fake_llm.push(Wire(text=text, chunks=4, stall_after=2))
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=0, **FAST), recorder)

    assert result.reason is StopReason.ERROR and result.error_kind == "timeout"
    assert result.error is not None
    assert f"the stream from {vendor}:primary stalled: nothing for 0.6 s after" in result.error
    assert "".join(d.text for d in recorder.of("text_delta")) == "".join(split(text, 4)[:2])
    assert result.text == ""  # what was streamed before the stall is not an answer
    assert len(recorder.of("stop")) == 1 and isinstance(recorder.events[-1], StopEvent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stall_mid_reply_is_retried_and_the_partial_text_discarded(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.push(Wire(text="one two three four", chunks=4, stall_after=2))
    fake_llm.text("the whole answer", chunks=3)
    recorder = Recorder()
    conv = Conversation(id="c")

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=1, **FAST), recorder, conv)

    assert result.reason is StopReason.END_TURN and result.text == "the whole answer"
    (retry,) = notices(recorder, NoticeKind.RETRY)
    assert retry.detail["reason"] == "timeout" and retry.detail["discard_partial"] is True
    assert conv.messages[-1].content == "the whole answer"


@pytest.mark.parametrize("vendor", VENDORS)
async def test_when_every_model_hangs_the_turn_ends_in_one_error(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.default = Wire(text="never sent", delay=3600)
    backup = f"{OTHER[vendor]}:backup"
    engine = sdk_engine(f"{vendor}:primary", [backup], max_retries=1, **FAST)
    recorder = Recorder()
    started = time.monotonic()

    result = await turn(engine, recorder)

    assert time.monotonic() - started < GUARD / 2  # four attempts of 0.6 s, not a hang
    assert result.reason is StopReason.ERROR and result.error_kind == "timeout"
    assert result.error is not None and result.error.startswith("All models failed (4)")
    assert f"{vendor}:primary: timeout (no first token" in result.error
    assert f"{backup}: timeout (no first token" in result.error
    assert len(recorder.of("stop")) == 1 and isinstance(recorder.events[-1], StopEvent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_long_tool_call_streamed_steadily_is_not_a_stall(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    call = ScriptedToolCall("rethink", {"reason": "a long argument " * 8}, chunks=20)
    fake_llm.push(Wire(tool_calls=[call], chunk_delay=0.06))
    fake_llm.text("done")
    limits = {"model_first_token_timeout": 0.6, "model_stall_timeout": 0.6}
    recorder = Recorder()

    # About 1.2 s of arguments in all, twice either deadline, in gaps of 0.06 s.
    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=0, **limits), recorder)

    assert result.reason is StopReason.END_TURN and result.text == "done"
    assert [c.name for c in recorder.of("tool_call")] == ["rethink"]
    assert not recorder.of("progress")  # progress never reaches a client
