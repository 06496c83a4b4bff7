"""Error classes and classification of provider failures.

Every provider converts its SDK's exceptions into :class:`ModelError` through
:func:`classify`, so retry, fallback and compaction decisions are made on one
vocabulary of reasons whatever the vendor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    TIMEOUT = "timeout"
    # The provider failed on its side (HTTP 500, 502...). Named apart from a
    # timeout so a report says what happened, but retried just the same.
    SERVER_ERROR = "server_error"
    # The stream broke off mid-reply (a dropped connection, no final event).
    # Retried like a timeout, but reported as what it is.
    STREAM_CUT = "stream_cut"
    AUTH = "auth"
    BILLING = "billing"
    CONTEXT_OVERFLOW = "context_overflow"
    # The provider rejected the request as malformed (400 invalid request).
    FORMAT = "format"
    # The provider refused the request under its content policy.
    CONTENT_POLICY = "content_policy"
    MODEL_NOT_FOUND = "model_not_found"
    ABORTED = "aborted"
    # The prompt plus the reserved output does not fit the model's window;
    # the model was not called (the turn loop's context-window guard).
    CONTEXT_WINDOW = "context_window"
    # The tool-iteration budget ended the turn before the model answered.
    MAX_TURNS = "max_turns"
    UNKNOWN = "unknown"


# Kinds worth retrying on the same model before moving down the chain.
RETRYABLE = frozenset(
    {
        ErrorKind.RATE_LIMIT,
        ErrorKind.OVERLOADED,
        ErrorKind.TIMEOUT,
        ErrorKind.SERVER_ERROR,
        ErrorKind.STREAM_CUT,
    }
)
# Kinds that must never move to another model: the user asked to stop, the
# conversation itself is too long, the request is malformed, or its content
# was refused; each would fail the same way on any model, so the turn ends
# with the provider's own message.
NO_FAILOVER = frozenset(
    {
        ErrorKind.ABORTED,
        ErrorKind.CONTEXT_OVERFLOW,
        ErrorKind.FORMAT,
        ErrorKind.CONTENT_POLICY,
    }
)


class ModelError(Exception):
    """A classified failure of one model call."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.provider = provider
        self.model = model

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps the error intact when it crosses a process boundary (Ray).
        return (
            _rebuild_model_error,
            (self.kind, self.message, self.status, self.retry_after, self.provider, self.model),
        )

    def __str__(self) -> str:
        status = f" {self.status}" if self.status else ""
        return f"{self.kind.value}{status}: {self.message}"


