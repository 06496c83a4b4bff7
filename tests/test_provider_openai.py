"""OpenAIProvider with the real ``openai`` SDK against the fake LLM server.

Its errors, cancellation and lifecycle are in ``test_provider_openai_errors.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from engine.errors import ErrorKind
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Message, ToolCall, Usage
from engine.providers.base import (
    PROGRESS,
    ModelStop,
    StopItem,
    ToolSpec,
    UsageItem,
)
from engine.providers.openai import FINISH_REASONS, OpenAIProvider, _ChunkReader
from tests.fixtures.llm_server import FakeLLM, Reply, ScriptedToolCall
from tests.openai_helpers import collect, failure, of_type, request

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider(api_key="sk-test", base_url=fake_llm.openai_base_url)
    yield p
    await p.aclose()


# --- streaming -----------------------------------------------------------


async def test_text_streams_in_order_and_ends_with_one_stop(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("The quick brown fox jumps.", chunks=4)

    items = await collect(provider)

    deltas = of_type(items, TextDelta)
    assert len(deltas) == 4
    assert "".join(d.text for d in deltas) == "The quick brown fox jumps."
    assert of_type(items, StopItem) == [StopItem(ModelStop.END_TURN)]
    assert items[-1] == StopItem(ModelStop.END_TURN)


async def test_usage_separates_cached_tokens(fake_llm: FakeLLM, provider: OpenAIProvider) -> None:
    fake_llm.text("ok", input_tokens=120, output_tokens=7, cache_read_tokens=80)

    items = await collect(provider)

    # prompt_tokens on the wire is 200, of which 80 were cached.
    assert of_type(items, UsageItem) == [
        UsageItem(Usage(input_tokens=120, output_tokens=7, cache_read_tokens=80))
    ]
    assert isinstance(items[-2], UsageItem)  # usage comes just before the stop


async def test_finish_reason_length_maps_to_max_tokens(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("cut sh", stop="max_tokens")

    items = await collect(provider)

    assert items[-1] == StopItem(ModelStop.MAX_TOKENS)


async def test_unknown_finish_reason_is_an_end_turn(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("finished", stop="eos")

    assert (await collect(provider))[-1] == StopItem(ModelStop.END_TURN)


# Every finish_reason Chat Completions servers send, and one no server sends yet.
VENDOR_STOPS = {
    "stop": ModelStop.END_TURN,
    "length": ModelStop.MAX_TOKENS,
    "tool_calls": ModelStop.TOOL_USE,
    "function_call": ModelStop.TOOL_USE,
    "content_filter": ModelStop.CONTENT_FILTER,
    "something_new": ModelStop.END_TURN,
}


@pytest.mark.parametrize(("finish", "expected"), list(VENDOR_STOPS.items()))
async def test_each_finish_reason_maps_to_a_model_stop(
    fake_llm: FakeLLM, provider: OpenAIProvider, finish: str, expected: ModelStop
) -> None:
    fake_llm.text("some text", stop=finish)

    assert (await collect(provider))[-1].reason is expected  # type: ignore[union-attr]


def test_the_finish_table_is_covered_above() -> None:
    # A mapping added to the provider without a case above fails here.
    assert set(FINISH_REASONS) <= set(VENDOR_STOPS)
    assert all(type(stop) is ModelStop for stop in FINISH_REASONS.values())


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields_become_thinking(
    fake_llm: FakeLLM, provider: OpenAIProvider, field: str
) -> None:
    fake_llm.push(Reply(thinking="Let me think.", text="Answer.", chunks=2, reasoning_field=field))

    items = await collect(provider)

    thinking = of_type(items, ThinkingDelta)
    assert "".join(t.text for t in thinking) == "Let me think."
    assert "".join(t.text for t in of_type(items, TextDelta)) == "Answer."
    # Reasoning streams before the answer, as the server sent it.
    assert items.index(thinking[-1]) < items.index(of_type(items, TextDelta)[0])


# --- tool calls ----------------------------------------------------------


async def test_tool_call_arguments_are_accumulated_across_chunks(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    args = {"city": "Zürich", "units": "metric", "days": 3}
    fake_llm.tool_calls(ScriptedToolCall("get_weather", args, id="call_abc", chunks=6))

    items = await collect(provider, request(tools=[WEATHER]))

    assert of_type(items, ToolCallEvent) == [ToolCallEvent("call_abc", "get_weather", args)]
    assert items[-1] == StopItem(ModelStop.TOOL_USE)


async def test_multiple_tool_calls_come_out_in_order(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.tool_calls(
        ScriptedToolCall("get_weather", {"city": "Oslo"}, id="call_1", chunks=3),
        ScriptedToolCall("get_weather", {"city": "Lima"}, id="call_2", chunks=4),
        text="Checking both.",
    )

    items = await collect(provider, request(tools=[WEATHER]))

    calls = of_type(items, ToolCallEvent)
    assert [(c.id, c.arguments["city"]) for c in calls] == [("call_1", "Oslo"), ("call_2", "Lima")]
    assert "".join(t.text for t in of_type(items, TextDelta)) == "Checking both."
    assert items[-1] == StopItem(ModelStop.TOOL_USE)


async def test_invalid_tool_arguments_are_kept_raw(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.tool_calls(ScriptedToolCall("get_weather", '{"city": "Ro', id="call_x"))

    items = await collect(provider, request(tools=[WEATHER]))

    assert of_type(items, ToolCallEvent)[0].arguments == {"_raw": '{"city": "Ro'}


async def test_tool_calls_win_over_the_finish_reason(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.tool_calls(ScriptedToolCall("get_weather", {"city": "Rome"}), stop="end_turn")

    items = await collect(provider, request(tools=[WEATHER]))

    assert items[-1] == StopItem(ModelStop.TOOL_USE)


def delta_chunk(delta: object, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_the_deprecated_function_call_form_is_one_call() -> None:
    reader = _ChunkReader()
    first = reader.feed(
        delta_chunk({"function_call": {"name": "get_weather", "arguments": '{"ci'}})
    )
    last = reader.feed(
        delta_chunk({"function_call": {"arguments": 'ty": "Oslo"}'}}, "function_call")
    )

    assert first == [PROGRESS]
    assert last[0] == PROGRESS
    call = of_type(last, ToolCallEvent)[0]
    assert (call.name, call.arguments) == ("get_weather", {"city": "Oslo"})
    assert reader.finish("openai", "m")[-1] == StopItem(ModelStop.TOOL_USE)


def test_calls_sent_whole_without_an_index_stay_apart() -> None:
    reader = _ChunkReader()
    for n, city in enumerate(["Oslo", "Rome"]):
        fn = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        reader.feed(delta_chunk({"tool_calls": [{"id": f"call_{n}", "function": fn}]}))
    items = reader.feed(delta_chunk({}, "tool_calls"))

    calls = of_type(items, ToolCallEvent)
    assert [(c.id, c.arguments["city"]) for c in calls] == [("call_0", "Oslo"), ("call_1", "Rome")]


def test_chunks_of_unexpected_shapes_yield_nothing_and_raise_nothing() -> None:
    reader = _ChunkReader()
    odd: list[object] = [
        "text",
        {"choices": None},
        {"choices": [None, {"index": 0, "delta": None}]},
        delta_chunk({"content": 5, "tool_calls": "x", "function_call": "y"}),
        {"usage": {"prompt_tokens": "9", "completion_tokens": True}},
    ]

    assert [reader.feed(chunk) for chunk in odd] == [[], [], [], [], []]
    reader.feed(delta_chunk({"content": "ok"}, "stop"))
    assert reader.finish("openai", "m")[-2:] == [UsageItem(Usage()), StopItem(ModelStop.END_TURN)]


# --- request translation -------------------------------------------------


async def test_request_carries_system_tools_usage_option_and_auth(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("ok")

    await collect(provider, request(tools=[WEATHER], max_tokens=321, temperature=0.2))

    sent = fake_llm.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    body = sent.body
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert body["messages"][1] == {"role": "user", "content": "hi"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    # A base_url means a compatible server, which knows max_tokens.
    assert body["max_tokens"] == 321
    assert body["temperature"] == 0.2


async def test_the_body_is_encoded_here_once_as_utf8_json(
    fake_llm: FakeLLM, provider: OpenAIProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's own encoder (the stdlib's, several times slower on a long
    # history) is not used: the provider hands it the encoded bytes.
    def refuse(obj: object) -> bytes:
        raise AssertionError("the SDK encoded the body")

    monkeypatch.setattr(openai._base_client, "openapi_dumps", refuse)
    fake_llm.text("ok")
    text = 'h\u00e9llo \u2713 \U0001f600 "quoted" \\ back\nslash'

    items = await collect(provider, request(messages=[Message.user(text)]))

    assert "".join(d.text for d in of_type(items, TextDelta)) == "ok"
    raw = fake_llm.last_request.raw
    assert "h\u00e9llo \u2713 \U0001f600".encode() in raw  # UTF-8, not \u escapes
    assert fake_llm.last_request.body["messages"][-1] == {"role": "user", "content": text}


async def test_no_system_message_and_no_tools_when_empty(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("ok")

    await collect(provider, request(system=""))

    body = fake_llm.last_request.body
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "tools" not in body
    assert "temperature" not in body
    assert "reasoning_effort" not in body


async def test_reasoning_effort_goes_in_the_body(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("ok")

    await collect(provider, request(options={"reasoning_effort": "low"}))

    assert fake_llm.last_request.body["reasoning_effort"] == "low"


async def test_max_tokens_field_can_be_chosen(fake_llm: FakeLLM, provider: OpenAIProvider) -> None:
    fake_llm.text("ok")

    await collect(
        provider, request(max_tokens=99, options={"max_tokens_field": "max_completion_tokens"})
    )

    body = fake_llm.last_request.body
    assert body["max_completion_tokens"] == 99
    assert "max_tokens" not in body


async def test_history_with_tool_calls_and_results(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("It is sunny in Oslo; Lima failed.")
    history = [
        Message.user("Weather in Oslo and Lima?"),
        Message.assistant(
            "",
            thinking=[{"text": "two lookups", "signature": "s"}],
            tool_calls=[
                ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),
                ToolCall(id="call_2", name="get_weather", arguments={"city": "Lima"}),
            ],
        ),
        Message.tool_result("call_1", "sunny", name="get_weather"),
        Message.tool_result("call_2", "service down", name="get_weather", is_error=True),
    ]

    await collect(provider, request(messages=history, tools=[WEATHER]))

    messages = fake_llm.last_request.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assistant = messages[2]
    # The content key is present even though the text is empty; thinking is dropped.
    assert assistant["content"] == ""
    assert set(assistant) == {"role", "content", "tool_calls"}
    assert assistant["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert messages[4]["tool_call_id"] == "call_2"
    assert messages[4]["content"] == "Error: service down"


async def test_raw_arguments_are_sent_back_verbatim(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    fake_llm.text("ok")
    history = [
        Message.user("go"),
        Message.assistant(
            tool_calls=[ToolCall(id="c1", name="get_weather", arguments={"_raw": '{"city": '})]
        ),
        Message.tool_result("c1", "invalid arguments", is_error=True),
    ]

    await collect(provider, request(messages=history))

    call = fake_llm.last_request.body["messages"][2]["tool_calls"][0]
    assert call["function"]["arguments"] == '{"city": '


async def test_malformed_history_is_rejected_as_format_error(
    fake_llm: FakeLLM, provider: OpenAIProvider
) -> None:
    # A tool result that answers no call: the real API answers 400, so does the fake.
    history = [Message.user("hi"), Message.tool_result("nope", "x")]

    err = await failure(provider, request(messages=history))

    assert err.kind is ErrorKind.FORMAT
    assert err.status == 400
