"""Sign-in sessions: begun at each login, checked on every request, ended by their owner.

A login (password or OpenID) begins a session: its token's ``jti`` is the
session's id, recorded in the store (``store.sessions``) with when, from
where (address, user agent) and how it began. A renewed token keeps its
session (and moves its expiry). Every HTTP request and WebSocket handshake
checks the session (``check_session``): a token whose session was ended is
refused everywhere. A token whose ``jti`` the store does not know (made by
``yeaft user token``, or before sessions were recorded) is not refused for
that: it lives until it expires or the password changes.

Ending sessions (``end``) also tells every gateway process, through the
store's directory log (``gateway.people``), to close the WebSockets those
sessions opened (close code 4401).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from fastapi import Request

from gateway.auth import AuthError, AuthFailure, issue_token, token_claims
from gateway.settings import GatewaySettings
from protocol.members import DirectoryEvent
from store.base import EventLog
from store.members import DIRECTORY_LOG
from store.sessions import SessionLog, SessionRecord, SignIn

# last_seen is written at most this often per session (seconds): a request
# reads the session anyway, but writing on every one would double the cost.
LAST_SEEN_EVERY_S = 300.0
MAX_USER_AGENT = 300


class SessionStore(SessionLog, EventLog, Protocol):
    """What sessions touch: their records and the directory log."""


@dataclass(frozen=True, slots=True)
class Begun:
    """A new session's token and its claims."""

    token: str
    claims: dict[str, Any]


def _client(request: Request) -> tuple[str, str]:
    address = request.client.host if request.client else "unknown"
    agent = request.headers.get("user-agent", "")[:MAX_USER_AGENT]
    return address, agent


async def begin(
    store: SessionLog,
    settings: GatewaySettings,
    username: str,
    request: Request,
    how: SignIn,
    *,
    ttl: timedelta | None = None,
    label: str = "",
) -> Begun:
    """Issue a token for a new session of ``username`` and record the session.

    ``ttl`` and ``label`` are an API token's (``gateway.api_tokens``): its
    lifetime and its name; a sign-in lives ``settings.jwt_ttl``.
    """
    api = how is SignIn.API_TOKEN
    token = issue_token(settings, username, ttl=ttl, api=api)
    claims = token_claims(settings, token)
    address, agent = _client(request)
    now = time.time()
    await store.record_session(
        SessionRecord(
            id=str(claims["jti"]),
            username=username,
            created=now,
            expires=float(claims["exp"]),
            last_seen=now,
            how=how,
            user_agent=agent,
            address=address,
            label=label,
        )
    )
    return Begun(token, claims)


def session_id(claims: Mapping[str, Any]) -> str:
    """The session a verified token belongs to ('' for a token without a ``jti``)."""
    jti = claims.get("jti")
    return jti if isinstance(jti, str) else ""


async def check_session(store: SessionLog, claims: Mapping[str, Any]) -> None:
    """Refuse a token whose session was ended; note that the session was seen."""
    sid = session_id(claims)
    if not sid:
        return
    record = await store.get_session(sid)
    if record is None:
        return  # a session the store never recorded (see the module docstring)
    if record.ended is not None or record.username != str(claims["sub"]):
        raise AuthError(AuthFailure.SESSION_ENDED, "this session was ended: log in again")
    now = time.time()
    if now - record.last_seen >= LAST_SEEN_EVERY_S:
        await store.touch_session(sid, now)


async def renewed(
    store: SessionLog, claims: Mapping[str, Any], fresh: str, settings: GatewaySettings
) -> None:
    """A session's token was renewed: the session lives as long as the new token."""
    sid = session_id(claims)
    if sid:
        new = token_claims(settings, fresh)
        await store.touch_session(sid, time.time(), float(new["exp"]))


async def end(
    store: SessionStore, username: str, ids: Sequence[str] | None, keep: str = ""
) -> list[str]:
    """End sessions of ``username`` (``ids``, or all but ``keep``) and close their sockets."""
    ended = await store.end_sessions(username, ids, time.time(), keep=keep)
    if ended:
        event = DirectoryEvent(action="sessions_ended", user=username, sessions=ended)
        await store.append_event(DIRECTORY_LOG, event)
    return ended


def session_view(record: SessionRecord, current: str) -> dict[str, Any]:
    """A session as ``GET /api/me/sessions`` shows it."""
    return {
        "id": record.id,
        "current": record.id == current,
        "how": record.how.value,
        "created": record.created,
        "expires": record.expires,
        "lastSeen": record.last_seen,
        "userAgent": record.user_agent,
        "address": record.address,
    }
