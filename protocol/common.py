"""Building blocks shared by every wire model: base classes, field types, limits.

Two base classes encode the asymmetry of the protocol. Frames a client sends
are untrusted, so they are strict: unknown fields are refused (a misspelt
``grupId`` is reported instead of silently ignored), types are not coerced
and NaN is refused. Frames the server sends are ours, and clients must keep
working when a newer server adds a field, so they allow extra fields.

Wire names are camelCase; Python code uses the snake_case attribute names.
Both are accepted when a model is built in Python, and dumps use the wire
names. Parsing off the wire (``protocol.codec``) accepts the wire names only.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import CoreSchema

ID_PATTERN = r"^[A-Za-z0-9_-]+$"
"""Characters allowed in every id a client sends (group, VP, turn, request...)."""

MAX_ID_LENGTH = 128
MAX_TEXT_LENGTH = 100_000
MAX_NAME_LENGTH = 200
MAX_PATH_LENGTH = 4096
MAX_MENTIONS = 32
MAX_ATTACHMENTS = 16
MAX_ROSTER = 256
MAX_CHOICES = 64

Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
"""A non-empty identifier of ``[A-Za-z0-9_-]``, at most 128 characters."""

_ID_RE = re.compile(ID_PATTERN)


def is_id(value: str) -> bool:
    """Whether ``value`` is an :data:`Id` (for ids that arrive outside a model, as in a URL)."""
    return len(value) <= MAX_ID_LENGTH and _ID_RE.fullmatch(value) is not None


Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_LENGTH)]
"""A non-empty message text of at most 100,000 characters."""

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_LENGTH)]
"""A short human-readable name (a group name, a file name)."""

DirPath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATH_LENGTH)]
"""A filesystem path as the client spells it; never trusted as a real path here."""


def encodable(text: str) -> bool:
    """Whether ``text`` can go on the wire: UTF-8 can encode every character of it.

    A Python string may hold a lone surrogate (``json.loads`` makes one of the
    escape ``"\\ud800"``, and of the bytes ``ED A0 80`` in a binary frame);
    UTF-8 cannot encode it, so a frame that echoes one could not be sent.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class WireEnum(StrEnum):
    """An enum a client names by its value, the same from JSON text and from parsed JSON.

    Client models are strict, and strict validation of Python input takes
    only the enum's own members. FastAPI validates a request body from the
    dict it parsed the JSON into, so a strict enum field refused
    ``"followup"`` over HTTP while the same text in a WebSocket frame
    (validated as JSON) passed. A ``WireEnum`` takes its values from both;
    anything else is refused as before, and no other field is loosened.
    """

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        schema: dict[str, Any] = dict(handler(source))
        schema["strict"] = False
        return schema


class Channel(WireEnum):
    """How a person's message reached Yeaft; the VP's system prompt names it.

    The WebSocket handshake says which (``/ws?client=terminal``); a browser
    (cookie) connection is ``web``, any other client ``api``.
    """

    WEB = "web"
    TERMINAL = "terminal"
    API = "api"


class ErrorCode(WireEnum):
    """The ``code`` of an ``error`` frame; clients switch on it."""

    BAD_JSON = "bad_json"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_FRAME = "invalid_frame"
    FRAME_TOO_LARGE = "frame_too_large"
    ATTACHMENT_TOO_LARGE = "attachment_too_large"
    """A file, or a message's files together, over the attachment limits."""
    RATE_LIMITED = "rate_limited"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    GAP = "gap"
    CONFLICT = "conflict"
    BUSY = "busy"
    """Too much work is waiting to take this frame; ``retryAfter`` says when to retry."""
    INTERNAL = "internal"


class ClientModel(BaseModel):
    """Base of everything a client sends: strict, closed, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
    )


class ServerModel(BaseModel):
    """Base of every server frame: open to extra fields, camelCase on the wire."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
    )
