"""The contract every model provider implements.

A provider streams one model call as :data:`StreamItem` values and raises
:class:`engine.errors.ModelError` (never an SDK exception) on failure. It
holds no conversation state; the query loop owns that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from engine.call_context import CallContext
from engine.events import TextDelta, ThinkingDelta, ToolCallEvent
from engine.messages import Message, Usage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    """One model call as every provider receives it.

    ``options`` are the vendor's own request options and go on the wire;
    ``context`` says who calls and why, and never does (see
    :mod:`engine.call_context`).
    """

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
    # Provider-specific extras (for example Anthropic's thinking budget).
    options: dict[str, Any] = field(default_factory=dict)
    context: CallContext = field(default_factory=CallContext)


class ModelStop(StrEnum):
    """Why one model call's stream ended, in the engine's words.

    Each provider maps its vendor's values onto these (OpenAI's ``stop`` and
    Anthropic's ``stop_sequence`` are both ``END_TURN``; a cut for length is
    ``MAX_TOKENS``); a value a provider does not know is ``END_TURN``.
    Members compare equal to their string values.
    """

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    # The provider's content policy stopped the reply mid-stream (OpenAI's
    # ``content_filter``, Anthropic's ``refusal``). The stream itself ended
    # well, but the answer is not one: the caller ends the call with a
    # ``content_policy`` error (``engine.caller.ContentRefused``).
    CONTENT_FILTER = "content_filter"


@dataclass(frozen=True, slots=True)
class UsageItem:
    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class StopItem:
    """How the model ended this call.

    ``reason`` is always a :class:`ModelStop` member; a plain string naming
    one is converted, any other value raises ``ValueError``. ``message`` is
    the provider's own account of the stop where the wire has one: the
    vendor's stop value and, for a content-policy stop, its category and
    explanation.
    """

    reason: ModelStop
    message: str | None = None
    type: Literal["stop"] = "stop"

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", ModelStop(self.reason))


@dataclass(frozen=True, slots=True)
class ProgressItem:
    """Model output that completes no item yet, such as a fragment of a tool call's arguments.

    A tool call becomes a :class:`ToolCallEvent` only once its arguments are
    whole, which for a long argument can take minutes of steady streaming.
    Providers yield this for each such fragment so that the engine's stall
    deadline (:mod:`engine.timeouts`) sees a model that is still writing; it
    carries nothing and is never passed on to clients.
    """

    type: Literal["progress"] = "progress"


PROGRESS = ProgressItem()
"""The one :class:`ProgressItem` providers need: it has no fields."""

StreamItem = TextDelta | ThinkingDelta | ToolCallEvent | UsageItem | StopItem | ProgressItem


@runtime_checkable
class Provider(Protocol):
    """A source of model completions (OpenAI, Anthropic, offline, ...)."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one call. Must end with exactly one :class:`StopItem`."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
