"""Login lockout: failed logins are counted per (username, client address).

After ``max_failures`` failed logins for one name from one address within
``window`` seconds, that address may not log in as that name for
``lockout`` seconds; every refusal says how long is left. Keying by address
as well as name is what keeps the lockout from being a weapon: someone
guessing ``ann``'s password from their machine locks only themselves out,
and ann logs in from hers as usual. (Guesses stay capped per address, and
each guess costs a slow hash.)

The counts live in the gateway process. An unlock has to reach every
process, so it is a timestamp in the user's record instead
(``loginUnlockedAt``, written by ``yeaft user unlock`` and ``yeaft user
passwd``): failures and locks older than it no longer count. Stamps are
wall-clock seconds, the same clock as that timestamp.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]

UNLOCKED_AT = "loginUnlockedAt"
"""The user-record field of the last admin unlock or password change (epoch seconds)."""


@dataclass(slots=True)
class _Entry:
    failures: deque[float] = field(default_factory=deque)
    locked_at: float | None = None
    locked_until: float = 0.0


def unlocked_at(user: Mapping[str, Any] | None) -> float | None:
    """When ``user``'s record was last unlocked, or None."""
    value = user.get(UNLOCKED_AT) if user else None
    return float(value) if isinstance(value, int | float) else None


def wait_words(seconds: float) -> str:
    """``seconds`` for a person: ``"4 min 10 s"``, ``"45 s"``."""
    whole = max(1, math.ceil(seconds))
    minutes, rest = divmod(whole, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


class LoginLockout:
    """Counts failed logins per (name, address) and locks a pair out for a while.

    The table is pruned as it is used, so a flood of made-up names or
    addresses cannot grow it without bound.
    """

    def __init__(
        self,
        max_failures: int,
        window: float,
        lockout: float,
        clock: Clock = time.time,
        size: int = 10_000,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self.lockout = lockout
        self._clock = clock
        self._size = size
        self._table: dict[tuple[str, str], _Entry] = {}

    def retry_after(self, username: str, address: str, since: float | None = None) -> float | None:
        """Seconds until ``address`` may try ``username`` again; None when it may now.

        ``since`` is the user's last unlock: anything before it is forgotten.
        """
        key = (username.lower(), address)
        entry = self._table.get(key)
        if entry is None:
            return None
        now = self._clock()
        self._forget(entry, now, since)
        if entry.locked_at is None and not entry.failures:
            del self._table[key]
            return None
        left = entry.locked_until - now
        return left if entry.locked_at is not None and left > 0 else None

    def failed(self, username: str, address: str, since: float | None = None) -> float | None:
        """Record a failed login; the lockout's length when this one started it."""
        key = (username.lower(), address)
        if key not in self._table and len(self._table) >= self._size:
            self._prune()
        entry = self._table.setdefault(key, _Entry())
        now = self._clock()
        self._forget(entry, now, since)
        entry.failures.append(now)
        if len(entry.failures) < self.max_failures:
            return None
        entry.failures.clear()
        entry.locked_at, entry.locked_until = now, now + self.lockout
        return self.lockout

    def succeeded(self, username: str, address: str) -> None:
        """Forget the failures of a pair once its owner got in."""
        self._table.pop((username.lower(), address), None)

    def _forget(self, entry: _Entry, now: float, since: float | None) -> None:
        cutoff = now - self.window
        if since is not None:
            cutoff = max(cutoff, since)
        while entry.failures and entry.failures[0] <= cutoff:
            entry.failures.popleft()
        if entry.locked_at is not None and (
            entry.locked_until <= now or (since is not None and entry.locked_at <= since)
        ):
            entry.locked_at, entry.locked_until = None, 0.0

    def _prune(self) -> None:
        now = self._clock()
        for key in list(self._table):
            entry = self._table[key]
            self._forget(entry, now, None)
            if entry.locked_at is None and not entry.failures:
                del self._table[key]
        if len(self._table) >= self._size:
            # Still full of live entries: drop the least recent half rather than grow.
            def last(key: tuple[str, str]) -> float:
                entry = self._table[key]
                return max(entry.failures[-1] if entry.failures else 0.0, entry.locked_until)

            for key in sorted(self._table, key=last)[: len(self._table) // 2]:
                del self._table[key]
