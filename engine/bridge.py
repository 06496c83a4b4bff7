"""Engine events to stream-json ``data`` payloads, with delta coalescing.

The engine emits one event per model token batch; sending each one to every
watching client would cost a frame, an event-log append and a fan-out per
few characters. ``WebBridge`` therefore coalesces text and thinking deltas:
the first delta of a stretch goes out at once (so time to first token is not
delayed), later ones are held until ``flush_chars`` characters are waiting or
``flush_interval`` seconds have passed since the last flush was taken (its
send returned: under load a flush waits for the store, and the deltas that
arrive meanwhile join the next one instead of each becoming a write). Any
other event flushes what is held first, so the client sees events in engine
order.

The mapping itself is a set of pure functions (``text_payload``,
``result_payload``...) so that other producers of ``data`` payloads can
share it without the buffering.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Literal

from engine.events import (
    EngineEvent,
    NoticeEvent,
    NoticeKind,
    StopEvent,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    ToolOutputEvent,
    ToolResultEvent,
    UsageEvent,
)
from engine.messages import Usage
from protocol.data import (
    AssistantData,
    AssistantMessage,
    ResultData,
    ResultSubtype,
    ResultUsage,
    SystemData,
    SystemSubtype,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserData,
    UserMessage,
)

Payload = AssistantData | UserData | ResultData | SystemData
"""One ``data`` payload, as its protocol model."""

Send = Callable[[Payload], Awaitable[None]]
"""Delivers one ``data`` payload (the caller wraps it in an envelope)."""

Clock = Callable[[], float]

DEFAULT_FLUSH_INTERVAL = 0.05
DEFAULT_FLUSH_CHARS = 200

RESULT_SUBTYPES: dict[StopReason, ResultSubtype] = {
    StopReason.END_TURN: "success",
    StopReason.TOOL_HANDOFF: "success",
    StopReason.FINISH: "success",
    # The engine only stops on max_tokens once its continuations are spent;
    # what was written is still a usable answer.
    StopReason.MAX_TOKENS: "success",
    # A turn should not stop waiting for tools, but if one does nothing failed.
    StopReason.TOOL_USE: "success",
    StopReason.ERROR_MAX_TURNS: "error_max_turns",
    StopReason.ERROR: "error_during_execution",
    StopReason.ABORTED: "error_during_execution",
}
"""The ``result`` subtype of every stop reason; a test checks none is missing."""

_NOTICE_SUBTYPES: dict[NoticeKind, SystemSubtype] = {
    NoticeKind.INIT: "init",
    NoticeKind.COMPACT: "compact",
    NoticeKind.ERROR: "error",
}

DeltaKind = Literal["text", "thinking"]


def text_payload(text: str) -> AssistantData:
    """An ``assistant`` payload holding one text block."""
    return AssistantData(message=AssistantMessage(content=[TextBlock(text=text)]))


def thinking_payload(text: str, signature: str | None = None) -> AssistantData:
    """An ``assistant`` payload holding one thinking block."""
    block = ThinkingBlock(thinking=text, signature=signature)
    return AssistantData(message=AssistantMessage(content=[block]))


def tool_use_payload(event: ToolCallEvent) -> AssistantData:
    """An ``assistant`` payload holding the ``tool_use`` block of a tool call."""
    block = ToolUseBlock(id=event.id, name=event.name, input=event.arguments)
    return AssistantData(message=AssistantMessage(content=[block]))


def tool_result_payload(event: ToolResultEvent) -> UserData:
    """A ``user`` payload echoing a tool's result under the call it answers."""
    block = ToolResultBlock(tool_use_id=event.id, content=event.content, is_error=event.is_error)
    return UserData(message=UserMessage(content=[block]))


def tool_output_payload(event: ToolOutputEvent) -> SystemData:
    """A ``system`` ``tool_output`` payload: part of a running tool's output, under its call."""
    detail = {"tool_use_id": event.id, "name": event.name}
    return SystemData(subtype="tool_output", message=event.text, detail=detail)


