"""The one exception a bad frame raises, and its translation from pydantic.

The gateway answers every malformed frame with an ``error`` frame and keeps
the connection open, so it needs a single exception that already knows the
wire ``code``, the offending ``field`` and a sentence a person can read.
``ProtocolError`` is that exception; ``from_validation_error`` turns pydantic's
error list into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from protocol.common import MAX_ID_LENGTH, ErrorCode, encodable
from protocol.server import ErrorFrame

# pydantic reports "this is not an object" under several names depending on
# whether it checked a model, a dict or a tagged union.
_NOT_AN_OBJECT = frozenset({"dict_type", "model_type", "model_attributes_type"})
_TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})


class ProtocolError(ValueError):
    """A frame could not be accepted.

    ``code`` is the wire error code, ``field`` the dotted path of the first
    offending field (``None`` when the frame as a whole is wrong) and
    ``reason`` a sentence for a person. ``request_id`` and ``frame_type`` are
    read from the bad frame when it got far enough to have them, so the error
    can be matched to the request that caused it.
    """

    def __init__(
        self,
        code: ErrorCode,
        reason: str,
        *,
        field: str | None = None,
        request_id: str | None = None,
        frame_type: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.field = field
        self.request_id = request_id
        self.frame_type = frame_type
        self.detail = detail

    def __repr__(self) -> str:
        return (
            f"ProtocolError(code={self.code.value!r}, field={self.field!r}, reason={self.reason!r})"
        )

    def to_error_frame(self, request_id: str | None = None) -> ErrorFrame:
        """Build the ``error`` frame that reports this error to the client."""
        return ErrorFrame(
            code=self.code,
            message=self.reason,
            field=self.field,
            request_id=request_id if request_id is not None else self.request_id,
            detail=self.detail,
        )

    @classmethod
    def from_validation_error(cls, exc: ValidationError, source: object) -> ProtocolError:
        """Translate the first error pydantic found in ``source`` (the decoded frame).

        ``source`` is used to turn pydantic's error location into the field path
        the client wrote; pass ``None`` when the input could not be decoded.
        """
        request_id, frame_type = _identify(source)
        code, field, reason, detail = _describe(exc.errors(include_url=False), source, frame_type)
        return cls(
            code,
            reason,
            field=field,
            request_id=request_id,
            frame_type=frame_type,
            detail=detail,
        )


def _describe(
    errors: list[ErrorDetails], source: object, frame_type: str | None
) -> tuple[ErrorCode, str | None, str, dict[str, Any] | None]:
    """Pick code, field, reason and detail for the first of pydantic's errors."""
    if not errors:
        return ErrorCode.INVALID_FRAME, None, "the frame is not valid", None
    error, path = _most_precise(errors, source)
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if not error["loc"]:
        whole = _describe_whole_frame(kind, ctx, error["msg"])
        if whole is not None:
            return whole
    if isinstance(ctx.get("field"), str):
        # A cross-field rule raised at model level names its field in ctx,
        # and its message is already a whole sentence about that field; in a
        # nested model (an attachment) the field is under the model's path.
        field = f"{path}.{ctx['field']}" if path else ctx["field"]
        return ErrorCode.INVALID_FRAME, field, error["msg"], None
    if kind in _TAG_ERRORS:
        # A nested union (a data payload, a content block) has its own type.
        path = f"{path}.type" if path else "type"
    if kind == "missing" or kind == "union_tag_not_found":
        reason = f"'{path}' is required"
    elif kind == "extra_forbidden":
        where = f" of {frame_type}" if frame_type else ""
        reason = f"'{path}' is not a field{where}"
    elif kind == "union_tag_invalid":
        reason = f"'{path}' is {ctx.get('tag')!r}, which is not one of {ctx.get('expected_tags')}"
    elif path:
        reason = f"'{path}' is invalid: {_lower_first(error['msg'])}"
    else:
        reason = f"the frame is invalid: {_lower_first(error['msg'])}"
    return ErrorCode.INVALID_FRAME, path or None, reason, None


