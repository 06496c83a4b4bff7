"""Reading frames off the wire and writing them back.

One ``TypeAdapter`` per union does all the parsing; everything a caller gets
back is a frame model or a ``ProtocolError``. The gateway relies on that: a
malformed frame must become an ``error`` frame, never a crashed connection.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from protocol.client import ClientFrame
from protocol.common import ErrorCode
from protocol.data import DataPayload
from protocol.errors import ProtocolError
from protocol.server import ServerFrame

logger = logging.getLogger(__name__)

MAX_FRAME_BYTES = 8 * 1024 * 1024
"""A sensible default frame limit for callers of ``check_size``; attachments dominate it."""

MAX_NESTING = 200
"""How deep a frame given as a Python mapping may nest (the JSON parser's own limit)."""

PROTOCOL_VERSION = 1

T = TypeVar("T")

CLIENT_ADAPTER: TypeAdapter[ClientFrame] = TypeAdapter(ClientFrame)
SERVER_ADAPTER: TypeAdapter[ServerFrame] = TypeAdapter(ServerFrame)
DATA_ADAPTER: TypeAdapter[DataPayload] = TypeAdapter(DataPayload)

Raw = str | bytes | bytearray | Mapping[str, Any]
Container = Mapping[Any, Any] | list[Any] | tuple[Any, ...]


def parse_client_frame(raw: Raw, *, max_bytes: int | None = None) -> ClientFrame:
    """Parse one frame a client sent (JSON text, bytes or a decoded mapping).

    Raises ``ProtocolError`` and nothing else. With ``max_bytes`` the size is
    checked first, so an oversized frame is refused before it is decoded.
    """
    return _parse(CLIENT_ADAPTER, raw, max_bytes)


def parse_server_frame(raw: Raw, *, max_bytes: int | None = None) -> ServerFrame:
    """Parse one frame the server sent; used by clients, the CLI and tests."""
    return _parse(SERVER_ADAPTER, raw, max_bytes)


def parse_data(raw: Raw) -> DataPayload:
    """Parse a bare ``data`` payload (the inside of ``yeaft_output``)."""
    return _parse(DATA_ADAPTER, raw, None)


def dump(frame: BaseModel) -> dict[str, Any]:
    """A frame or payload as a JSON-ready dict: wire names, ``None`` fields left out."""
    return frame.model_dump(mode="json", by_alias=True, exclude_none=True)


def dumps(frame: BaseModel) -> str:
    """A frame or payload as compact JSON text, as it goes on the wire.

    The text is always valid UTF-8 once encoded: a string that holds a lone
    surrogate (which UTF-8 cannot encode, and which pydantic refuses to
    serialise) has each such character replaced by U+FFFD, and a warning is
    logged, because every sender of a frame (the WebSocket writer, the event
    log) must be able to send what this returns. Other serialisation errors
    are raised as they are.
    """
    try:
        return frame.model_dump_json(by_alias=True, exclude_none=True)
    except PydanticSerializationError:
        # Rare path: a string of the frame cannot be encoded. Dumping to
        # Python objects does not encode, so the strings can be repaired.
        scrubbed = _scrub(frame.model_dump(mode="json", by_alias=True, exclude_none=True))
        if scrubbed is _UNCHANGED:
            raise
        logger.warning(
            "a %s held text UTF-8 cannot encode (a lone surrogate); sent with U+FFFD instead",
            type(frame).__name__,
        )
        return json.dumps(scrubbed, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_UNCHANGED = object()
_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(value: object) -> object:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD.

    Returns ``_UNCHANGED`` when there was none, so the caller knows the
    serialisation failed for another reason.
    """
    changed = False

    def fix(node: object) -> object:
        nonlocal changed
        if isinstance(node, str):
            fixed = _SURROGATE.sub("\ufffd", node)
            changed = changed or fixed != node
            return fixed
        if isinstance(node, dict):
            return {fix(k): fix(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [fix(item) for item in node]
        return node

    result = fix(value)
    return result if changed else _UNCHANGED


def check_size(raw: str | bytes | bytearray, limit: int) -> None:
    """Raise ``ProtocolError`` (``frame_too_large``) when ``raw`` exceeds ``limit`` bytes.

    Text is measured as UTF-8; the exact size is only computed when the
    character count alone cannot decide, because encoding costs a copy.
    """
    if isinstance(raw, str):
        if len(raw) * 4 <= limit:
            return
        too_large = len(raw) > limit or len(raw.encode("utf-8", "surrogatepass")) > limit
    else:
        too_large = len(raw) > limit
    if too_large:
        raise ProtocolError(
            ErrorCode.FRAME_TOO_LARGE,
            f"the frame is larger than the limit of {limit} bytes",
            detail={"limit": limit},
        )


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of the whole protocol.

    ``$defs`` holds every model plus the three unions ``ClientFrame``,
    ``ServerFrame`` and ``DataPayload``; the document itself accepts any
    client or server frame.
    """
    keyed, definitions = TypeAdapter.json_schemas(
        [
            ("ClientFrame", "validation", CLIENT_ADAPTER),
            ("ServerFrame", "validation", SERVER_ADAPTER),
            ("DataPayload", "validation", DATA_ADAPTER),
        ],
        by_alias=True,
    )
    defs: dict[str, Any] = dict(definitions.get("$defs", {}))
    for (name, _mode), schema in keyed.items():
        defs[name] = schema
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Yeaft wire protocol",
        "description": (
            "Every JSON frame exchanged over the Yeaft WebSocket. Client frames are "
            "ClientFrame, server frames are ServerFrame, and the data of "
            "claude_output / yeaft_output is DataPayload."
        ),
        "version": PROTOCOL_VERSION,
        "anyOf": [{"$ref": "#/$defs/ClientFrame"}, {"$ref": "#/$defs/ServerFrame"}],
        "$defs": defs,
    }


def _parse(adapter: TypeAdapter[T], raw: object, max_bytes: int | None) -> T:
    try:
        if isinstance(raw, str | bytes | bytearray):
            if max_bytes is not None:
                check_size(raw, max_bytes)
            # Parsing JSON in pydantic-core is faster than json.loads plus
            # validation, and bounds nesting depth on its own.
            return adapter.validate_json(raw, by_alias=True, by_name=False)
        if isinstance(raw, Mapping):
            _check_tree(raw)
            return adapter.validate_python(raw, by_alias=True, by_name=False)
        raise ProtocolError(ErrorCode.INVALID_FRAME, "a frame must be a JSON object")
    except ProtocolError:
        raise
    except ValidationError as exc:
        raise ProtocolError.from_validation_error(exc, _decoded(raw)) from exc
    except UnicodeError as exc:
        raise ProtocolError(ErrorCode.BAD_JSON, "the frame is not valid UTF-8 text") from exc
    except Exception as exc:
        # The promise to callers is that only ProtocolError leaves this module;
        # anything else here is a bug in a validator, logged for us to fix.
        logger.warning("unexpected %s while parsing a frame", type(exc).__name__, exc_info=True)
        raise ProtocolError(ErrorCode.INVALID_FRAME, "the frame could not be read") from exc


def _decoded(raw: object) -> object:
    """The frame as plain data, to map pydantic's error locations onto it."""
    if isinstance(raw, Mapping):
        return raw
    try:
        return json.loads(raw)  # type: ignore[arg-type]
    except Exception:
        return None


def _check_tree(root: Mapping[str, Any]) -> None:
    """Refuse mappings nested deeper than ``MAX_NESTING`` or containing a cycle.

    JSON text cannot express either, but a mapping handed over in-process
    can, and both would make later serialisation recurse without end.
    """
    seen: set[int] = set()
    stack: list[tuple[Container, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ProtocolError(
                ErrorCode.INVALID_FRAME, f"the frame nests more than {MAX_NESTING} levels deep"
            )
        if id(node) in seen:
            raise ProtocolError(ErrorCode.INVALID_FRAME, "the frame refers to itself")
        seen.add(id(node))
        children = node.values() if isinstance(node, Mapping) else node
        # Empty containers cannot hold a cycle, and the empty tuple is a
        # shared singleton that would look like one.
        stack.extend(
            (child, depth + 1)
            for child in children
            if isinstance(child, Mapping | list | tuple) and child
        )
