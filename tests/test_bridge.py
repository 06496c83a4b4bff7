"""engine.bridge: each engine event becomes its payload.

Coalescing, close and ordering are in ``tests/test_bridge_delivery.py``.
"""

from __future__ import annotations

import pytest

from engine.events import (
    NoticeEvent,
    NoticeKind,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from engine.messages import Usage
from tests.bridge_helpers import Recorder, eager, stop


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


# Mapping -------------------------------------------------------------------


async def test_text_delta_becomes_assistant_text(recorder: Recorder) -> None:
    bridge = eager(recorder)
    await bridge.feed(TextDelta("hello"))
    assert recorder.payloads == [
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "hello"}]}}
    ]  # fmt: skip


async def test_thinking_delta_becomes_thinking_block(recorder: Recorder) -> None:
    bridge = eager(recorder)
    await bridge.feed(ThinkingDelta("let me see"))
    await bridge.feed(ThinkingDelta("", signature="sig-1"))
    blocks = [p["message"]["content"][0] for p in recorder.payloads]
    assert blocks == [
        {"type": "thinking", "thinking": "let me see"},
        {"type": "thinking", "thinking": "", "signature": "sig-1"},
    ]


async def test_tool_call_and_result(recorder: Recorder) -> None:
    bridge = eager(recorder)
    await bridge.feed(ToolCallEvent("t1", "bash", {"cmd": "ls"}))
    await bridge.feed(ToolResultEvent("t1", "bash", "no such file", is_error=True))
    assert recorder.payloads == [
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"cmd": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "no such file",
             "is_error": True}]}},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "subtype"),
    [
        (NoticeKind.RETRY, "notice"),
        (NoticeKind.FALLBACK, "notice"),
        (NoticeKind.CONTINUE, "notice"),
        (NoticeKind.TRUNCATE, "notice"),
        (NoticeKind.REPAIR, "notice"),
        (NoticeKind.BUDGET, "notice"),
        (NoticeKind.COMPACT, "compact"),
        (NoticeKind.ERROR, "error"),
    ],
)
async def test_notice_becomes_system(recorder: Recorder, kind: NoticeKind, subtype: str) -> None:
    bridge = eager(recorder)
    await bridge.feed(NoticeEvent(kind, "something happened", {"attempt": 2}))
    # The wire carries the plain value, not the enum member.
    assert type(recorder.payloads[0]["detail"]["kind"]) is str
    assert recorder.payloads == [
        {
            "type": "system",
            "subtype": subtype,
            "message": "something happened",
            "detail": {"kind": kind, "attempt": 2},
        }
    ]


@pytest.mark.parametrize(
    ("reason", "subtype", "is_error"),
    [
        (StopReason.END_TURN, "success", False),
        (StopReason.TOOL_HANDOFF, "success", False),
        (StopReason.FINISH, "success", False),
        (StopReason.MAX_TOKENS, "success", False),
        (StopReason.TOOL_USE, "success", False),
        (StopReason.ERROR_MAX_TURNS, "error_max_turns", True),
        (StopReason.ERROR, "error_during_execution", True),
        (StopReason.ABORTED, "error_during_execution", True),
    ],
)
async def test_stop_becomes_result(
    recorder: Recorder, reason: StopReason, subtype: str, is_error: bool
) -> None:
    bridge = eager(recorder)
    attempts = [{"provider": "openai", "model": "m1", "error": "rate_limit"}]
    await bridge.feed(
        stop(
            reason,
            usage=Usage(
                input_tokens=10, output_tokens=4, cache_read_tokens=3, cache_write_tokens=1
            ),
            cost_usd=0.25,
            duration_ms=1500,
            model="m2",
            error="it broke" if is_error else None,
            attempts=attempts,
        )
    )
    result = recorder.payloads[-1]
    assert type(result["stop_reason"]) is str
    assert result == {
        "type": "result",
        "subtype": subtype,
        "session_id": "conv-1",
        "is_error": is_error,
        "duration_ms": 1500,
        "total_cost_usd": 0.25,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 4,
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 1,
        },
        "stop_reason": reason,
        "model": "m2",
        "attempts": attempts,
        **({"error": "it broke"} if is_error else {}),
    }


async def test_usage_is_accumulated_not_sent(recorder: Recorder) -> None:
    bridge = eager(recorder)
    await bridge.feed(UsageEvent(Usage(input_tokens=5, output_tokens=1), "openai", "m1"))
    await bridge.feed(TextDelta("ok"))
    await bridge.feed(UsageEvent(Usage(input_tokens=7, cache_read_tokens=2), "openai", "m1"))
    assert bridge.usage == Usage(input_tokens=12, output_tokens=1, cache_read_tokens=2)
    assert [p["type"] for p in recorder.payloads] == ["assistant"]
    await bridge.feed(stop())  # the stop carries no usage of its own
    result = recorder.payloads[-1]
    assert result["usage"] == {
        "input_tokens": 12,
        "output_tokens": 1,
        "cache_read_input_tokens": 2,
        "cache_creation_input_tokens": 0,
    }
    assert result["model"] == "m1"
    assert result["result"] == "ok"
    assert bridge.usage == Usage()  # the next turn starts from zero


async def test_stop_usage_wins_over_the_running_sum(recorder: Recorder) -> None:
    bridge = eager(recorder)
    await bridge.feed(UsageEvent(Usage(input_tokens=5), "openai", "m1"))
    await bridge.feed(stop(usage=Usage(input_tokens=5, output_tokens=9)))
    assert recorder.payloads[-1]["usage"]["output_tokens"] == 9


async def test_result_text_is_the_text_after_the_last_tool(recorder: Recorder) -> None:
    bridge = eager(recorder)
    for event in (
        TextDelta("checking"),
        ToolCallEvent("t1", "ls", {}),
        ToolResultEvent("t1", "ls", "a b"),
        TextDelta("there are "),
        TextDelta("two files"),
        stop(),
    ):
        await bridge.feed(event)
    assert recorder.payloads[-1]["result"] == "there are two files"


async def test_result_text_drops_what_a_retried_call_streamed(recorder: Recorder) -> None:
    bridge = eager(recorder)
    for event in (
        TextDelta("half an ans"),
        NoticeEvent(NoticeKind.RETRY, "retry 1", {"discard_partial": True}),
        TextDelta("the whole answer"),
        NoticeEvent(NoticeKind.RETRY, "slow", {}),
        TextDelta(" and more"),
        stop(),
    ):
        await bridge.feed(event)
    assert recorder.payloads[-1]["result"] == "the whole answer and more"
