"""Vendor-neutral conversation model used inside the engine.

Each provider module translates these into its own wire format; nothing
outside ``engine/providers`` sees a vendor's message shape. Messages are
pydantic models because transcripts are persisted by the store and loaded
back, and a validated round trip is worth the small cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

Role = Literal["user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A tool invocation requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Thinking(BaseModel):
    """A reasoning block; ``signature`` is kept for providers that verify it."""

    text: str
    signature: str | None = None


class ImagePart(BaseModel):
    """An image in a user message: base64 ``data`` of type ``mime`` (see ``engine.attachments``)."""

    name: str
    mime: str
    data: str
    size: int = 0


IMAGE_TOKENS = 1_000
"""The budget estimate of one image in a request (a small image costs about this much)."""


class Message(BaseModel):
    """One entry of a transcript.

    ``role="tool"`` carries the result of the tool call named by
    ``tool_call_id``. ``speaker`` is the VP that wrote an assistant message or
    the user that wrote a user message; the engine itself ignores it, the
    group layer uses it to decide what a VP may see.
    """

    role: Role
    content: str = ""
    thinking: list[Thinking] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    speaker: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    # Images of a person's message or a tool's result, for vision models;
    # never stored (engine.attachments).
    images: list[ImagePart] = Field(default_factory=list)

    @classmethod
    def user(cls, text: str, **kw: Any) -> Message:
        return cls(role="user", content=text, **kw)

    @classmethod
    def assistant(cls, text: str = "", **kw: Any) -> Message:
        return cls(role="assistant", content=text, **kw)

    @classmethod
    def tool_result(
        cls,
        call_id: str,
        content: str,
        *,
        name: str | None = None,
        is_error: bool = False,
        images: Sequence[ImagePart] = (),
    ) -> Message:
        return cls(
            role="tool",
            content=content,
            tool_call_id=call_id,
            tool_name=name,
            is_error=is_error,
            images=list(images),
        )


class Usage(BaseModel):
    """Token counts for one model call or, summed, for one turn."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class Conversation(BaseModel):
    """The engine-side state of one conversation (one group and VP pair).

    ``summary`` holds the latest compaction summary; ``messages`` holds what
    comes after it verbatim. The owner persists this after every turn.
    """

    id: str
    summary: str | None = None
    messages: list[Message] = Field(default_factory=list)
    compactions: int = 0
    # Owner bookkeeping the engine ignores (e.g. how far a VP has read the group log).
    meta: dict[str, Any] = Field(default_factory=dict)
    # Token estimates of messages already counted, by identity (see message_tokens).
    _counted: dict[int, tuple[Message, int, int]] = PrivateAttr(default_factory=dict)

    def messages_tokens(self) -> int:
        """The estimated tokens of ``messages``, each message counted once while it lasts.

        A turn asks before every model call, and a transcript runs to
        hundreds of messages: a message counted before (the same object,
        its text the same length) is not counted again.
        """
        counted, fresh = self._counted, {}
        total = 0
        for msg in self.messages:
            seen = counted.get(id(msg))
            if seen is not None and seen[0] is msg and seen[1] == len(msg.content):
                n = seen[2]
            else:
                n = message_tokens(msg)
            fresh[id(msg)] = (msg, len(msg.content), n)
            total += n
        self._counted = fresh
        return total


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (about four characters a token).

    Used only for budgets and compaction decisions, never for billing.
    """
    return max(1, (len(text) + 3) // 4) if text else 0


def message_tokens(msg: Message) -> int:
    n = estimate_tokens(msg.content) + 4 + IMAGE_TOKENS * len(msg.images)
    for t in msg.thinking:
        n += estimate_tokens(t.text)
    for c in msg.tool_calls:
        n += estimate_tokens(c.name) + estimate_tokens(str(c.arguments)) + 4
    return n
