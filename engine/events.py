"""Events the engine emits while a turn runs.

These are small dataclasses (not wire frames); ``engine.bridge`` turns them
into ``claude_output`` / ``yeaft_output`` data payloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from engine.messages import Usage


class StopReason(StrEnum):
    """Why a turn ended; the value is the ``stop_reason`` a ``result`` payload carries.

    Every member must have a result subtype in ``engine.bridge.RESULT_SUBTYPES``
    (a test enforces it). Members compare equal to their string values.
    """

    END_TURN = "end_turn"
    # Output limit reached and the continuations the settings allow are spent.
    MAX_TOKENS = "max_tokens"
    # Claude's name for a stop to run tools; the engine runs them instead of
    # ending the turn, so it does not end a turn with this today.
    TOOL_USE = "tool_use"
    # A tool ended the turn to hand the conversation over (``request_end_turn``).
    TOOL_HANDOFF = "tool_handoff"
    # The model called the ``finish`` tool.
    FINISH = "finish"
    ABORTED = "aborted"
    ERROR = "error"
    ERROR_MAX_TURNS = "error_max_turns"


class NoticeKind(StrEnum):
    """What a :class:`NoticeEvent` reports; the value goes out as ``detail.kind``."""

    RETRY = "retry"
    FALLBACK = "fallback"
    COMPACT = "compact"
    CONTINUE = "continue"
    TRUNCATE = "truncate"
    REPAIR = "repair"
    BUDGET = "budget"
    ERROR = "error"
    # A credential failed and the call moved to the provider's next one.
    ROTATE = "rotate"
    # The provider lane is full: the call waits for a slot (detail.waiting
    # true), or got one after waiting (false).
    QUEUED = "queued"
    # New messages joined the running turn (steering).
    STEER = "steer"
    # The turn started: its model, tools and session (``system`` ``init``).
    INIT = "init"


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
class ToolOutputEvent:
    """Part of a running tool's output, before its result (a remote agent's stream).

    ``id`` is the call's. What a tool streams this way is for the people
    watching; the model reads only the tool's result.
    """

    id: str
    name: str
    text: str
    type: Literal["tool_output"] = "tool_output"


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

    ``kind`` is always a :class:`NoticeKind` member; a plain string naming
    one is converted, any other value raises ``ValueError``.
    """

    kind: NoticeKind
    message: str
    detail: dict[str, Any] = field(default_factory=dict)
    type: Literal["notice"] = "notice"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", NoticeKind(self.kind))


@dataclass(frozen=True, slots=True)
class StopEvent:
    """The end of a turn. Exactly one is emitted per turn, always last.

    ``reason`` is always a :class:`StopReason` member; a plain string naming
    one is converted (code above the engine may still build stops from
    strings), any other value raises ``ValueError``.
    """

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

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", StopReason(self.reason))


EngineEvent = (
    TextDelta
    | ThinkingDelta
    | ToolCallEvent
    | ToolResultEvent
    | ToolOutputEvent
    | UsageEvent
    | NoticeEvent
    | StopEvent
)
