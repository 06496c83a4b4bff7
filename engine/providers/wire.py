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
import ssl
from collections.abc import Mapping
from functools import cache
from typing import Any

from engine.errors import parse_retry_after


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


def retry_after_from(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (preferred, finer) or ``retry-after``."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


def transport_message(exc: BaseException, sdk_message: str) -> str:
    """What to report for a network failure: the SDK's text hides the cause."""
    if not sdk_message:
        return f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    return f"{sdk_message} ({type(cause).__name__}: {cause})" if cause else sdk_message


def is_transport_error(exc: BaseException) -> bool:
    return type(exc).__module__.partition(".")[0] in TRANSPORT_PACKAGES


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
