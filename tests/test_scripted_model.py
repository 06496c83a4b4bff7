"""The scripted model: plays its script, fails loudly off it, and crosses into Ray actors."""

from __future__ import annotations

import asyncio
import time

import pytest
from ray import cloudpickle

from engine.call_context import CallContext, CallMode, Speaker
from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Message
from engine.providers.base import ModelRequest, ModelStop, StopItem, StreamItem
from engine.providers.scripted import Fail, Reply, ScriptedModel, Step


def request(model: str = "test", context: CallContext | None = None) -> ModelRequest:
    return ModelRequest(
        model=model, system="s", messages=[Message.user("hi")], context=context or CallContext()
    )


async def items(model: ScriptedModel, req: ModelRequest | None = None) -> list[StreamItem]:
    return [item async for item in model.stream(req or request())]


def text(got: list[StreamItem]) -> str:
    return "".join(i.text for i in got if isinstance(i, TextDelta))


async def test_listed_steps_play_in_order_then_the_function_answers() -> None:
    model = ScriptedModel(["one", Reply("two", thinking="hmm")], then=lambda _: "rest")
    assert text(await items(model)) == "one"
    second = await items(model)
    assert second[0] == ThinkingDelta("hmm") and text(second) == "two"
    assert [text(await items(model)) for _ in range(2)] == ["rest", "rest"]
    assert model.calls == 4 and model.remaining == 0
    model.assert_complete()


async def test_a_reply_with_tool_calls_stops_for_tool_use() -> None:
    model = ScriptedModel([Reply(tool_calls=[("rethink", {"reason": "r"})])])
    got = await items(model)
    assert ToolCallEvent("call_1_0", "rethink", {"reason": "r"}) in got
    assert got[-1] == StopItem(ModelStop.TOOL_USE)


@pytest.mark.parametrize("kind", list(ErrorKind))
async def test_a_fail_step_raises_its_kind_after_what_it_streams(kind: ErrorKind) -> None:
    model = ScriptedModel([Fail(kind, "down", status=503, retry_after=2, after_text="par")])
    got: list[StreamItem] = []
    with pytest.raises(ModelError) as info:
        async for item in model.stream(request()):
            got.append(item)
    assert got == [TextDelta("par")]
    err = info.value
    assert (err.kind, err.message, err.status, err.retry_after) == (kind, "down", 503, 2)
    assert (err.provider, err.model) == ("scripted", "test")


async def test_unused_steps_fail_assert_complete() -> None:
    model = ScriptedModel(["used", "left over"])
    await items(model)
    with pytest.raises(AssertionError, match="1 scripted steps unused"):
        model.assert_complete()


async def test_a_call_past_the_script_is_an_error_and_fails_assert_complete() -> None:
    model = ScriptedModel(["only"])
    await items(model)
    with pytest.raises(ModelError, match="script exhausted at call 2"):
        await items(model)
    with pytest.raises(AssertionError, match=r"calls \[2\] came after the script ran out"):
        model.assert_complete()
    model.push("more")
    assert text(await items(model)) == "more"


async def test_a_script_reads_the_call_context_not_options() -> None:
    def by_speaker(req: ModelRequest) -> Step:
        return f"{req.context.speaker_id}:{req.context.mode}:{req.context.purpose}"

    model = ScriptedModel(by_speaker)
    steve = CallContext(speaker=Speaker("steve"), mode=CallMode.TASK, purpose="team.router")
    assert text(await items(model, request(context=steve))) == "steve:task:team.router"
    assert text(await items(model)) == "None:chat:None"


async def test_the_model_string_paces_replies_but_not_team_calls() -> None:
    model = ScriptedModel(lambda _: "a b c d e")
    started = time.monotonic()
    assert text(await items(model, request("test?ttft=0.1&tps=50"))) == "a b c d e"
    assert time.monotonic() - started >= 0.1 + 4 / 50
    team = request("test?tps=1", CallContext(mode=CallMode.TASK, purpose="team.planner"))
    started = time.monotonic()
    await items(model, team)
    assert time.monotonic() - started < 1


async def test_a_hang_streams_some_text_then_waits_for_a_cancel() -> None:
    model = ScriptedModel([Reply("one two three", hang_after=1)])
    stream = model.stream(request())
    assert await anext(stream) == TextDelta("one")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(stream), 0.05)


def done(req: ModelRequest) -> Step:
    return "done"


async def test_the_model_pickles_with_its_script_and_each_copy_plays_its_own() -> None:
    model = ScriptedModel(["first"], then=done)
    copy = cloudpickle.loads(cloudpickle.dumps(model))
    assert text(await items(copy)) == "first" and text(await items(copy)) == "done"
    assert model.remaining == 1 and model.calls == 0
    copy.assert_complete()
