"""The query loop: one turn of one agent, from input to a single stop event.

A turn streams a model call, runs the tools it asked for, appends their
results and calls the model again, until the model ends its turn. Around that
loop sit the rules that make it safe to run unattended: ``max_tokens``
continuation, a tool-iteration budget with a final no-tools answer, retries
and a fallback chain (``engine.caller``), the prompt kept inside the model's
window (``engine.context_window``), transcript repair before every request,
and abort at any await point.

Each step returns what happens next (``None``: another model call; a
:class:`_Stop`: the turn ends), so the loop itself stays a few lines long.
:class:`engine.engine.Engine` configures a turn and starts it with
:meth:`TurnLoop.drive`; the loop reads what it needs of the engine through
:class:`TurnEngine`, so this module does not import the engine back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.call_context import CallContext
from engine.caller import CallResult, CallSpec, ContentRefused, Emit, ModelCaller
from engine.context_window import ContextWindow
from engine.errors import AllModelsFailed, ErrorKind, ModelError, SinkFailed
from engine.events import (
    EngineEvent,
    NoticeEvent,
    NoticeKind,
    StopEvent,
    StopReason,
    ToolOutputEvent,
    ToolResultEvent,
    UsageEvent,
)
from engine.history import repair, truncate_tool_result
from engine.messages import (
    Conversation,
    Message,
    ToolCall,
    Usage,
    estimate_tokens,
    message_tokens,
)
from engine.pricing import PriceTable
from engine.providers.base import ModelStop
from engine.settings import EngineConfig
from engine.steer import SteerSource
from engine.tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

CONTINUE_PROMPT = "Continue exactly where you stopped; do not repeat what you already wrote."


class TurnEngine(Protocol):
    """What a turn reads of the engine that runs it (:class:`engine.engine.Engine`)."""

    settings: EngineConfig
    tools: ToolRegistry
    prices: PriceTable

    def window_for(self, model: str | None = None) -> int:
        """The context window, in tokens, of ``model``."""

    def tool_result_max_chars_for(self, model: str | None = None) -> int:
        """The longest tool result of ``model``'s turns kept in the transcript."""

    def final_prompt(self, language: object = None) -> str:
        """The last, tool-less call's instruction, in the turn's language."""


@dataclass(slots=True)
class TurnResult:
    """How a turn ended. ``text`` is everything the model said in it."""

    reason: StopReason
    text: str
    usage: Usage
    cost_usd: float
    duration_ms: int
    model: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    end_turn: dict[str, Any] | None = None


@dataclass(slots=True)
class _Stop:
    """A step's verdict that the turn ends, and why."""

    reason: StopReason
    error: ModelError | None = None


