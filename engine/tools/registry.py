"""Tool registry: typed parameters, per-mode allowlists, timeouts and approval.

A tool declares a pydantic model for its parameters; the model's JSON Schema
is what the LLM sees, and every call is validated against it before the
handler runs, so a handler only ever receives well-formed input.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import jsonschema
from opentelemetry.trace import Span
from pydantic import BaseModel, ConfigDict, ValidationError

from engine.messages import ImagePart, ToolCall
from engine.providers.base import ToolSpec
from engine.tools.handoff import Router
from telemetry import tracing

log = logging.getLogger(__name__)

Approval = Literal["auto", "ask"]
# The modes a tool is offered in (``Tool.modes``; a turn's ``ToolContext.mode``).
# A turn that answers people is ``chat`` (one VP) or ``group`` (several); a
# ``dream`` maintains a VP's memory and gets the memory tools only.
CONVERSATION_MODES: frozenset[str] = frozenset({"chat", "group"})
MEMORY_MODES: frozenset[str] = CONVERSATION_MODES | {"dream"}


class AskUser(Protocol):
    """Asks the user a question; returns the answer, or raises TimeoutError.

    The answer is the text of one choice (or the user's own words), and a
    list of choices for a ``multi_select`` question. ``allow_other`` lets
    the user answer in their own words although there are choices.
    """

    def __call__(
        self,
        question: str,
        choices: list[str] | None,
        *,
        multi_select: bool = False,
        allow_other: bool = False,
    ) -> Awaitable[str | list[str]]: ...


class ToolSource(Protocol):
    """Tools of one turn beside the registry's, read at every step (a group's MCP tools)."""

    def tools(self) -> Sequence[Tool]:
        """The tools offered now (a source's tools may come and go during a turn)."""
        ...

    async def resolve(self, name: str) -> Tool | None:
        """The tool ``name`` if the source can still provide it by waiting (its
        server is starting); None when it cannot."""
        ...

    def missing(self, name: str) -> str | None:
        """Why ``name`` is not offered now, when the source knows; None otherwise."""
        ...


@dataclass(slots=True)
class EndTurnRequest:
    """A tool's request to end the turn after the current tool batch."""

    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolContext:
    """What a tool may know and do besides its own parameters."""

    conversation_id: str
    vp_id: str | None = None
    group_id: str | None = None
    # The turn's mode: ``chat``, ``group`` or ``dream`` (see CONVERSATION_MODES).
    mode: str = "chat"
    ask_user: AskUser | None = None
    # Hands work to other agents (``route_forward``); None where nobody can take it.
    router: Router | None = None
    # The other agents of the conversation (a group's roster), this one included.
    roster: tuple[str, ...] = ()
    # Anything else the hosting layer hands its tools (memory, user id, ...).
    services: dict[str, Any] = field(default_factory=dict)
    end_turn: EndTurnRequest | None = None
    # Tools of this turn only, beside the registry's (a group's MCP tools):
    # the host's own choice, so not narrowed by an allowlist. It also says
    # why a tool the model named is missing (an MCP server that is down).
    more_tools: ToolSource | None = None
    # Decides every call before it runs (engine.tools.approval.ApprovalGate):
    # None lets it run, a string is the refusal the model gets. Without one,
    # only tools declared ``approval="ask"`` are asked about.
    approve: Callable[[Tool, ToolCall, ToolContext], Awaitable[str | None]] | None = None
    # Shows part of a running call's output to the people watching (the
    # turn's ``ToolOutputEvent``); None where nobody watches.
    on_output: Callable[[ToolCall, str], Awaitable[None]] | None = None
    # The call whose handler runs now (a turn runs its calls one at a time).
    call: ToolCall | None = None

    async def output(self, text: str) -> None:
        """Stream ``text`` as part of the running call's output (the model reads the result)."""
        if text and self.on_output is not None and self.call is not None:
            await self.on_output(self.call, text)

    def request_end_turn(self, kind: str, **detail: Any) -> None:
        """Ask the engine to stop after this tool batch. The first request wins."""
        if self.end_turn is None:
            self.end_turn = EndTurnRequest(kind, dict(detail))


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool = False
    # Images the tool returned (an MCP image block): sent to a vision model
    # with the result, described to any other (engine.attachments.for_model).
    images: tuple[ImagePart, ...] = ()


Handler = Callable[[Any, ToolContext], Awaitable[Any]]


class JsonArguments(BaseModel):
    """The ``params`` of a tool described by a JSON Schema of its own (``input_schema``)."""

    model_config = ConfigDict(extra="allow")


@dataclass(slots=True)
class Tool:
    """A tool the model can call.

    ``modes`` limits the modes it is offered in (``None``: every mode).
    ``approval="ask"`` asks the user before every call through the context's
    ask-user callback; a refusal or an unanswered question is returned to the
    model as an error result, never raised.
    """

    name: str
    description: str
    params: type[BaseModel]
    handler: Handler
    modes: frozenset[str] | None = None
    timeout: float = 90.0
    approval: Approval = "auto"
    # Decides at request time whether the tool is offered (e.g. route_forward
    # is hidden in one-VP groups).
    available: Callable[[ToolContext], bool] | None = None
    # A JSON Schema that replaces the one of ``params`` (an MCP tool's): the
    # call is validated against it and the handler gets the arguments dict.
    input_schema: dict[str, Any] | None = None
    # The MCP server that serves it (None: a tool of Yeaft's own); traces name it.
    server: str | None = None

    def spec(self) -> ToolSpec:
        schema = self.input_schema if self.input_schema is not None else _schema(self.params)
        return ToolSpec(self.name, self.description, schema)

    def parse(self, arguments: dict[str, Any]) -> Any:
        """The handler's input for ``arguments``; raises ValueError saying what is wrong."""
        if self.input_schema is None:
            try:
                return self.params.model_validate(arguments)
            except ValidationError as exc:
                raise ValueError(
                    "; ".join(
                        f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                        for e in exc.errors()
                    )
                ) from None
        problems = _schema_problems(self.input_schema, arguments)
        if problems:
            raise ValueError("; ".join(problems))
        return dict(arguments)


def _schema_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """What is wrong with ``arguments`` under ``schema`` (at most five problems)."""
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except jsonschema.SchemaError:
        # The tool's own schema is broken: let its server judge the call.
        return []
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors[:5]
    ]


