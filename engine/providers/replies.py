"""A canned model response and how it streams: the common ground of the stand-in models.

The offline demo voice (:mod:`engine.providers.offline`) and the tests'
scripted model (:mod:`engine.providers.scripted`) both decide a whole
:class:`Reply` first and then stream it as a real provider would: thinking,
then text a word at a time at the model string's pace, then tool calls,
usage and the stop. The pace rides on the model string, so it survives a
trip through settings and process boundaries:
``offline:default?ttft=0.2&tps=100&tokens=60``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl

from engine.call_context import CallMode
from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Usage, estimate_tokens, message_tokens
from engine.providers.base import ModelRequest, ModelStop, StopItem, StreamItem, UsageItem

__all__ = ["Pace", "Reply", "fixed_length", "stream_reply"]


@dataclass(slots=True)
class Reply:
    """One whole model response, streamed by :func:`stream_reply`."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # None: TOOL_USE when the reply calls tools, else END_TURN.
    stop: ModelStop | None = None
    # Seconds to wait before the first token (overrides the model string's ttft).
    delay: float | None = None
    # Stream this many tokens of ``text``, then fall silent until cancelled:
    # a hung (0) or stalled model, for the engine's deadlines.
    hang_after: int | None = None


@dataclass(frozen=True, slots=True)
class Pace:
    """The timing a model string asks for: ``name?ttft=..&tps=..&tokens=..``."""

    variant: str = "default"
    ttft: float = 0.0
    tps: float = 0.0  # tokens per second; 0 streams without pauses
    tokens: int | None = None  # fixed reply length in tokens (benchmarks)

    @classmethod
    def parse(cls, model: str, default_tps: float = 0.0) -> Pace:
        """The pace of ``model``; ``default_tps`` applies when it names no ``tps``."""
        variant, _, query = model.partition("?")
        opts = dict(parse_qsl(query))
        try:
            return cls(
                variant=variant or "default",
                ttft=float(opts.get("ttft", 0.0)),
                tps=float(opts.get("tps", default_tps)),
                tokens=int(opts["tokens"]) if "tokens" in opts else None,
            )
        except ValueError as exc:
            raise ModelError(
                ErrorKind.FORMAT, f"bad offline model options {query!r}: {exc}"
            ) from exc

    def for_request(self, request: ModelRequest) -> Pace:
        """This pace as it applies to ``request``.

        A team mode call's answer is JSON a program reads, not a reply anyone
        watches: a fixed length would break it and a visible pace only delays
        the task, so such a call keeps only the wait for its first token.
        """
        if request.context.mode is CallMode.TASK:
            return replace(self, tps=0.0, tokens=None)
        return self


def tokens_of(text: str) -> list[str]:
    """Split text into word-sized tokens that join back to the same text."""
    out: list[str] = []
    for i, word in enumerate(text.split(" ")):
        out.append(word if i == 0 else " " + word)
    return [t for t in out if t]


def fixed_length(text: str, n: int) -> str:
    """``text`` cut or padded (by repeating its own words) to ``n`` words."""
    words = text.split()
    filler = itertools.cycle(words or ["ok"])
    while len(words) < n:
        words.append(next(filler))
    return " ".join(words[:n])


def prompt_tokens(request: ModelRequest) -> int:
    """An estimate of the request's input tokens, for the usage item."""
    return estimate_tokens(request.system) + sum(message_tokens(m) for m in request.messages)


async def stream_reply(
    reply: Reply, request: ModelRequest, pace: Pace, call_no: int
) -> AsyncIterator[StreamItem]:
    """Stream ``reply`` to ``request`` at ``pace``; ``call_no`` numbers its tool call ids."""
    delay = reply.delay if reply.delay is not None else pace.ttft
    if delay > 0:
        await asyncio.sleep(delay)
    if reply.hang_after is not None:
        for tok in tokens_of(reply.text)[: reply.hang_after]:
            yield TextDelta(tok)
        await asyncio.Event().wait()  # nothing will set it: only a cancel ends this
    if reply.thinking:
        yield ThinkingDelta(reply.thinking)
    out_tokens = 0
    interval = 1.0 / pace.tps if pace.tps > 0 else 0.0
    for i, tok in enumerate(tokens_of(reply.text)):
        if interval and i:
            await asyncio.sleep(interval)
        out_tokens += 1
        yield TextDelta(tok)
    for i, (tool, args) in enumerate(reply.tool_calls):
        yield ToolCallEvent(f"call_{call_no}_{i}", tool, args)
        out_tokens += estimate_tokens(str(args)) + 2
    yield UsageItem(Usage(input_tokens=prompt_tokens(request), output_tokens=out_tokens))
    stop = reply.stop or (ModelStop.TOOL_USE if reply.tool_calls else ModelStop.END_TURN)
    yield StopItem(stop)
