"""A built-in offline model: the system runs with no key and no network.

By default it writes deterministic, persona-aware replies at a configurable
latency and token rate. In tests it is scripted: a queue of :class:`Reply`
and :class:`Fail` steps, or a function of the request, covers text,
thinking, tool calls and failures of any class.

Options ride on the model string, so they survive a trip through settings
and process boundaries: ``offline:default?ttft=0.2&tps=100&tokens=60``. A
string without ``tps`` streams at the provider's ``default_tps``
(``YEAFT_OFFLINE_TPS``: 40 under ``yeaft serve``, so parallel replies are
visibly parallel; 0, no pauses, for engines built in code). What the
unscripted model says is in :mod:`engine.providers.offline_voice`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from engine.errors import ErrorKind, ModelError
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Usage, estimate_tokens, message_tokens
from engine.providers.base import ModelRequest, ModelStop, StopItem, StreamItem, UsageItem
from engine.providers.offline_team import TEAM_PURPOSES, team_answer
from engine.providers.offline_voice import dream_summary, persona_reply, wants_chinese

__all__ = ["Fail", "OfflineOptions", "OfflineProvider", "Reply", "default_reply", "persona_reply"]


@dataclass(slots=True)
class Reply:
    """One scripted model response."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # None: TOOL_USE when the reply calls tools, else END_TURN.
    stop: ModelStop | None = None
    # Seconds to wait before the first token (overrides the model's ttft).
    delay: float | None = None
    # Stream this many tokens of ``text``, then fall silent until cancelled:
    # a hung (0) or stalled model, for the engine's deadlines.
    hang_after: int | None = None


@dataclass(slots=True)
class Fail:
    """A scripted failure, raised as a :class:`ModelError`.

    ``after_text`` streams that text first, to exercise failures mid-stream;
    ``after_tool_call`` emits a tool call first (the engine must not retry).
    """

    kind: ErrorKind
    message: str = "scripted failure"
    status: int | None = None
    retry_after: float | None = None
    after_text: str = ""
    after_tool_call: bool = False


Step = Reply | Fail | str
ScriptFn = Callable[[ModelRequest], Step]


@dataclass(frozen=True, slots=True)
class OfflineOptions:
    variant: str = "default"
    ttft: float = 0.0
    tps: float = 0.0  # tokens per second; 0 streams without pauses
    tokens: int | None = None  # fixed reply length in tokens (benchmarks)

    @classmethod
    def parse(cls, model: str, default_tps: float = 0.0) -> OfflineOptions:
        """The options of ``model``; ``default_tps`` applies when it names no ``tps``."""
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


_REMEMBER = re.compile(r"\bremember(?:\s+that)?\s+(.+)", re.IGNORECASE | re.DOTALL)


def default_reply(request: ModelRequest) -> Reply:
    """What the unscripted offline model does: enough to demonstrate the system.

    It answers in the persona's voice, saves a fact when asked to "remember
    that ...", mentions what it recalled, and in dream mode writes one
    summary memory. A team mode call (``options["purpose"]``) gets the JSON
    of :mod:`engine.providers.offline_team`. Anything cleverer needs a real model.
    """
    last = request.messages[-1] if request.messages else None
    purpose = _team_purpose(request)
    if purpose is not None:
        prompt = last.content if last is not None and isinstance(last.content, str) else ""
        answer = team_answer(purpose, request.system, prompt)
        if answer is not None:
            return Reply(answer)
    tools = {t.name for t in request.tools}
    if last is not None and last.role == "tool":
        if last.tool_name == "remember":
            if request.options.get("mode") == "dream":
                return Reply("[[SKIP]]")
            zh = wants_chinese(request, str(last.content))
            return Reply("记下了，我会记住。" if zh else "Noted. I will keep that in mind.")
        return Reply(f"Done ({last.tool_name or 'tool'}).")
    if last is not None and "remember" in tools:
        if request.options.get("mode") == "dream":
            return Reply(
                tool_calls=[
                    (
                        "remember",
                        {
                            "text": dream_summary(last.content),
                            "scope": "private",
                            "tags": ["summary"],
                        },
                    )
                ]
            )
        match = _REMEMBER.search(last.content)
        if match:
            fact = match.group(1).strip().rstrip(".!")
            return Reply(tool_calls=[("remember", {"text": fact, "scope": "user"})])
    return Reply(persona_reply(request))