@functools.cache
def _schema(params: type[BaseModel]) -> dict[str, Any]:
    # Schema generation costs about a millisecond a tool and happens before
    # every model call; parameter models never change at run time.
    schema = params.model_json_schema()
    schema.pop("title", None)
    return schema


def render(value: Any) -> str:
    """Tool results go to the model as text; structured ones as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False, default=str)


class ToolRegistry:
    """The set of tools one engine can offer."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools or []:
            self.register(t)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def offered(
        self, ctx: ToolContext, allowed: set[str] | frozenset[str] | None = None
    ) -> list[Tool]:
        """Tools offered in ``ctx.mode``: the registry's narrowed by an optional allowlist,
        then the turn's own (``ctx.more_tools``)."""
        more = ctx.more_tools.tools() if ctx.more_tools is not None else ()
        own = [t for t in self._tools.values() if allowed is None or t.name in allowed]
        return [
            t
            for t in [*own, *more]
            if (t.modes is None or ctx.mode in t.modes)
            and (t.available is None or t.available(ctx))
        ]

    def specs(
        self, ctx: ToolContext, allowed: set[str] | frozenset[str] | None = None
    ) -> list[ToolSpec]:
        return [t.spec() for t in self.offered(ctx, allowed)]

    async def execute(
        self,
        call: ToolCall,
        ctx: ToolContext,
        allowed: set[str] | frozenset[str] | None = None,
    ) -> ToolOutcome:
        """Run one call. Failures come back as error outcomes, never exceptions.

        Cancellation (an abort) is the one thing that propagates. Traced as
        the GenAI conventions' ``execute_tool`` span.
        """
        if not tracing.active():
            return await self._execute(call, ctx, allowed)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        }
        if tracing.capture_content():
            attributes["gen_ai.tool.call.arguments"] = json.dumps(call.arguments, default=str)
        with tracing.span(f"execute_tool {call.name}", attributes) as span:
            outcome = await self._execute(call, ctx, allowed, span)
            if outcome.is_error:
                tracing.failed(span, "tool_error", outcome.content[:500])
            if tracing.capture_content():
                span.set_attribute("gen_ai.tool.call.result", tracing.clipped(outcome.content))
            return outcome

    async def _execute(
        self,
        call: ToolCall,
        ctx: ToolContext,
        allowed: set[str] | frozenset[str] | None,
        span: Span | None = None,
    ) -> ToolOutcome:
        tool = next((t for t in self.offered(ctx, allowed) if t.name == call.name), None)
        if tool is None and ctx.more_tools is not None:
            # Named but not offered: a tool whose server is still starting is waited for.
            tool = await ctx.more_tools.resolve(call.name)
        if tool is None:
            why = ctx.more_tools.missing(call.name) if ctx.more_tools is not None else None
            return ToolOutcome(why or f"unknown or unavailable tool: {call.name}", is_error=True)
        if span is not None and tool.server is not None:
            span.set_attribute("gen_ai.tool.type", "extension")
            span.set_attribute("yeaft.mcp.server", tool.server)
        try:
            params = tool.parse(call.arguments)
        except ValueError as exc:
            return ToolOutcome(f"invalid arguments for {call.name}: {exc}", is_error=True)
        if ctx.approve is not None or tool.approval == "ask":
            gate = ctx.approve or self._approve
            refusal = await gate(tool, call, ctx)
            if refusal is not None:
                return ToolOutcome(refusal, is_error=True)
        ctx.call = call
        try:
            async with asyncio.timeout(tool.timeout):
                result = await tool.handler(params, ctx)
        except TimeoutError:
            return ToolOutcome(f"{call.name} timed out after {tool.timeout:g}s", is_error=True)
        except Exception as exc:
            log.warning("tool %s failed: %s", call.name, exc, exc_info=True)
            return ToolOutcome(f"{call.name} failed: {exc}", is_error=True)
        finally:
            ctx.call = None
        if isinstance(result, ToolOutcome):
            return result
        return ToolOutcome(render(result))

    @staticmethod
    async def _approve(tool: Tool, call: ToolCall, ctx: ToolContext) -> str | None:
        """Returns ``None`` when approved, else the refusal to give the model."""
        if ctx.ask_user is None:
            return f"{tool.name} needs the user's approval and no user can be asked here"
        question = f"Allow {tool.name} with {json.dumps(call.arguments, ensure_ascii=False)}?"
        try:
            answer = await ctx.ask_user(question, ["allow", "deny"])
        except TimeoutError:
            return f"{tool.name} was not approved: the question expired unanswered"
        allowed = ("allow", "yes", "y", "approve", "ok")
        if not isinstance(answer, str) or answer.strip().lower() not in allowed:
            return f"{tool.name} was denied by the user"
        return None
