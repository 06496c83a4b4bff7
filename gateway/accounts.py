"""Looking after accounts: a new password, an unlock, and what the login door needs of them.

``set_password`` and ``unlock_user`` are what ``yeaft user passwd`` and
``yeaft user unlock`` run against the store. Both stamp the user's record
with ``loginUnlockedAt``; every gateway process reads that stamp at login
(:func:`login_unlocked_at`), so the failures and lockouts it counted
before it no longer count, whichever process counted them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from fastapi import Request

from gateway.auth import AuthError, AuthFailure
from gateway.errors import GatewayError
from gateway.lockout import UNLOCKED_AT, unlocked_at, wait_words
from gateway.users import USERNAME_RE, UserError, check_password, hash_password
from protocol import ErrorCode
from store.base import UserStore

PASSWORD_CHANGED_AT = "passwordChangedAt"


async def set_password(store: UserStore, username: str, password: str) -> None:
    """Give ``username`` a new password; raises :class:`UserError` (no such user, weak password).

    A new password also lifts any login lockout of the account.
    """
    user = await store.get_user(username)
    if user is None:
        raise UserError(f"no user {username!r}")
    check_password(username, password)
    password_hash = await asyncio.to_thread(hash_password, password)
    now = time.time()
    await store.put_user(
        {**user, "passwordHash": password_hash, PASSWORD_CHANGED_AT: now, UNLOCKED_AT: now}
    )


async def unlock_user(store: UserStore, username: str) -> None:
    """Lift every login lockout of ``username``, on every gateway; UserError when unknown."""
    user = await store.get_user(username)
    if user is None:
        raise UserError(f"no user {username!r}")
    await store.put_user({**user, UNLOCKED_AT: time.time()})


async def login_unlocked_at(store: UserStore, username: str) -> float | None:
    """When ``username`` was last unlocked (None for never, or for no such user)."""
    if not USERNAME_RE.fullmatch(username):
        return None
    return unlocked_at(await store.get_user(username))


async def session_user(store: UserStore, claims: Mapping[str, Any]) -> str:
    """The user of a verified token; AuthError when gone or re-passworded since it was issued."""
    username = str(claims["sub"])
    user = await store.get_user(username)
    if user is None:
        raise AuthError(AuthFailure.UNKNOWN_USER, "the user of this session no longer exists")
    changed = user.get(PASSWORD_CHANGED_AT)
    # Whole seconds, as ``iat`` is: a login in the second of the change stays valid.
    if isinstance(changed, int | float) and int(claims.get("iat", 0)) < int(changed):
        raise AuthError(
            AuthFailure.PASSWORD_CHANGED,
            "the password was changed after this session began: log in again",
        )
    return username


def client_address(request: Request) -> str:
    """The address a request came from (uvicorn resolves trusted proxies' forwarding headers)."""
    return request.client.host if request.client else "unknown"


def locked_out(seconds: float) -> GatewayError:
    """The refusal of a login from a locked-out address: 429 with ``retryAfter``."""
    return GatewayError(
        ErrorCode.RATE_LIMITED,
        f"too many failed logins for this user from your address: try again in "
        f"{wait_words(seconds)}",
        detail={"reason": "login_locked"},
        retry_after=round(seconds, 1),
    )
