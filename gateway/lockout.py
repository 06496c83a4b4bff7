"""Login lockout: failed logins counted in the store, so every gateway sees them.

The counting and locking rules are ``store.logins``'s: failures are
counted per account across addresses and gateways; when an account has
had ``YEAFT_LOGIN_MAX_FAILURES`` within ``YEAFT_LOGIN_WINDOW_S``, every
address that failed for it (and any that fails while the lock lasts) is
refused for ``YEAFT_LOGIN_LOCKOUT_S``, the right password included, so the
lockout is no oracle. An address that has not failed for the account is
never refused: someone guessing ann's password locks themselves out, and
ann logs in from her own machine as usual. An address that fails
``YEAFT_LOGIN_ADDRESS_MAX_FAILURES`` times over any accounts is refused for
every account, so it cannot spray guesses across many. Each guess also
costs a slow hash.

An unlock (``DELETE /api/admin/lockouts/{name}``, ``yeaft user unlock``, a
new password) forgets the account's failures and locks in the store: on
every gateway at once. Account names are counted lowercased, as a person
may type ``Ann`` or ``ann``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from store.logins import Lockouts, LoginLog, LoginRules

Clock = Callable[[], float]


def wait_words(seconds: float) -> str:
    """``seconds`` for a person: ``"4 min 10 s"``, ``"45 s"``."""
    whole = max(1, math.ceil(seconds))
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def account_key(username: str) -> str:
    """The name an account's failures are counted under."""
    return username.lower()


class LoginLockout:
    """The gateway's side of the lockout: the rules, a clock, and the store's counts.

    Each method takes the store: it is opened lazily by the runtime, after
    this object is made. Results are seconds from now, on ``clock``.
    """

    def __init__(
        self,
        max_failures: int,
        window: float,
        lockout: float,
        address_max_failures: int,
        clock: Clock = time.time,
    ) -> None:
        self.rules = LoginRules(max_failures, address_max_failures, window, lockout)
        self.clock = clock

    async def retry_after(self, store: LoginLog, username: str, address: str) -> float | None:
        """Seconds until ``address`` may try ``username`` again; None when it may now."""
        now = self.clock()
        until = await store.login_locked_until(account_key(username), address, now)
        return None if until is None else until - now

    async def failed(self, store: LoginLog, username: str, address: str) -> float | None:
        """Count a failed login; seconds ``address`` is now locked out for, or None."""
        now = self.clock()
        key = account_key(username)
        until = await store.record_login_failure(key, address, now, self.rules)
        return None if until is None else until - now

    async def succeeded(self, store: LoginLog, username: str, address: str) -> None:
        """Forget this address's failures for the account once its owner got in."""
        await store.forget_login_failures(account_key(username), address)

    async def lockouts(self, store: LoginLog) -> Lockouts:
        """The locks in force now."""
        return await store.lockouts(self.clock())


async def lift_lockout(store: LoginLog, username: str) -> bool:
    """Forget every failure and lock of ``username``; True when it was locked."""
    return await store.lift_lockout(account_key(username))