def _rebuild_model_error(
    kind: ErrorKind,
    message: str,
    status: int | None,
    retry_after: float | None,
    provider: str | None,
    model: str | None,
) -> ModelError:
    return ModelError(
        kind, message, status=status, retry_after=retry_after, provider=provider, model=model
    )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One failed try of one candidate in the fallback chain."""

    provider: str
    model: str
    reason: str
    status: int | None
    message: str
    # The label of the credential the attempt used (never the key), if any.
    credential: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "provider": self.provider,
            "model": self.model,
            "reason": self.reason,
            "status": self.status,
            "message": self.message,
        }
        if self.credential is not None:
            out["credential"] = self.credential
        return out


class AllModelsFailed(ModelError):
    """Every candidate of the fallback chain failed; ``attempts`` says how."""

    def __init__(self, attempts: list[Attempt], last: ModelError) -> None:
        parts = " | ".join(
            f"{a.provider}:{a.model}: {a.reason}"
            + (f" {a.status}" if a.status else "")
            + f" ({a.message[:120]})"
            for a in attempts
        )
        super().__init__(
            last.kind,
            f"All models failed ({len(attempts)}): {parts}",
            status=last.status,
            provider=last.provider,
            model=last.model,
        )
        self.attempts = attempts

    def __reduce__(self) -> tuple[Any, ...]:
        last = ModelError(self.kind, self.message, status=self.status)
        return (AllModelsFailed, (self.attempts, last))


_OVERFLOW = re.compile(
    r"context[ _-]?length|context window|maximum context|too many tokens|prompt is too long"
    r"|reduce the length|input is too long|exceeds the (?:model's )?(?:maximum|context)",
    re.IGNORECASE,
)
_OVERLOAD = re.compile(r"overload|capacity|unavailable|try again later", re.IGNORECASE)
_BILLING = re.compile(
    r"billing|insufficient[_ ]quota|credit balance|payment|exceeded your current quota",
    re.IGNORECASE,
)
_RATE = re.compile(r"rate[_ ]?limit|too many requests|throttl|resource_exhausted", re.IGNORECASE)
_POLICY = re.compile(
    r"content[_ ]policy|content[_ ]filter|content filtering|content management policy|safety system"
    r"|flagged as (?:potentially )?(?:harmful|unsafe)",
    re.IGNORECASE,
)
_MODEL = re.compile(r"model[_ ]not[_ ]found|does not exist|unknown model|no such model", re.I)
# 499 is nginx's "client closed the request": the connection went away, as in a timeout.
_TIMEOUT_STATUSES = (408, 499, 504, 522, 524)
_TIMEOUT_CODES = ("ETIMEDOUT", "ECONNRESET", "ECONNREFUSED", "EPIPE", "ECONNABORTED")


def classify(status: int | None, message: str, code: str | None = None) -> ErrorKind:
    """Map an HTTP status, message and optional error code to an :class:`ErrorKind`.

    Message text wins over status where vendors overload a status: a 400 that
    says the prompt is too long is a context overflow, a 429 that speaks of
    quota is billing, a 503 that says "overloaded" is an overload.

    Only statuses that say a deadline passed are timeouts (408, 504, and
    Cloudflare's 522 and 524); any other 5xx is a server error, so a 500 is
    reported as what it is. Both are retried.
    """
    text = message or ""
    if code:
        upper = code.upper()
        if upper.startswith(("RESOURCE_EXHAUSTED", "THROTTLING")):
            return ErrorKind.RATE_LIMIT
        if upper in _TIMEOUT_CODES:
            return ErrorKind.TIMEOUT
        if "CONTEXT_LENGTH" in upper:
            return ErrorKind.CONTEXT_OVERFLOW
        if "CONTENT_POLICY" in upper or "CONTENT_FILTER" in upper:
            return ErrorKind.CONTENT_POLICY
    if _OVERFLOW.search(text) and status in (None, 400, 413, 422):
        return ErrorKind.CONTEXT_OVERFLOW
    if _POLICY.search(text) and status in (None, 400, 403, 422):
        return ErrorKind.CONTENT_POLICY
    if status is None:
        if _RATE.search(text):
            return ErrorKind.RATE_LIMIT
        if _OVERLOAD.search(text):
            return ErrorKind.OVERLOADED
        return ErrorKind.UNKNOWN
    if status == 429:
        return ErrorKind.BILLING if _BILLING.search(text) else ErrorKind.RATE_LIMIT
    if status in (401, 403):
        return ErrorKind.BILLING if _BILLING.search(text) else ErrorKind.AUTH
    if status == 402:
        return ErrorKind.RATE_LIMIT if _RATE.search(text) else ErrorKind.BILLING
    if status == 404:
        return ErrorKind.MODEL_NOT_FOUND
    if status == 413:
        return ErrorKind.CONTEXT_OVERFLOW
    if status == 529:
        return ErrorKind.OVERLOADED
    if status in (503, 499) and _OVERLOAD.search(text):
        return ErrorKind.OVERLOADED
    if status in _TIMEOUT_STATUSES:
        return ErrorKind.TIMEOUT
    if status >= 500:
        return ErrorKind.SERVER_ERROR
    if status in (400, 422):
        if _BILLING.search(text):
            return ErrorKind.BILLING
        if _MODEL.search(text):
            return ErrorKind.MODEL_NOT_FOUND
        return ErrorKind.FORMAT
    return ErrorKind.UNKNOWN


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` (or ``retry-after-ms``) header value."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from datetime import UTC, datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class SinkFailed(Exception):
    """The turn's event sink (the ``emit`` its caller gave) raised.

    Not a model failure: the model may be fine, but the turn can no longer
    report what it does (its caller's store went away, say). The turn stops
    at once, without a retry, a fallback or a stop event of its own, and this
    reaches the caller of ``Engine.run_turn`` with the sink's own error as
    ``__cause__``, for the caller to end the turn the way that error calls for.
    """
