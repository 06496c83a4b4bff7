"""AnthropicProvider with the real ``anthropic`` SDK against the fake LLM server.

Streaming, tool calls and request translation; errors, cancellation and the
client's lifecycle are in ``tests/test_provider_anthropic_errors.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from engine.errors import ErrorKind
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Message, Thinking, ToolCall, Usage
from engine.providers.anthropic import STOP_REASONS, AnthropicProvider
from engine.providers.base import ModelStop, StopItem, UsageItem
from tests.anthropic_helpers import MODEL, SEARCH, collect, failure, of_type, request
from tests.fixtures.llm_server import FakeLLM, Reply, ScriptedToolCall


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key="sk-ant-test", base_url=fake_llm.anthropic_base_url)
    yield p
    await p.aclose()


# --- streaming -----------------------------------------------------------


async def test_text_streams_in_order_and_ends_with_one_stop(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("Small steps, often.", chunks=5)

    items = await collect(provider)

    deltas = of_type(items, TextDelta)
    assert len(deltas) == 5
    assert "".join(d.text for d in deltas) == "Small steps, often."
    assert of_type(items, StopItem) == [StopItem(ModelStop.END_TURN)]
    assert items[-1] == StopItem(ModelStop.END_TURN)


async def test_usage_combines_message_start_and_delta(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text(
        "ok", input_tokens=42, output_tokens=17, cache_read_tokens=1000, cache_write_tokens=300
    )

    items = await collect(provider)

    assert of_type(items, UsageItem) == [
        UsageItem(
            Usage(input_tokens=42, output_tokens=17, cache_read_tokens=1000, cache_write_tokens=300)
        )
    ]
    assert isinstance(items[-2], UsageItem)


# Every stop_reason the Messages API documents, and one it does not (yet).
VENDOR_STOPS = {
    "end_turn": ModelStop.END_TURN,
    "stop_sequence": ModelStop.END_TURN,
    "max_tokens": ModelStop.MAX_TOKENS,
    "tool_use": ModelStop.TOOL_USE,
    "model_context_window_exceeded": ModelStop.MAX_TOKENS,
    "pause_turn": ModelStop.END_TURN,
    "refusal": ModelStop.CONTENT_FILTER,
    "something_new": ModelStop.END_TURN,
}


@pytest.mark.parametrize(("stop", "expected"), list(VENDOR_STOPS.items()))
async def test_stop_reasons(
    fake_llm: FakeLLM, provider: AnthropicProvider, stop: str, expected: ModelStop
) -> None:
    fake_llm.text("some text", stop=stop)

    assert (await collect(provider))[-1].reason is expected  # type: ignore[union-attr]


def test_the_stop_table_is_covered_above() -> None:
    # A mapping added to the provider without a case above fails here.
    assert set(STOP_REASONS) <= set(VENDOR_STOPS)
    assert all(type(stop) is ModelStop for stop in STOP_REASONS.values())


async def test_thinking_streams_with_its_signature(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.push(
        Reply(thinking="First, the premise.", signature="sig-123", text="Done.", chunks=3)
    )

    items = await collect(provider)

    thinking = of_type(items, ThinkingDelta)
    assert "".join(t.text for t in thinking) == "First, the premise."
    assert [t.signature for t in thinking if t.signature] == ["sig-123"]
    assert "".join(t.text for t in of_type(items, TextDelta)) == "Done."
    assert items.index(thinking[-1]) < items.index(of_type(items, TextDelta)[0])


async def test_thinking_budget_enables_thinking(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("ok")

    await collect(
        provider,
        request(max_tokens=1000, temperature=0.5, options={"thinking_budget": 2048}),
    )

    body = fake_llm.last_request.body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    # The API needs max_tokens above the budget; the answer keeps its 1000.
    assert body["max_tokens"] == 3048
    # Temperature cannot be combined with thinking.
    assert "temperature" not in body


async def test_temperature_is_sent_without_thinking(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("ok")

    await collect(provider, request(temperature=0.3))

    body = fake_llm.last_request.body
    assert body["temperature"] == 0.3
    assert "thinking" not in body


# --- tool calls ----------------------------------------------------------


async def test_tool_input_is_accumulated_until_block_stop(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    args = {"query": "loop guard design", "limit": 5}
    fake_llm.tool_calls(
        ScriptedToolCall("search", args, id="toolu_1", chunks=7), text="Let me look."
    )

    items = await collect(provider, request(tools=[SEARCH]))

    assert of_type(items, ToolCallEvent) == [ToolCallEvent("toolu_1", "search", args)]
    assert "".join(t.text for t in of_type(items, TextDelta)) == "Let me look."
    assert items[-1] == StopItem(ModelStop.TOOL_USE)


async def test_multiple_tool_calls(fake_llm: FakeLLM, provider: AnthropicProvider) -> None:
    fake_llm.tool_calls(
        ScriptedToolCall("search", {"query": "a"}, id="toolu_a", chunks=2),
        ScriptedToolCall("search", {"query": "b", "limit": 2}, id="toolu_b", chunks=3),
    )

    items = await collect(provider, request(tools=[SEARCH]))

    calls = of_type(items, ToolCallEvent)
    assert [(c.id, c.arguments) for c in calls] == [
        ("toolu_a", {"query": "a"}),
        ("toolu_b", {"query": "b", "limit": 2}),
    ]


async def test_tool_call_without_input_has_empty_arguments(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.tool_calls(ScriptedToolCall("search", "", id="toolu_e"))

    items = await collect(provider, request(tools=[SEARCH]))

    assert of_type(items, ToolCallEvent)[0].arguments == {}


async def test_invalid_tool_input_is_kept_raw(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.tool_calls(ScriptedToolCall("search", '{"query": [1,', id="toolu_x"))

    items = await collect(provider, request(tools=[SEARCH]))

    assert of_type(items, ToolCallEvent)[0].arguments == {"_raw": '{"query": [1,'}


# --- request translation -------------------------------------------------


async def test_system_and_tools_are_split_out(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("ok")

    await collect(provider, request(tools=[SEARCH], max_tokens=777))

    sent = fake_llm.last_request
    assert sent.path == "/v1/messages"
    # SDK 2.x sends the key as a bearer token; older releases used x-api-key.
    assert (
        sent.headers.get("x-api-key") == "sk-ant-test"
        or sent.headers.get("authorization") == "Bearer sk-ant-test"
    )
    assert "anthropic-version" in sent.headers
    body = sent.body
    assert body["system"] == "You are terse."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"] == [
        {"name": "search", "description": "Search the notes.", "input_schema": SEARCH.parameters}
    ]
    assert body["max_tokens"] == 777
    assert body["stream"] is True
    assert "thinking" not in body


async def test_empty_system_is_omitted(fake_llm: FakeLLM, provider: AnthropicProvider) -> None:
    fake_llm.text("ok")

    await collect(provider, request(system=""))

    assert "system" not in fake_llm.last_request.body


async def test_the_body_is_built_and_encoded_here_once_as_utf8_json(
    fake_llm: FakeLLM, provider: AnthropicProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither the SDK's copy of the request tree nor its stdlib encoder runs
    # (both walk the whole history at every call): the provider hands over bytes.
    def refuse(obj: object) -> bytes:
        raise AssertionError("the SDK encoded the body")

    prepare = anthropic._base_client.async_prepare_request_data
    prepared: list[type] = []

    async def watched(data: object, **kwargs: Any) -> Any:
        prepared.append(type(data))
        return await prepare(data, **kwargs)

    monkeypatch.setattr(anthropic._base_client, "openapi_dumps", refuse)
    monkeypatch.setattr(anthropic._base_client, "async_prepare_request_data", watched)
    fake_llm.text("ok")
    text = 'h\u00e9llo \u2713 \U0001f600 "quoted" \\ back\nslash'

    items = await collect(provider, request(messages=[Message.user(text)], temperature=0.3))

    assert "".join(d.text for d in of_type(items, TextDelta)) == "ok"
    assert prepared == [type(None)], "the SDK had no tree of the body to copy"
    recorded = fake_llm.last_request
    assert "h\u00e9llo \u2713 \U0001f600".encode() in recorded.raw  # UTF-8, not \u escapes
    assert recorded.headers["content-type"] == "application/json"
    body = recorded.body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": text}]}]
    assert (body["model"], body["stream"], body["temperature"]) == (MODEL, True, 0.3)


async def test_history_translation_merges_and_orders_blocks(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("Both found.")
    history = [
        Message.user("Find a and b."),
        Message.user("Quickly, please."),
        Message.assistant(
            "Searching.",
            thinking=[
                Thinking(text="two searches", signature="sig-x"),
                Thinking(text="from another provider"),
            ],
            tool_calls=[
                ToolCall(id="toolu_a", name="search", arguments={"query": "a"}),
                ToolCall(id="toolu_b", name="search", arguments={"query": "b"}),
            ],
        ),
        Message.tool_result("toolu_a", "found a", name="search"),
        Message.tool_result("toolu_b", "index offline", name="search", is_error=True),
        Message.user("And summarise."),
    ]

    await collect(provider, request(messages=history, tools=[SEARCH]))

    messages = fake_llm.last_request.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"] == [
        {"type": "text", "text": "Find a and b."},
        {"type": "text", "text": "Quickly, please."},
    ]
    assert messages[1]["content"] == [
        # Signed thinking first; the unsigned one cannot be verified and is dropped.
        {"type": "thinking", "thinking": "two searches", "signature": "sig-x"},
        {"type": "text", "text": "Searching."},
        {"type": "tool_use", "id": "toolu_a", "name": "search", "input": {"query": "a"}},
        {"type": "tool_use", "id": "toolu_b", "name": "search", "input": {"query": "b"}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found a"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "index offline",
            "is_error": True,
        },
        {"type": "text", "text": "And summarise."},
    ]


async def test_tool_results_go_first_in_a_merged_user_message(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("ok")
    history = [
        Message.user("go"),
        Message.assistant(tool_calls=[ToolCall(id="t1", name="search", arguments={"query": "q"})]),
        # A user interjection stored before the result must not precede it on the wire.
        Message.user("also this"),
        Message.tool_result("t1", "result"),
    ]

    await collect(provider, request(messages=history))

    content = fake_llm.last_request.body["messages"][2]["content"]
    assert [b["type"] for b in content] == ["tool_result", "text"]


async def test_empty_assistant_message_is_skipped(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    fake_llm.text("ok")
    history = [Message.user("one"), Message.assistant(""), Message.user("two")]

    await collect(provider, request(messages=history))

    messages = fake_llm.last_request.body["messages"]
    assert len(messages) == 1
    assert [b["text"] for b in messages[0]["content"]] == ["one", "two"]


async def test_malformed_history_is_rejected_as_format_error(
    fake_llm: FakeLLM, provider: AnthropicProvider
) -> None:
    # A tool call with no result after it: the real API answers 400, so does the fake.
    history = [
        Message.user("go"),
        Message.assistant(tool_calls=[ToolCall(id="t1", name="search")]),
        Message.user("never mind"),
    ]

    err = await failure(provider, request(messages=history))

    assert err.kind is ErrorKind.FORMAT
    assert err.status == 400
    assert "tool_result" in err.message