def notice_payload(event: NoticeEvent) -> SystemData:
    """A ``system`` payload; compactions and errors get their own subtype."""
    subtype = _NOTICE_SUBTYPES.get(event.kind, "notice")
    detail = {**event.detail, "kind": event.kind.value}
    if event.kind is NoticeKind.INIT:
        # Claude's init line carries these at the top level, and no message.
        return SystemData(
            subtype=subtype,
            detail=detail,
            model=event.detail.get("model"),
            tools=event.detail.get("tools"),
            session_id=event.detail.get("session_id"),
        )
    return SystemData(subtype=subtype, message=event.message, detail=detail)


def result_payload(
    event: StopEvent,
    *,
    session_id: str,
    usage: Usage | None = None,
    text: str | None = None,
    model: str | None = None,
) -> ResultData:
    """The ``result`` payload that closes a turn.

    ``usage`` overrides the stop event's own when given; ``text`` becomes
    ``result`` (the final assistant text, as Claude reports it).
    """
    subtype = RESULT_SUBTYPES.get(event.reason, "error_during_execution")
    used = usage if usage is not None else event.usage
    return ResultData(
        subtype=subtype,
        session_id=session_id,
        is_error=subtype != "success",
        duration_ms=max(0, event.duration_ms),
        total_cost_usd=event.cost_usd if math.isfinite(event.cost_usd) else 0.0,
        usage=ResultUsage(
            input_tokens=used.input_tokens,
            output_tokens=used.output_tokens,
            cache_read_input_tokens=used.cache_read_tokens,
            cache_creation_input_tokens=used.cache_write_tokens,
        ),
        stop_reason=event.reason.value,
        error=event.error,
        error_kind=event.error_kind,
        result=text,
        model=event.model or model,
        attempts=list(event.attempts) or None,
    )


