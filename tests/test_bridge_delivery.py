"""engine.bridge: when payloads go out: delta coalescing, close, and engine order kept."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from engine.bridge import Payload, WebBridge
from engine.events import (
    EngineEvent,
    NoticeEvent,
    NoticeKind,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from engine.messages import Usage
from tests.bridge_helpers import LONG, FakeClock, Recorder, stop


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


# Coalescing ----------------------------------------------------------------


async def test_first_delta_goes_out_at_once(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(TextDelta("H"))
    assert recorder.blocks() == [("text", "H")]
    await bridge.feed(TextDelta("el"))
    await bridge.feed(TextDelta("lo"))
    assert recorder.blocks() == [("text", "H")]
    await bridge.close()
    assert recorder.blocks() == [("text", "H"), ("text", "ello")]


async def test_flush_at_size(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(TextDelta("first"))
    for _ in range(19):
        await bridge.feed(TextDelta("x" * 10))  # 190 characters held
    assert len(recorder.payloads) == 1
    await bridge.feed(TextDelta("y" * 10))  # 200: flush
    assert recorder.blocks() == [("text", "first"), ("text", "x" * 190 + "y" * 10)]
    await bridge.feed(TextDelta("z"))
    assert len(recorder.payloads) == 2
    await bridge.close()
    assert recorder.blocks()[-1] == ("text", "z")


async def test_size_is_configurable(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, flush_chars=3, clock=FakeClock())
    for piece in "abcdefg":
        await bridge.feed(TextDelta(piece))
    assert recorder.blocks() == [("text", "a"), ("text", "bcd"), ("text", "efg")]
    await bridge.close()


async def test_flush_when_interval_passed_by_the_clock(recorder: Recorder) -> None:
    clock = FakeClock()
    bridge = WebBridge(recorder, "c", flush_interval=0.05, clock=clock)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    clock.now += 0.049
    await bridge.feed(TextDelta("c"))
    assert recorder.blocks() == [("text", "a")]
    clock.now += 0.001
    await bridge.feed(TextDelta("d"))
    assert recorder.blocks() == [("text", "a"), ("text", "bcd")]
    await bridge.close()


async def test_a_slow_send_makes_the_next_flush_larger(recorder: Recorder) -> None:
    """The interval counts from when a flush's send returned, not from when it began.

    Under load the store is slow; counted from the start, every delta that
    arrives after a slow write would be due at once and become a write of
    its own, and more writes make the store slower still.
    """
    clock = FakeClock()

    async def slow_store(payload: Payload) -> None:
        await recorder(payload)
        clock.now += 1.0

    bridge = WebBridge(slow_store, "c", flush_interval=0.5, clock=clock)
    for piece in "abcdefgh":
        await bridge.feed(TextDelta(piece))
        clock.now += 0.125
    await bridge.close()
    assert recorder.blocks() == [("text", "a"), ("text", "bcde"), ("text", "fgh")]


async def test_timer_flushes_without_another_delta(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=0.01)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    await bridge.feed(TextDelta("c"))
    assert recorder.blocks() == [("text", "a")]
    await recorder.wait_for(2)
    assert recorder.blocks() == [("text", "a"), ("text", "bc")]
    await bridge.close()
    assert len(recorder.payloads) == 2


async def test_thinking_coalesces_like_text(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=0.01)
    await bridge.feed(ThinkingDelta("I "))
    await bridge.feed(ThinkingDelta("think "))
    await bridge.feed(ThinkingDelta("so"))
    await recorder.wait_for(2)
    assert recorder.blocks() == [("thinking", "I "), ("thinking", "think so")]
    await bridge.close()


async def test_signature_closes_a_thinking_block(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(ThinkingDelta("a"))
    await bridge.feed(ThinkingDelta("b"))
    await bridge.feed(ThinkingDelta("c", signature="sig"))
    assert recorder.payloads[-1]["message"]["content"][0] == {
        "type": "thinking",
        "thinking": "bc",
        "signature": "sig",
    }
    await bridge.close()


async def test_non_text_event_flushes_held_text_first(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(TextDelta("Let me "))
    await bridge.feed(TextDelta("look."))
    await bridge.feed(ToolCallEvent("t1", "ls", {}))
    await bridge.feed(ToolResultEvent("t1", "ls", "x"))
    await bridge.feed(TextDelta("Found "))  # a new stretch of text: at once again
    await bridge.feed(TextDelta("it."))
    await bridge.feed(NoticeEvent(NoticeKind.RETRY, "again"))
    await bridge.feed(TextDelta("Done"))
    await bridge.feed(stop())
    assert recorder.blocks() == [
        ("text", "Let me "),
        ("text", "look."),
        ("tool_use", "t1"),
        ("tool_result", "t1"),
        ("text", "Found "),
        ("text", "it."),
        ("system", "notice"),
        ("text", "Done"),
        ("result", "success"),
    ]
    await bridge.close()


async def test_switching_between_thinking_and_text_keeps_order(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    for event in (
        ThinkingDelta("t1"),
        ThinkingDelta("t2"),
        TextDelta("x1"),
        TextDelta("x2"),
        ThinkingDelta("t3"),
    ):
        await bridge.feed(event)
    await bridge.close()
    assert recorder.blocks() == [
        ("thinking", "t1"),
        ("thinking", "t2"),
        ("text", "x1"),
        ("text", "x2"),
        ("thinking", "t3"),
    ]


async def test_usage_does_not_flush(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    await bridge.feed(UsageEvent(Usage(output_tokens=1), "p", "m"))
    assert recorder.blocks() == [("text", "a")]
    await bridge.close()
    assert recorder.blocks() == [("text", "a"), ("text", "b")]


async def test_each_turn_starts_with_an_immediate_delta(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG, clock=FakeClock())
    await bridge.feed(TextDelta("one"))
    await bridge.feed(stop())
    await bridge.feed(TextDelta("two"))
    assert recorder.blocks() == [("text", "one"), ("result", "success"), ("text", "two")]
    await bridge.close()


# Close ---------------------------------------------------------------------


async def test_close_flushes_and_stops_the_timer(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=LONG)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    timer = bridge._timer
    assert timer is not None and not timer.done()
    await bridge.close()
    assert recorder.blocks() == [("text", "a"), ("text", "b")]
    assert timer.done()
    assert bridge.closed
    await bridge.close()  # a second close is harmless
    with pytest.raises(RuntimeError, match="closed"):
        await bridge.feed(TextDelta("late"))


async def test_close_racing_a_timer_that_is_sending(recorder: Recorder) -> None:
    gate = asyncio.Event()
    sending = asyncio.Event()

    async def slow_send(data: dict[str, Any]) -> None:
        if len(recorder.payloads) == 1:  # the timer's flush
            sending.set()
            await gate.wait()
        await recorder(data)

    bridge = WebBridge(slow_send, "c", flush_interval=0.005)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    await sending.wait()  # the timer holds "b" in flight
    late = asyncio.create_task(bridge.feed(TextDelta("c")))
    closing = asyncio.create_task(bridge.close())
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(late, closing)
    assert recorder.blocks() == [("text", "a"), ("text", "b"), ("text", "c")]


async def test_close_ahead_of_a_woken_timer(recorder: Recorder) -> None:
    bridge = WebBridge(recorder, "c", flush_interval=0.001)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    timer = bridge._timer
    assert timer is not None
    # Hold the bridge's lock so that close() queues first and the timer, once
    # awake, queues behind it: close must flush, and the timer must not.
    async with bridge._lock:
        closing = asyncio.create_task(bridge.close())
        await asyncio.sleep(0.005)
    await closing
    assert timer.done()
    assert recorder.blocks() == [("text", "a"), ("text", "b")]


async def test_a_failed_timer_flush_is_reported(recorder: Recorder) -> None:
    calls = 0

    async def flaky(data: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ConnectionError("client went away")
        await recorder(data)

    bridge = WebBridge(flaky, "c", flush_interval=0.001)
    await bridge.feed(TextDelta("a"))
    await bridge.feed(TextDelta("b"))
    timer = bridge._timer
    assert timer is not None
    await asyncio.wait({timer})
    with pytest.raises(ConnectionError):
        await bridge.feed(TextDelta("c"))


def test_bad_settings_are_refused(recorder: Recorder) -> None:
    with pytest.raises(ValueError):
        WebBridge(recorder, "c", flush_chars=0)
    with pytest.raises(ValueError):
        WebBridge(recorder, "c", flush_interval=-1)


# Ordering under interleaving ----------------------------------------------


def _random_events(rng: random.Random) -> list[EngineEvent]:
    events: list[EngineEvent] = []
    for n in range(rng.randint(20, 80)):
        roll = rng.random()
        if roll < 0.55:
            events.append(TextDelta("".join(rng.choices("abc ", k=rng.randint(0, 60)))))
        elif roll < 0.75:
            events.append(ThinkingDelta(rng.choice("xyz") * rng.randint(1, 30)))
        elif roll < 0.82:
            events.append(ToolCallEvent(f"t{n}", "tool", {"n": n}))
        elif roll < 0.89:
            events.append(ToolResultEvent(f"t{n}", "tool", str(n)))
        elif roll < 0.95:
            events.append(NoticeEvent(NoticeKind.RETRY, f"notice {n}"))
        else:
            events.append(UsageEvent(Usage(output_tokens=1), "p", "m"))
    events.append(stop())
    return events


def _expected(events: list[EngineEvent]) -> list[tuple[str, Any]]:
    """What the client must see: runs of same-kind deltas merged, usage dropped."""
    out: list[tuple[str, Any]] = []
    for event in events:
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + event.text)
            elif event.text:
                out.append((kind, event.text))
        elif isinstance(event, ToolCallEvent):
            out.append(("tool_use", event.id))
        elif isinstance(event, ToolResultEvent):
            out.append(("tool_result", event.id))
        elif isinstance(event, NoticeEvent):
            out.append(("system", "notice"))
        elif isinstance(event, StopEvent):
            out.append(("result", "success"))
    return out


def _merged(blocks: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for kind, value in blocks:
        if kind in ("text", "thinking") and out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + value)
        else:
            out.append((kind, value))
    return out


@pytest.mark.parametrize("seed", range(12))
async def test_order_is_engine_order_under_interleaving(recorder: Recorder, seed: int) -> None:
    rng = random.Random(seed)
    events = _random_events(rng)
    bridge = WebBridge(recorder, "c", flush_interval=0.001, flush_chars=rng.choice([5, 50, 200]))
    for event in events:
        await bridge.feed(event)
        if rng.random() < 0.3:
            # Give the timer a chance to fire between deltas.
            await asyncio.sleep(rng.choice([0, 0.0005, 0.0015]))
    await bridge.close()
    assert _merged(recorder.blocks()) == _expected(events)
    held = [v for k, v in recorder.blocks() if k in ("text", "thinking")]
    assert all(held), "no empty delta payloads"
