"""Small limiters: a token bucket per connection, an abuse meter, a login throttle.

All take the clock as a parameter (``time.monotonic`` by default) so they are
exact in tests, and none of them sleeps: they only answer "allowed?".
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

Clock = Callable[[], float]


class TokenBucket:
    """``rate`` frames per second on average, with bursts of up to ``burst``."""

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()

    def take(self) -> bool:
        """Spend one token if there is one."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def retry_after(self) -> float:
        """Seconds until the next token, for the client's back-off."""
        return max(0.0, (1.0 - self._tokens) / self.rate)


class AbuseMeter:
    """Counts events in a sliding window; trips when more than ``limit`` fall inside it."""

    def __init__(self, limit: int, window: float, clock: Clock = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._stamps: deque[float] = deque()

    def hit(self) -> bool:
        """Record one event; True when the limit is now exceeded."""
        now = self._clock()
        self._stamps.append(now)
        while self._stamps and self._stamps[0] <= now - self.window:
            self._stamps.popleft()
        return len(self._stamps) > self.limit


class LoginThrottle:
    """Refuses logins for a name after too many recent failures for it.

    Slow hashing already caps guesses per core; this caps them per account,
    whatever the number of attackers' connections. The table is pruned as it
    is used, so a flood of made-up names cannot grow it without bound.
    """

    def __init__(
        self, max_failures: int, window: float, clock: Clock = time.monotonic, size: int = 10_000
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._size = size
        self._failures: dict[str, deque[float]] = {}

    def blocked(self, username: str) -> bool:
        """Whether logins for ``username`` are refused right now."""
        stamps = self._recent(username.lower())
        return stamps is not None and len(stamps) >= self.max_failures

    def failed(self, username: str) -> None:
        """Record a failed login."""
        key = username.lower()
        if key not in self._failures and len(self._failures) >= self._size:
            self._prune()
        self._failures.setdefault(key, deque()).append(self._clock())

    def succeeded(self, username: str) -> None:
        """Forget the failures of a name once its owner got in."""
        self._failures.pop(username.lower(), None)

    def _recent(self, key: str) -> deque[float] | None:
        stamps = self._failures.get(key)
        if stamps is None:
            return None
        cutoff = self._clock() - self.window
        while stamps and stamps[0] <= cutoff:
            stamps.popleft()
        if not stamps:
            del self._failures[key]
            return None
        return stamps

    def _prune(self) -> None:
        for key in list(self._failures):
            self._recent(key)
        if len(self._failures) >= self._size:
            # Still full of live entries: drop the oldest half rather than grow.
            oldest = sorted(self._failures, key=lambda k: self._failures[k][-1])
            for key in oldest[: len(oldest) // 2]:
                del self._failures[key]
