"""Events the engine emits while a turn runs.

These are small dataclasses (not wire frames); ``engine.bridge`` turns them
into ``claude_output`` / ``yeaft_output`` data payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from engine.messages import Usage

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "tool_use",
    "tool_handoff",
    "finish",
    "aborted",
    "error",
    "error_max_turns",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    text: str
    signature: str | None = None
    type: Literal["thinking_delta"] = "thinking_delta"


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    id: str
    name: str
    arguments: dict[str, Any]
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    id: str
    name: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """Usage of one model call (not cumulative)."""

    usage: Usage
    provider: str
    model: str
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class NoticeEvent:
    """Something the user should know that is not model output.

    ``kind`` is one of ``retry``, ``fallback``, ``compact``, ``continue``,
    ``truncate``, ``repair``, ``budget`` or ``error``.
    """

    kind: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)
    type: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class StopEvent:
    """The end of a turn. Exactly one is emitted per turn, always last."""

    reason: StopReason
    usage: Usage
    cost_usd: float
    duration_ms: int
    model: str | None = None
    error: str | None = None
    error_kind: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # Everything the model said in the turn (what a transcript or log keeps).
    text: str = ""
    type: Literal["stop"] = "stop"


EngineEvent = (
    TextDelta
    | ThinkingDelta
    | ToolCallEvent
    | ToolResultEvent
    | UsageEvent
    | NoticeEvent
    | StopEvent
)
