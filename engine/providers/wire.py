"""Helpers both HTTP SDK providers share: the TLS context, tool arguments, Retry-After, errors.

Nothing here imports a vendor SDK; each provider module still owns its SDK.

Both providers give their SDK client the SDK's own aiohttp transport
(``DefaultAioHttpClient``) instead of the default httpx2 one: aiohttp parses
HTTP in C and reads without a cancel scope per read, so a streamed reply of
60 chunks costs about half the CPU (``bench/sdk_transport.py``). Everything
above the transport (requests, errors, timeouts, SSE decoding) is unchanged.
"""

from __future__ import annotations

import json
import re
import ssl
import time
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any

from engine.errors import ErrorKind, ModelError, parse_retry_after


@cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context every SDK client of this process verifies servers with.

    It is the context the SDK would make for each client (httpx2's default:
    the system's CA certificates, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made
    once: loading the certificates took 26-72 ms a client, and every VP
    makes its own client at its first model call, so a host of 8 VPs paid
    for it 8 times on the path of its first message. A context is safe to
    share between clients; :meth:`ProviderRegistry.preload` makes it while
    the process is idle.
    """
    import httpx2

    return httpx2.create_ssl_context()


# Network failures the SDK does not wrap while a body is being read surface
# as exceptions of the HTTP stack itself; these are the packages they come from.
TRANSPORT_PACKAGES = frozenset(
    {"aiohttp", "httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio"}
)


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool arguments from their JSON text.

    Text that is not a JSON object comes back as ``{"_raw": text}``, which
    no tool's schema accepts, so the registry answers the model with a clear
    validation error instead of running a guessed call.
    """
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def retry_after_from(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait: ``retry-after-ms`` (preferred, finer), ``retry-after``, else the
    reset time of the rate limit that ran out (:func:`rate_limit_reset_from`)."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    said = parse_retry_after(headers.get("retry-after"))
    return said if said is not None else rate_limit_reset_from(headers, now)


# OpenAI: x-ratelimit-{remaining,reset}-{requests,tokens}, the reset a Go
# duration ("1s", "6m0s", "20ms"). Anthropic: anthropic-ratelimit-<limit>-
# {remaining,reset}, the reset an RFC 3339 time.
_OPENAI_LIMITS = ("requests", "tokens")
_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(text: str | None) -> float | None:
    if not text:
        return None
    parts = _DURATION_PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _until(text: str | None, now: float) -> float | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def rate_limit_reset_from(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds until a rate limit resets, from the providers' rate-limit headers.

    The latest reset among the limits whose ``remaining`` is 0 (what the
    provider refused for); when none says so, the soonest reset.
    """
    now = time.time() if now is None else now
    found: list[tuple[bool, float]] = []
    for name in _OPENAI_LIMITS:
        seconds = _duration(headers.get(f"x-ratelimit-reset-{name}"))
        if seconds is not None:
            found.append((headers.get(f"x-ratelimit-remaining-{name}") == "0", seconds))
    for name in _ANTHROPIC_LIMITS:
        seconds = _until(headers.get(f"anthropic-ratelimit-{name}-reset"), now)
        if seconds is not None:
            out = headers.get(f"anthropic-ratelimit-{name}-remaining") == "0"
            found.append((out, seconds))
    ran_out = [s for out, s in found if out]
    if ran_out:
        return max(ran_out)
    return min((s for _, s in found), default=None)


def transport_message(exc: BaseException, sdk_message: str) -> str:
    """What to report for a network failure: the SDK's text hides the cause."""
    if not sdk_message:
        return f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    return f"{sdk_message} ({type(cause).__name__}: {cause})" if cause else sdk_message


def is_transport_error(exc: BaseException) -> bool:
    return type(exc).__module__.partition(".")[0] in TRANSPORT_PACKAGES


def _timed_out(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is a deadline that passed."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def cut_off(err: ModelError, exc: BaseException, streaming: bool) -> ModelError:
    """``err`` as a STREAM_CUT when the connection broke after the reply began.

    A transport failure once the stream is open is a reply cut off midway,
    not a timeout; it is retried all the same, but reported as what it is.
    """
    if not streaming or err.kind is not ErrorKind.TIMEOUT or _timed_out(exc):
        return err
    return ModelError(
        ErrorKind.STREAM_CUT,
        f"the stream was cut off mid-reply ({err.message})",
        status=err.status,
        provider=err.provider,
        model=err.model,
    )


# --- reading streamed JSON ----------------------------------------------
# Both providers read each streamed event as the parsed JSON the server sent,
# not as an SDK model (building one costs tens of microseconds, paid per token),
# so every field is checked for its type where it is read.


def field_of(obj: object, name: str) -> Any:
    """A member of a JSON object; None when it is absent or ``obj`` is no object."""
    return obj.get(name) if isinstance(obj, dict) else None


def list_of(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def text_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


def int_of(value: object) -> int | None:
    """A JSON integer (a token count, a block's index); None when ``value`` is none.

    A bool is no integer here, though Python counts it as one.
    """
    return value if isinstance(value, int) and not isinstance(value, bool) else None
