"""The ``data`` payload of ``claude_output`` and ``yeaft_output`` frames.

Payloads are shaped like Claude's stream-json lines whichever model produced
them, so one rendering path in the client serves every provider. Their field
names are snake_case on the wire (that is stream-json's spelling), unlike the
camelCase envelope around them. Extra fields are allowed: stream-json grows
new fields, and a relayed payload must not be rejected for carrying one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ResultSubtype = Literal["success", "error_max_turns", "error_during_execution"]
SystemSubtype = Literal["init", "compact", "notice", "error", "tool_output"]


class DataModel(BaseModel):
    """Base of the payload models: snake_case names, extra fields kept."""

    model_config = ConfigDict(extra="allow")


class TextBlock(DataModel):
    """Visible text written by the model (or, in a user message, by a person)."""

    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(DataModel):
    """The model's reasoning; ``signature`` lets a provider verify it later."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ToolUseBlock(DataModel):
    """A tool call the model asked for."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(DataModel):
    """The result of the tool call named by ``tool_use_id``."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


AssistantBlock = Annotated[TextBlock | ThinkingBlock | ToolUseBlock, Field(discriminator="type")]
UserBlock = Annotated[ToolResultBlock | TextBlock, Field(discriminator="type")]


class AssistantMessage(DataModel):
    """The ``message`` of an ``assistant`` payload."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantBlock]


class UserMessage(DataModel):
    """The ``message`` of a ``user`` payload (tool results echoed back)."""

    role: Literal["user"] = "user"
    content: list[UserBlock]


class AssistantData(DataModel):
    """Model output: text, thinking or a tool call."""

    type: Literal["assistant"] = "assistant"
    message: AssistantMessage


class UserData(DataModel):
    """A tool result, shown under the tool call it answers."""

    type: Literal["user"] = "user"
    message: UserMessage


class ResultUsage(DataModel):
    """Token counts of one whole turn, in Anthropic's names."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int | None = Field(default=None, ge=0)
    cache_creation_input_tokens: int | None = Field(default=None, ge=0)


class ResultData(DataModel):
    """The end of a turn: how it ended, what it cost, how long it took.

    ``session_id`` names the conversation the turn belongs to. ``attempts``
    records every model call of a turn that needed retries or fallbacks.
    ``message_id`` (a group turn only) is the id of the reply the turn
    stored in the group log, absent when it stored none (a silent or empty
    turn): a client links the streamed bubble to that message with it, and
    so knows which later turns answer this one (their ``triggerId``).
    """

    type: Literal["result"] = "result"
    subtype: ResultSubtype
    session_id: str
    is_error: bool
    duration_ms: int = Field(ge=0)
    total_cost_usd: float = Field(ge=0)
    usage: ResultUsage
    stop_reason: str | None = None
    error: str | None = None
    error_kind: str | None = None
    result: str | None = None
    model: str | None = None
    attempts: list[dict[str, Any]] | None = None
    message_id: str | None = None
    # The VPs the stored reply addresses: a ``reply_routed`` frame follows with
    # the turns the coordinator started for them, or why none (``protocol.reply_routes``).
    mentions: list[str] | None = None


class SystemData(DataModel):
    """Something that is not model output: a start, a compaction, a notice, an error.

    ``init`` opens every VP turn in a group and names its ``model``, ``tools`` and
    ``session_id`` (the conversation); ``error`` reports a failure that is
    not the turn's result (a compaction whose summary call failed, say);
    ``tool_output`` is part of a running tool's output (``message``), under
    the call it belongs to (``detail.tool_use_id`` and ``detail.name``).
    Clients that do not use ``init`` ignore it.
    """

    type: Literal["system"] = "system"
    subtype: SystemSubtype
    message: str | None = None
    detail: dict[str, Any] | None = None
    model: str | None = None
    tools: list[str] | None = None
    session_id: str | None = None


DataPayload = Annotated[
    AssistantData | UserData | ResultData | SystemData, Field(discriminator="type")
]
"""Every ``data`` payload, told apart by ``type``."""
