"""Session tokens (JWT, HS256) and where a request carries one.

A token's payload is ``{sub, username, jti, iat, exp}``, and ``kind: "api"``
for an API token a person made for a program (``gateway.api_tokens``). ``verify_token``
raises :class:`AuthError` for a missing, malformed, forged or expired token,
and nothing else. Logging out clears the cookie; a token stays valid until
it expires (``YEAFT_JWT_TTL``), its user's password is changed (tokens
issued before ``passwordChangedAt`` are refused: ``gateway.accounts``), or
its session is ended (the ``jti`` names a session the store keeps:
``gateway.sessions``).

A client presents its token in one of three places, tried in this order:
an ``Authorization: Bearer`` header, a ``token`` query parameter (browsers
cannot set headers on a WebSocket), or the ``yeaft_session`` cookie that
``POST /api/login`` sets.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import jwt

from gateway.settings import GatewaySettings

SESSION_COOKIE = "yeaft_session"
ALGORITHM = "HS256"
API_TOKEN_KIND = "api"


class AuthFailure(StrEnum):
    """Why a request was not authenticated."""

    MISSING = "missing"
    INVALID = "invalid"
    EXPIRED = "expired"
    UNKNOWN_USER = "unknown_user"
    PASSWORD_CHANGED = "password_changed"
    SESSION_ENDED = "session_ended"
    DISABLED = "account_disabled"
    BAD_ORIGIN = "bad_origin"


class AuthError(Exception):
    """Authentication failed; ``reason`` says how, ``message`` says it to a person."""

    def __init__(self, reason: AuthFailure, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def issue_token(
    settings: GatewaySettings,
    username: str,
    jti: str | None = None,
    *,
    ttl: timedelta | None = None,
    api: bool = False,
) -> str:
    """A signed session token for ``username``, valid for ``ttl`` (``settings.jwt_ttl``).

    ``jti`` names the session (``gateway.sessions``): a renewed token keeps
    its session's; a new one gets a fresh id. ``api`` marks an API token
    (``gateway.api_tokens``), which is never renewed.
    """
    now = int(time.time())
    payload: dict[str, Any] = {
        "sub": username,
        "username": username,
        "jti": jti or uuid.uuid4().hex,
        "iat": now,
        "exp": now + int((ttl or settings.jwt_ttl).total_seconds()),
    }
    if api:
        payload["kind"] = API_TOKEN_KIND
    return jwt.encode(payload, settings.jwt_key(), algorithm=ALGORITHM)


def is_api_token(claims: Mapping[str, Any]) -> bool:
    """Whether verified claims are an API token's (kept to its own expiry, never renewed)."""
    return claims.get("kind") == API_TOKEN_KIND


def token_claims(settings: GatewaySettings, token: str | None) -> dict[str, Any]:
    """The verified claims of ``token``; raises :class:`AuthError`."""
    if not token:
        raise AuthError(AuthFailure.MISSING, "no session token: log in first")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            settings.jwt_key(),
            algorithms=[ALGORITHM],
            options={"require": ["exp", "iat", "sub"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise AuthError(AuthFailure.EXPIRED, "the session token has expired") from exc
    except jwt.PyJWTError as exc:
        raise AuthError(AuthFailure.INVALID, "the session token is not valid") from exc
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise AuthError(AuthFailure.INVALID, "the session token names no user")
    return claims


def verify_token(settings: GatewaySettings, token: str | None) -> str:
    """The username a valid token was issued to; raises :class:`AuthError`."""
    return str(token_claims(settings, token)["sub"])


def seconds_left(claims: Mapping[str, Any]) -> float:
    """How long a verified token has left to live."""
    return float(claims["exp"]) - time.time()


def find_token(
    headers: Mapping[str, str], query: Mapping[str, str], cookies: Mapping[str, str]
) -> tuple[str | None, bool]:
    """The token a request carries and whether it came from the cookie.

    The cookie is the only source a browser attaches on its own, so callers
    apply the origin check (:func:`check_origin`) only to cookie tokens.
    """
    header = headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip(), False
    if query.get("token"):
        return query["token"], False
    if cookies.get(SESSION_COOKIE):
        return cookies[SESSION_COOKIE], True
    return None, False


def check_origin(settings: GatewaySettings, headers: Mapping[str, str]) -> None:
    """Refuse a cookie-authenticated request a page on another site made.

    Browsers send ``Origin`` on WebSocket handshakes and on cross-site
    requests; a page elsewhere must not ride on the user's cookie (cross-site
    WebSocket hijacking, CSRF). A request without ``Origin`` did not come
    from a browser page, so it is not this check's concern.
    """
    origin = headers.get("origin")
    if not origin or origin in settings.allowed_origins:
        return
    # "null" is the origin of sandboxed frames and local files: never same-site.
    host = headers.get("host", "").lower()
    if origin != "null" and urlsplit(origin).netloc.lower() == host:
        return
    raise AuthError(
        AuthFailure.BAD_ORIGIN,
        f"origin {origin!r} may not use this server's session cookie "
        "(add it to YEAFT_ALLOWED_ORIGINS)",
    )