class TurnLoop:
    """One running turn: its state, its steps and its end."""

    def __init__(
        self,
        engine: TurnEngine,
        conv: Conversation,
        system: str,
        emit: Emit,
        ctx: ToolContext,
        allowed: set[str] | frozenset[str] | None,
        context: CallContext,
        caller: ModelCaller,
    ) -> None:
        self.e = engine
        self.conv = conv
        self.system = system
        self._sink = emit
        self.ctx = ctx
        self.allowed = allowed
        self.context = context
        self.caller = caller
        self.started = time.monotonic()
        self.usage = Usage()
        self.cost = 0.0
        self.model: str | None = None
        self.texts: list[str] = []
        self.partial: list[str] = []
        self.attempts: list[dict[str, Any]] = []
        self.continuations = 0
        self.tool_iterations = 0
        # The turn's prompt kept inside the model's window (compaction, shortening).
        self.window = ContextWindow(
            engine.settings,
            caller.chain[0],
            engine.window_for,
            conv,
            self.prompt_tokens,
            self.emit,
            self.summarize,
        )
        # Set when the turn's abort came; the turn then stops at its next checkpoint.
        self.abort_requested = False
        # Set once, when the turn's end is decided; its stop event follows.
        self.result: TurnResult | None = None
        self.steer: SteerSource | None = None
        # Messages every call of the turn sends after the system prompt and
        # before the transcript (activated skills); never kept in the transcript.
        self.preamble: list[Message] = []
        # Whether the turn opens with an ``init`` notice (group turns do).
        self.announcing = False

    async def drive(self, abort: asyncio.Event | None) -> TurnResult:
        """Run the turn to its one stop event; setting ``abort`` interrupts it.

        Cancelling the task that awaits this interrupts the turn the same
        way and then propagates.
        """
        task = asyncio.ensure_future(self.run())
        waiter = asyncio.ensure_future(abort.wait()) if abort is not None else None
        try:
            await asyncio.wait({t for t in (task, waiter) if t}, return_when="FIRST_COMPLETED")
        except asyncio.CancelledError:
            await self._interrupt(task)
            raise
        finally:
            if waiter is not None:
                waiter.cancel()
        if not task.done():
            return await self._interrupt(task)
        return task.result()

    async def _interrupt(self, task: asyncio.Future[TurnResult]) -> TurnResult:
        """Stop a turn whose abort came: it ends aborted, unless it reached its own end first.

        A turn that is already in :meth:`finish` is left to send its stop
        event: the abort came too late, and cancelling it there would cut that
        event short. A cancel is a request the awaited code may swallow
        (``asyncio.wait_for`` before Python 3.12 returns a result that arrives
        with the cancel, and redis-py sends every command through it), so the
        turn is also told to stop at its next step or event; one that ends on
        its own all the same keeps its own result. Either way exactly one stop
        event is emitted.
        """
        self.abort_requested = True
        if self.result is None:
            task.cancel()
        await asyncio.wait({task})
        if task.cancelled():
            return await self.finish_aborted()
        return task.result()

    # -- the loop ---------------------------------------------------------
    async def run(self) -> TurnResult:
        try:
            if self.announcing:
                await self.announce()
            while True:
                self.checkpoint()
                stop = await self.step()
                if stop is not None:
                    return await self.finish(stop)
        except ModelError as err:
            return await self.finish(_Stop(StopReason.ERROR, err))
        except SinkFailed:
            raise  # nothing more can be reported through the sink: the caller ends the turn
        except Exception as exc:
            log.exception("turn of %s failed", self.conv.id)
            unknown = ModelError(ErrorKind.UNKNOWN, repr(exc))
            return await self.finish(_Stop(StopReason.ERROR, unknown))

    def checkpoint(self) -> None:
        """Stop here if the turn was aborted and the cancel did not reach it."""
        if self.abort_requested and self.result is None:
            raise asyncio.CancelledError

    async def emit(self, event: EngineEvent) -> None:
        """Hand one event to the caller; an abort that came meanwhile stops the turn here."""
        try:
            await self._sink(event)
        except Exception as exc:
            raise SinkFailed(f"{type(exc).__name__}: {exc}") from exc
        self.checkpoint()

    async def steered(self, closing: bool = False) -> bool:
        """Append the messages that joined the turn since the last call; True if any did."""
        joined = self.steer.take(closing) if self.steer is not None else []
        if not joined:
            return False
        self.conv.messages.extend(joined)
        message = f"{len(joined)} new messages joined the turn"
        await self.emit(NoticeEvent(NoticeKind.STEER, message, {"count": len(joined)}))
        return True

    async def announce(self) -> None:
        """The turn's ``init``: the model it calls, the tools it may use, its session."""
        tools = [spec.name for spec in self.e.tools.specs(self.ctx, self.allowed)]
        model = self.caller.chain[0]
        detail = {"model": model, "tools": tools, "session_id": self.conv.id}
        await self.emit(NoticeEvent(NoticeKind.INIT, f"turn started on {model}", detail))

    async def step(self) -> _Stop | None:
        await self.steered()
        await self.prepare_history()
        final = self.tool_iterations >= self.e.settings.max_tool_iterations
        await self.window.make_room()
        try:
            result = await self.call_model(final)
        except ModelError as err:
            if err.kind is ErrorKind.CONTEXT_OVERFLOW:
                await self.window.overflowed(err)
                return None
            raise
        if final:
            result.tool_calls = []
            await self.record(result)
            if await self.steered(closing=True):
                return None
            if not result.text.strip():
                return _Stop(StopReason.ERROR_MAX_TURNS, self.out_of_turns())
            return _Stop(StopReason.END_TURN)
        await self.record(result)
        if result.tool_calls:
            return await self.run_tools(result)
        if result.stop is ModelStop.MAX_TOKENS:
            return await self.continue_after_max_tokens()
        # Messages that came while the model answered get an answer in this turn.
        return None if await self.steered(closing=True) else _Stop(StopReason.END_TURN)

    async def call_model(self, final: bool) -> CallResult:
        system = self.system
        if self.conv.summary:
            system += f"\n\n# Summary of the earlier conversation\n{self.conv.summary}"
        if final:
            system += f"\n\n{self.e.final_prompt(self.context.language)}"
            await self.emit(
                NoticeEvent(
                    NoticeKind.BUDGET,
                    "tool budget spent; answering without tools",
                    {"tool_iterations": self.tool_iterations},
                )
            )
        tools = [] if final else self.e.tools.specs(self.ctx, self.allowed)
        messages = [*self.preamble, *self.conv.messages]
        spec = CallSpec(system, messages, tools, self.e.settings.max_output_tokens, self.context)
        self.partial = []
        try:
            return await self.caller.call(
                spec, self.emit, self.partial.append, on_discard=self.partial.clear
            )
        except AllModelsFailed as err:
            self.attempts = [a.as_dict() for a in err.attempts]
            raise
        except ContentRefused as err:
            # The turn ends on this error; the call is still counted, and
            # what it streamed stays the turn's text, as people saw it. It is
            # kept out of the transcript: Anthropic's guidance is that a model
            # shown its refused reply goes on refusing.
            await self.account(err.result)
            raise

    async def record(self, result: CallResult) -> None:
        """Account for a finished call and append the assistant message."""
        await self.account(result)
        self.conv.messages.append(
            Message.assistant(
                result.text,
                thinking=result.thinking,
                tool_calls=result.tool_calls,
                # The plain value: meta is persisted as JSON and read back as text.
                meta={"model": result.model, "stop": result.stop.value},
            )
        )

    async def account(self, result: CallResult) -> None:
        """Count a finished call's usage and cost, and keep its text as the turn's."""
        self.partial = []
        self.model = result.model
        self.attempts = [a.as_dict() for a in result.attempts]
        self.usage = self.usage + result.usage
        self.cost += self.e.prices.cost(result.model, result.usage)
        vendor, _, name = result.model.partition(":")
        await self.emit(UsageEvent(result.usage, vendor, name))
        if result.text:
            self.texts.append(result.text)

    async def tool_output(self, call: ToolCall, text: str) -> None:
        """Part of a running call's output, for the people watching."""
        await self.emit(ToolOutputEvent(call.id, call.name, text))

    async def run_tools(self, result: CallResult) -> _Stop | None:
        if self.ctx.on_output is None:
            self.ctx.on_output = self.tool_output
        for call in result.tool_calls:
            outcome = await self.e.tools.execute(call, self.ctx, self.allowed)
            content = truncate_tool_result(
                outcome.content, self.e.tool_result_max_chars_for(self.caller.chain[0])
            )
            self.conv.messages.append(
                Message.tool_result(
                    call.id,
                    content,
                    name=call.name,
                    is_error=outcome.is_error,
                    images=outcome.images,
                )
            )
            await self.emit(ToolResultEvent(call.id, call.name, content, outcome.is_error))
        self.tool_iterations += 1
        if self.ctx.end_turn is not None:
            kind = self.ctx.end_turn.kind
            return _Stop(StopReason.FINISH if kind == "finish" else StopReason.TOOL_HANDOFF)
        return None

    async def continue_after_max_tokens(self) -> _Stop | None:
        if self.continuations >= self.e.settings.max_continuations:
            return _Stop(StopReason.MAX_TOKENS)
        self.continuations += 1
        self.conv.messages.append(
            Message.user(CONTINUE_PROMPT, meta={"internal": True, "continuation": True})
        )
        await self.emit(
            NoticeEvent(
                NoticeKind.CONTINUE,
                "output limit reached; continuing",
                {"continuation": self.continuations},
            )
        )
        return None

    def out_of_turns(self) -> ModelError:
        n = self.tool_iterations
        return ModelError(
            ErrorKind.MAX_TURNS,
            f"The tool budget ({n} rounds of tool calls) ran out before the model gave an "
            "answer. Ask again with a narrower request, or raise max_tool_iterations.",
        )

    # -- the transcript before a call ---------------------------------------
    def prompt_tokens(self) -> int:
        n = estimate_tokens(self.system) + estimate_tokens(self.conv.summary or "")
        return n + sum(message_tokens(m) for m in self.preamble) + self.conv.messages_tokens()

    async def prepare_history(self) -> None:
        fixed, report = repair(self.conv.messages)
        if report.changed:
            self.conv.messages = fixed
            await self.emit(
                NoticeEvent(
                    NoticeKind.REPAIR,
                    "transcript repaired before the request",
                    {
                        "added": report.added,
                        "dropped_orphans": report.dropped_orphans,
                        "dropped_duplicates": report.dropped_duplicates,
                    },
                )
            )

    async def summarize(self, system: str, transcript: str) -> str:
        spec = CallSpec(system, [Message.user(transcript)], [], 2048, self.context)
        result = await self.caller.call(spec, None, lambda _t: None)
        self.usage = self.usage + result.usage
        self.cost += self.e.prices.cost(result.model, result.usage)
        return result.text

    # -- endings ------------------------------------------------------------
    async def finish(self, stop: _Stop) -> TurnResult:
        err = stop.error
        result = self.result = TurnResult(
            reason=stop.reason,
            text="\n\n".join(self.texts) if self.continuations == 0 else "".join(self.texts),
            usage=self.usage,
            cost_usd=round(self.cost, 8),
            duration_ms=int((time.monotonic() - self.started) * 1000),
            model=self.model,
            error=err.message if err else None,
            error_kind=err.kind.value if err else None,
            attempts=self.attempts,
            end_turn=(
                {"kind": self.ctx.end_turn.kind, **self.ctx.end_turn.detail}
                if self.ctx.end_turn
                else None
            ),
        )
        await self.emit(
            StopEvent(
                reason=result.reason,
                usage=result.usage,
                cost_usd=result.cost_usd,
                duration_ms=result.duration_ms,
                model=result.model,
                error=result.error,
                error_kind=result.error_kind,
                attempts=result.attempts,
                text=result.text,
            )
        )
        return result

    async def finish_aborted(self) -> TurnResult:
        """Close an interrupted turn: keep what was said, repair, emit the stop.

        A turn that already decided its end keeps it: its stop event is out
        (or going out), and a second one would give it two ends.
        """
        if self.result is not None:
            return self.result
        said = "".join(self.partial)
        if said:
            self.texts.append(said)
            self.conv.messages.append(Message.assistant(said, meta={"incomplete": True}))
        self.partial = []
        self.conv.messages, _ = repair(self.conv.messages)
        aborted = ModelError(ErrorKind.ABORTED, "turn aborted")
        return await self.finish(_Stop(StopReason.ABORTED, aborted))
