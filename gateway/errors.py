"""One error type for both doors: HTTP answers it as JSON, WebSocket as an ``error`` frame.

``GatewayError`` carries a protocol :class:`~protocol.ErrorCode`; the HTTP
status follows from the code. Errors the coordinator raises (``GroupError``,
possibly wrapped by Ray in a ``RayTaskError``) are translated by
:func:`from_group_error`: each ``GroupErrorCode`` to the wire code
``GROUP_ERROR_CODES`` gives it, the coordinator's code kept as
``detail.reason``. ``coordinator.errors`` does not import Ray, so importing it
here is safe: the server must configure Ray's authentication before Ray is
first imported.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from coordinator.errors import GroupError, GroupErrorCode
from protocol import ErrorCode, ErrorFrame

log = logging.getLogger(__name__)

HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.BAD_JSON: 400,
    ErrorCode.UNKNOWN_TYPE: 400,
    ErrorCode.INVALID_FRAME: 422,
    ErrorCode.FRAME_TOO_LARGE: 413,
    ErrorCode.ATTACHMENT_TOO_LARGE: 413,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.GAP: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.BUSY: 503,
    ErrorCode.INTERNAL: 500,
}

GROUP_ERROR_CODES: dict[GroupErrorCode, ErrorCode] = {
    GroupErrorCode.NOT_FOUND: ErrorCode.NOT_FOUND,
    GroupErrorCode.CONFLICT: ErrorCode.CONFLICT,
    GroupErrorCode.BUSY: ErrorCode.BUSY,
    GroupErrorCode.NOT_OWNER: ErrorCode.FORBIDDEN,
    GroupErrorCode.NOT_MEMBER: ErrorCode.NOT_FOUND,
    GroupErrorCode.OWNER_LEAVING: ErrorCode.CONFLICT,
    GroupErrorCode.LAST_MEMBER: ErrorCode.CONFLICT,
    GroupErrorCode.NOT_AUTHOR: ErrorCode.FORBIDDEN,
    GroupErrorCode.DELETED: ErrorCode.CONFLICT,
    GroupErrorCode.TURN_RUNNING: ErrorCode.CONFLICT,
    GroupErrorCode.TOO_MANY_VERSIONS: ErrorCode.CONFLICT,
    GroupErrorCode.NOTHING_TO_RESEND: ErrorCode.CONFLICT,
    # The rest refuse what the client asked for: invalid input (HTTP 422).
    GroupErrorCode.DEFAULT_NOT_IN_ROSTER: ErrorCode.INVALID_FRAME,
    GroupErrorCode.NOT_IN_ROSTER: ErrorCode.INVALID_FRAME,
    GroupErrorCode.UNKNOWN_VP: ErrorCode.INVALID_FRAME,
    GroupErrorCode.INVALID_NAME: ErrorCode.INVALID_FRAME,
    GroupErrorCode.INVALID_TEXT: ErrorCode.INVALID_FRAME,
}
"""The wire code of every coordinator refusal; a test checks that none is missing."""


class IllegalTransition(RuntimeError):
    """A state machine (connection, subscription) was asked for a move it forbids."""


class GatewayError(Exception):
    """A request was refused; ``code`` is the wire code, ``message`` a sentence.

    ``retry_after`` (seconds) is set on refusals that pass with time (``busy``).
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        field: str | None = None,
        detail: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.detail = detail
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        """The HTTP status this error is answered with."""
        return HTTP_STATUS.get(self.code, 400)

    def to_frame(self, request_id: str | None = None) -> ErrorFrame:
        """The ``error`` frame that reports this to a WebSocket client."""
        return ErrorFrame(
            code=self.code,
            message=self.message,
            field=self.field,
            request_id=request_id,
            retry_after=self.retry_after,
            detail=self.detail,
        )

    def to_json(self) -> dict[str, Any]:
        """The HTTP body: ``{"error": {"code", "message", ...}}``."""
        body: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        if self.retry_after is not None:
            body["retryAfter"] = self.retry_after
        if self.detail is not None:
            body["detail"] = self.detail
        return {"error": body}

    def headers(self) -> dict[str, str]:
        """HTTP headers of the answer: ``Retry-After`` in whole seconds, when known."""
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


def not_found(what: str) -> GatewayError:
    """The one answer for "missing" and "not yours": existence is never revealed."""
    return GatewayError(ErrorCode.NOT_FOUND, f"{what} not found")


def from_group_error(exc: BaseException) -> GatewayError | None:
    """Translate a coordinator ``GroupError`` (bare or Ray-wrapped); None for anything else.

    The coordinator's own code travels along as ``detail.reason``.
    """
    cause = exc if isinstance(exc, GroupError) else getattr(exc, "cause", None)
    if not isinstance(cause, GroupError):
        return None
    return GatewayError(
        GROUP_ERROR_CODES[cause.code],
        cause.message,
        detail={**(cause.detail or {}), "reason": cause.code.value},
        retry_after=cause.retry_after,
    )


def coordinator_refusal(exc: Exception, service: str) -> GatewayError:
    """What a failed coordinator call tells the client: the coordinator's refusal as a
    GatewayError; anything else is logged and becomes ``internal`` ("the ``service``
    failed")."""
    if isinstance(exc, GatewayError):
        return exc
    translated = from_group_error(exc)
    if translated is not None:
        return translated
    log.error("a coordinator call failed: %s", exc, exc_info=exc)
    return GatewayError(
        ErrorCode.INTERNAL, f"the {service} failed ({type(exc).__name__}); try again"
    )