def _describe_whole_frame(
    kind: str, ctx: dict[str, Any], msg: str
) -> tuple[ErrorCode, str | None, str, dict[str, Any] | None] | None:
    """Describe an error about the frame as a whole, or ``None`` if it names a field."""
    if kind == "json_invalid":
        return ErrorCode.BAD_JSON, None, f"the frame is not valid JSON: {ctx.get('error')}", None
    if kind == "string_unicode":
        return ErrorCode.BAD_JSON, None, f"the frame is not valid text: {_lower_first(msg)}", None
    if kind in _NOT_AN_OBJECT:
        return ErrorCode.INVALID_FRAME, None, "a frame must be a JSON object", None
    if kind == "union_tag_not_found":
        return ErrorCode.UNKNOWN_TYPE, "type", "the frame has no 'type' field", None
    if kind == "union_tag_invalid":
        reason = f"unknown frame type {ctx.get('tag')!r}"
        return ErrorCode.UNKNOWN_TYPE, "type", reason, {"expected": _expected_tags(ctx)}
    return None


def _most_precise(errors: list[ErrorDetails], source: object) -> tuple[ErrorDetails, str]:
    """The first error, or a deeper one about the same field.

    For a plain union pydantic reports one error per member, and the first
    member's complaint is often the least helpful: for ``answer: [1]`` it is
    "not a string", while the list member knows that item 0 is the problem.
    """
    first = errors[0]
    best, best_path = first, field_path(first["loc"], source)
    for other in errors[1:]:
        path = field_path(other["loc"], source)
        if best_path and path.startswith(f"{best_path}."):
            best, best_path = other, path
    return best, best_path


def field_path(loc: Sequence[int | str], source: object) -> str:
    """Turn a pydantic error location into the dotted path the client wrote.

    pydantic puts extra steps in a location: the tag of each discriminated
    union it passed through (``send_message`` in
    ``("send_message", "text")``) and the member name of plain unions. Walking
    the location along the decoded input tells those steps from real keys and
    indexes: a step equal to the node's own ``type`` is its tag (skipped once
    per node), a step that is not a key or index of the node is a label, and
    a missing key ends the path.
    """
    parts: list[str] = []
    node: object = source
    tag_skipped = False
    for position, step in enumerate(loc):
        last = position == len(loc) - 1
        if isinstance(node, dict):
            if not tag_skipped and isinstance(step, str) and node.get("type") == step:
                tag_skipped = True
                continue
            if step in node:
                parts.append(str(step))
                node, tag_skipped = node[step], False
            elif last:
                parts.append(str(step))
        elif isinstance(node, list):
            if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < len(node):
                parts.append(str(step))
                node, tag_skipped = node[step], False
        elif source is None:
            # Without the input there is nothing to walk; keep every step.
            parts.append(str(step))
        else:
            # A scalar has no inside: what follows are union member labels.
            break
    return ".".join(parts)


def _identify(source: object) -> tuple[str | None, str | None]:
    """Read the request id and frame type from a bad frame, when it has them.

    Only short text that UTF-8 can encode is taken: the id is echoed in the
    ``error`` frame, and an id with a lone surrogate would make that frame
    impossible to send, so such an id is not echoed at all.
    """
    if not isinstance(source, dict):
        return None, None
    request_id = None
    for key in ("requestId", "clientMessageId"):
        value = source.get(key)
        if _echoable(value):
            request_id = value
            break
    frame_type = source.get("type")
    return request_id, frame_type if _echoable(frame_type) else None


def _echoable(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and encodable(value)


def _expected_tags(ctx: dict[str, Any]) -> list[str]:
    raw = ctx.get("expected_tags")
    if not isinstance(raw, str):
        return []
    return [tag.strip().strip("'") for tag in raw.split(",") if tag.strip()]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]
