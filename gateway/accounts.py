"""Looking after accounts: a new password, an unlock, and what the login door needs of them.

``set_password`` and ``unlock_user`` are what ``yeaft user passwd`` and
``yeaft user unlock`` run against the store (and the admin route
``DELETE /api/admin/lockouts/{name}`` runs ``unlock_user`` too). The
failed-login counts live in the store (``store.logins``), so an unlock
there lifts the lockout on every gateway process at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Protocol

from fastapi import Request

from gateway.auth import AuthError, AuthFailure
from gateway.errors import GatewayError
from gateway.lockout import lift_lockout, wait_words
from gateway.sessions import check_session
from gateway.users import UserError, check_password, hash_password
from protocol import ErrorCode
from store.base import UserStore
from store.disabled import DisabledAccounts
from store.logins import LoginLog
from store.sessions import SessionLog

PASSWORD_CHANGED_AT = "passwordChangedAt"


# The longest display name, after runs of white space are made one space.
MAX_DISPLAY_NAME = 80


def display_name(raw: str | None) -> str | None:
    """``raw`` as a display name is kept (None: no name), or a typed refusal."""
    name = " ".join((raw or "").split())
    if len(name) > MAX_DISPLAY_NAME:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"a display name is at most {MAX_DISPLAY_NAME} characters",
            field="displayName",
            detail={"limit": MAX_DISPLAY_NAME},
        )
    return name or None


class AccountStore(UserStore, LoginLog, Protocol):
    """What looking after an account touches: user records and failed-login counts."""


class SessionUsers(UserStore, SessionLog, DisabledAccounts, Protocol):
    """What checking a token's user touches: user records, sessions and disabled marks."""


async def set_password(store: AccountStore, username: str, password: str) -> None:
    """Give ``username`` a new password; raises :class:`UserError` (no such user, weak password).

    A new password also lifts any login lockout of the account.
    """
    user = await store.get_user(username)
    if user is None:
        raise UserError(f"no user {username!r}")
    check_password(username, password)
    password_hash = await asyncio.to_thread(hash_password, password)
    await store.put_user({**user, "passwordHash": password_hash, PASSWORD_CHANGED_AT: time.time()})
    await lift_lockout(store, username)


async def unlock_user(store: AccountStore, username: str) -> bool:
    """Lift every login lockout of ``username``, on every gateway; UserError when unknown.

    True when the account was locked.
    """
    if await store.get_user(username) is None:
        raise UserError(f"no user {username!r}")
    return await lift_lockout(store, username)


async def session_user(store: SessionUsers, claims: Mapping[str, Any]) -> str:
    """The user of a verified token; AuthError when gone, disabled, re-passworded since
    it was issued, or when its session was ended (``gateway.sessions``)."""
    username = str(claims["sub"])
    user = await store.get_user(username)
    if user is None:
        raise AuthError(AuthFailure.UNKNOWN_USER, "the user of this session no longer exists")
    await check_enabled(store, username)
    changed = user.get(PASSWORD_CHANGED_AT)
    # Whole seconds, as ``iat`` is: a login in the second of the change stays valid.
    if isinstance(changed, int | float) and int(claims.get("iat", 0)) < int(changed):
        raise AuthError(
            AuthFailure.PASSWORD_CHANGED,
            "the password was changed after this session began: log in again",
        )
    await check_session(store, claims)
    return username


async def check_enabled(store: DisabledAccounts, username: str) -> None:
    """AuthError (``account_disabled``) when an administrator disabled ``username``."""
    if await store.disabled_mark(username) is not None:
        raise AuthError(AuthFailure.DISABLED, DISABLED_MESSAGE)


DISABLED_MESSAGE = "this account is disabled: ask an administrator"


def client_address(request: Request) -> str:
    """The address a request came from (uvicorn resolves trusted proxies' forwarding headers)."""
    return request.client.host if request.client else "unknown"


def locked_out(seconds: float) -> GatewayError:
    """The refusal of a login from a locked-out address: 429 with ``retryAfter``."""
    return GatewayError(
        ErrorCode.RATE_LIMITED,
        f"too many failed logins for this user from your address: try again in "
        f"{wait_words(seconds)}, or ask an administrator to lift the lockout",
        detail={"reason": "login_locked"},
        retry_after=round(seconds, 1),
    )