def _tokens(text: str) -> list[str]:
    """Split text into word-sized tokens that join back to the same text."""
    out: list[str] = []
    for i, word in enumerate(text.split(" ")):
        out.append(word if i == 0 else " " + word)
    return [t for t in out if t]


def _fixed_length(text: str, n: int) -> str:
    words = text.split()
    filler = itertools.cycle(words or ["ok"])
    while len(words) < n:
        words.append(next(filler))
    return " ".join(words[:n])


class OfflineProvider:
    """The offline model. Deterministic, scriptable, and free."""

    def __init__(
        self,
        script: Iterable[Step] | ScriptFn | None = None,
        *,
        name: str = "offline",
        strict: bool = False,
        default_tps: float = 0.0,
    ) -> None:
        self.name = name
        # The pace of a model string without ``tps`` (EngineConfig.offline_tps).
        self.default_tps = default_tps
        self._fn: ScriptFn | None = script if callable(script) else None
        self._queue: deque[Step] = deque() if callable(script) else deque(script or [])
        # When strict, an exhausted script is an error instead of a persona reply.
        self._strict = strict
        self.requests: list[ModelRequest] = []

    def push(self, *steps: Step) -> None:
        self._queue.extend(steps)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _next_step(self, request: ModelRequest) -> Step:
        if self._queue:
            return self._queue.popleft()
        if self._fn is not None:
            return self._fn(request)
        if self._strict:
            raise ModelError(ErrorKind.UNKNOWN, "offline script exhausted")
        return default_reply(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        opts = OfflineOptions.parse(request.model, self.default_tps)
        self.requests.append(request)
        step = self._next_step(request)
        if isinstance(step, str):
            step = Reply(step)
        delay = step.delay if isinstance(step, Reply) and step.delay is not None else opts.ttft
        if delay > 0:
            await asyncio.sleep(delay)
        if isinstance(step, Fail):
            if step.after_text:
                yield TextDelta(step.after_text)
            if step.after_tool_call:
                yield ToolCallEvent("call_failed", "rethink", {"reason": "scripted"})
            raise ModelError(
                step.kind,
                step.message,
                status=step.status,
                retry_after=step.retry_after,
                provider=self.name,
                model=request.model,
            )
        if step.hang_after is not None:
            for tok in _tokens(step.text)[: step.hang_after]:
                yield TextDelta(tok)
            await asyncio.Event().wait()  # nothing will set it: only a cancel ends this
        text = step.text
        # A team call's answer is JSON a program reads, not a reply anyone
        # watches: a fixed length would break it and a visible pace only
        # delays the task.
        team_call = _team_purpose(request) is not None
        if opts.tokens is not None and not step.tool_calls and not team_call:
            text = _fixed_length(text, opts.tokens)
        if step.thinking:
            yield ThinkingDelta(step.thinking)
        out_tokens = 0
        interval = 1.0 / opts.tps if opts.tps > 0 and not team_call else 0.0
        for i, tok in enumerate(_tokens(text)):
            if interval and i:
                await asyncio.sleep(interval)
            out_tokens += 1
            yield TextDelta(tok)
        for i, (tool, args) in enumerate(step.tool_calls):
            call_id = f"call_{len(self.requests)}_{i}"
            yield ToolCallEvent(call_id, tool, args)
            out_tokens += estimate_tokens(str(args)) + 2
        yield UsageItem(Usage(input_tokens=_prompt_tokens(request), output_tokens=out_tokens))
        stop = step.stop or (ModelStop.TOOL_USE if step.tool_calls else ModelStop.END_TURN)
        yield StopItem(stop)

    async def aclose(self) -> None:
        return None


def _prompt_tokens(request: ModelRequest) -> int:
    return estimate_tokens(request.system) + sum(message_tokens(m) for m in request.messages)


def _team_purpose(request: ModelRequest) -> str | None:
    """The purpose of a team mode call (``options["purpose"]``), None for any other request."""
    purpose = request.options.get("purpose")
    return purpose if isinstance(purpose, str) and purpose in TEAM_PURPOSES else None
