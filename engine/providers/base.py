"""The contract every model provider implements.

A provider streams one model call as :data:`StreamItem` values and raises
:class:`engine.errors.ModelError` (never an SDK exception) on failure. It
holds no conversation state; the query loop owns that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

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
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    temperature: float | None = None
    # Provider-specific extras (for example Anthropic's thinking budget).
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UsageItem:
    usage: Usage
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class StopItem:
    """How the model ended this call: ``end_turn``, ``max_tokens`` or ``tool_use``."""

    reason: Literal["end_turn", "max_tokens", "tool_use"]
    type: Literal["stop"] = "stop"


StreamItem = TextDelta | ThinkingDelta | ToolCallEvent | UsageItem | StopItem


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