class WebBridge:
    """Translates one conversation's engine events and sends them, coalescing deltas.

    ``send`` receives each ``data`` payload in engine order. ``session_id`` is
    the conversation id reported in ``result`` payloads. One bridge serves
    any number of consecutive turns; turn state resets after each stop.
    ``clock`` is only read to decide whether a flush is due (a test may pass
    a frozen one); the timer itself sleeps on the event loop.
    """

    def __init__(
        self,
        send: Send,
        session_id: str,
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        flush_chars: int = DEFAULT_FLUSH_CHARS,
        clock: Clock = time.monotonic,
    ) -> None:
        if flush_interval < 0 or flush_chars < 1:
            raise ValueError("flush_interval must be >= 0 and flush_chars >= 1")
        self._send = send
        self.session_id = session_id
        self.flush_interval = flush_interval
        self.flush_chars = flush_chars
        self._clock = clock
        # One lock orders every send: feed() and the timer both flush, and
        # whoever holds the lock sends, so nothing can overtake held text.
        self._lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._closed = False
        self._kind: DeltaKind | None = None
        self._held: list[str] = []
        self._held_chars = 0
        self._signature: str | None = None
        self._last_flush = -math.inf
        # Turn state, reset after every stop.
        self._usage = Usage()
        self._model: str | None = None
        self._final_text: list[str] = []

    @property
    def closed(self) -> bool:
        """Whether ``close`` has been called; a closed bridge refuses events."""
        return self._closed

    @property
    def usage(self) -> Usage:
        """Usage summed over the current turn's model calls so far."""
        return self._usage

    async def feed(self, event: EngineEvent) -> None:
        """Translate one engine event and send it, or hold it if it is a delta."""
        async with self._lock:
            self._check_open()
            if isinstance(event, TextDelta):
                await self._hold("text", event.text, None)
            elif isinstance(event, ThinkingDelta):
                await self._hold("thinking", event.text, event.signature)
            elif isinstance(event, UsageEvent):
                # Usage is reported once, in the result; holding it back changes
                # no order the client can see, so held text need not flush.
                self._usage = self._usage + event.usage
                self._model = event.model
            else:
                await self._flush()
                await self._send_event(event)

    async def close(self) -> None:
        """Send everything still held and stop the timer. Safe to call twice."""
        timer: asyncio.Task[None] | None = None
        try:
            async with self._lock:
                if self._closed:
                    return
                self._closed = True
                timer, self._timer = self._timer, None
                # Cancelling under the lock is safe: the timer only sends while
                # holding it, so it is asleep or queued and cannot lose text.
                if timer is not None:
                    timer.cancel()
                await self._flush()
        finally:
            if timer is not None:
                await asyncio.wait({timer})
        self._raise_failure()

    async def _send_event(self, event: EngineEvent) -> None:
        # Any event that is not a delta ends a stretch of text: the next delta
        # starts a new message for the reader and goes out at once.
        self._last_flush = -math.inf
        if isinstance(event, ToolCallEvent):
            self._final_text = []
            await self._send(tool_use_payload(event))
        elif isinstance(event, ToolResultEvent):
            self._final_text = []
            await self._send(tool_result_payload(event))
        elif isinstance(event, ToolOutputEvent):
            await self._send(tool_output_payload(event))
        elif isinstance(event, NoticeEvent):
            if event.detail.get("discard_partial"):
                # The model call is retried or falls back: what it streamed so
                # far is dropped by clients, so the turn's text starts over.
                self._final_text = []
            await self._send(notice_payload(event))
        elif isinstance(event, StopEvent):
            payload = result_payload(
                event,
                session_id=self.session_id,
                usage=event.usage if _any_tokens(event.usage) else self._usage,
                text="".join(self._final_text) or None,
                model=self._model,
            )
            self._reset_turn()
            await self._send(payload)
        else:  # pragma: no cover - the union is exhausted above
            raise TypeError(f"unknown engine event {event!r}")

    async def _hold(self, kind: DeltaKind, text: str, signature: str | None) -> None:
        """Add a delta to the held buffer and flush if a flush is due."""
        if self._kind is not None and self._kind != kind:
            await self._flush()
            self._last_flush = -math.inf
        self._kind = kind
        if text:
            self._held.append(text)
            self._held_chars += len(text)
        if kind == "text":
            self._final_text.append(text)
        if signature is not None:
            self._signature = signature
        due = (
            self._held_chars >= self.flush_chars
            or self._clock() - self._last_flush >= self.flush_interval
            # A signature closes a thinking block; nothing follows to join it.
            or signature is not None
        )
        if due:
            await self._flush()
        elif self._timer is None:
            self._timer = asyncio.create_task(self._run_timer())

    async def _flush(self) -> None:
        """Send the held deltas as one payload. The caller holds the lock."""
        kind, self._kind = self._kind, None
        if kind is None or (not self._held and self._signature is None):
            self._held, self._held_chars, self._signature = [], 0, None
            return
        text = "".join(self._held)
        signature = self._signature
        self._held, self._held_chars, self._signature = [], 0, None
        try:
            if kind == "text":
                await self._send(text_payload(text))
            else:
                await self._send(thinking_payload(text, signature))
        finally:
            # Counted from when the send returned, not from when it began: a
            # slow store (a busy machine) must mean fewer, larger writes, not
            # one write per delta that arrives while the last one is queued.
            self._last_flush = self._clock()

    async def _run_timer(self) -> None:
        """Flush held deltas once ``flush_interval`` has passed since the last flush."""
        try:
            while True:
                async with self._lock:
                    if self._kind is None:
                        self._timer = None
                        return
                    wait = self._last_flush + self.flush_interval - self._clock()
                    if wait <= 0:
                        self._timer = None
                        await self._flush()
                        return
                await asyncio.sleep(wait)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Nobody awaits the timer; keep the failure for the next feed/close.
            self._failure = exc

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the bridge is closed")
        self._raise_failure()

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _reset_turn(self) -> None:
        self._usage = Usage()
        self._model = None
        self._final_text = []
        self._last_flush = -math.inf


def _any_tokens(usage: Usage) -> bool:
    return bool(
        usage.input_tokens
        or usage.output_tokens
        or usage.cache_read_tokens
        or usage.cache_write_tokens
    )
