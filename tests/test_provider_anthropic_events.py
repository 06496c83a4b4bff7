"""The Anthropic provider's reader on events as parsed JSON, whatever their shape.

The provider reads each streamed event as the JSON the server sent (no SDK
model per event), so a field of an unexpected type must be skipped, never
raise: a TypeError here would escape as a bug instead of a model error.
"""

from __future__ import annotations

from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Usage
from engine.providers.anthropic import _EventReader
from engine.providers.base import PROGRESS, ModelStop, StopItem, UsageItem


def delta(index: object, body: object) -> dict[str, object]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def test_events_of_unexpected_shapes_yield_nothing_and_raise_nothing() -> None:
    reader = _EventReader()
    odd: list[object] = [
        "text",
        None,
        {"type": 5},
        {"type": "ping"},
        {"type": "message_start", "message": None},
        {"type": "message_start", "message": {"usage": {"input_tokens": "9"}}},
        {"type": "content_block_start", "index": 0, "content_block": None},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking"}},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": 3}},
        delta(0, None),
        delta(0, {"type": "text_delta", "text": ["a"]}),
        delta(0, {"type": "input_json_delta", "partial_json": "{}"}),  # no tool block open
        delta("x", {"type": "thinking_delta", "thinking": None}),
        {"type": "content_block_stop", "index": None},
        {"type": "message_delta", "delta": "end_turn", "usage": {"output_tokens": True}},
    ]

    assert [reader.feed(event) for event in odd] == [[] for _ in odd]
    reader.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
    assert reader.finish("anthropic", "m") == [UsageItem(Usage()), StopItem(ModelStop.END_TURN)]


def test_a_whole_stream_of_json_events_reads_as_before() -> None:
    reader = _EventReader()
    events: list[object] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
        delta(0, {"type": "thinking_delta", "thinking": "hm"}),
        delta(0, {"type": "signature_delta", "signature": "sig"}),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        delta(1, {"type": "text_delta", "text": "Hi"}),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
        },
        delta(2, {"type": "input_json_delta", "partial_json": '{"path": '}),
        delta(2, {"type": "input_json_delta", "partial_json": '"a.txt"}'}),
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30, "cache_read_input_tokens": None},
        },
        {"type": "message_stop"},
    ]

    items = [item for event in events for item in reader.feed(event)]
    items += reader.finish("anthropic", "m")

    assert items == [
        ThinkingDelta("hm"),
        ThinkingDelta("", signature="sig"),
        TextDelta("Hi"),
        PROGRESS,
        PROGRESS,
        PROGRESS,
        ToolCallEvent(id="t1", name="read", arguments={"path": "a.txt"}),
        UsageItem(Usage(input_tokens=12, output_tokens=30)),
        StopItem(ModelStop.TOOL_USE),
    ]
