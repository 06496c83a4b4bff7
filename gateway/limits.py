"""Small limiters: token buckets per connection and per user, an abuse meter,
a lag meter, a login throttle.

All take the clock as a parameter (``time.monotonic`` by default) so they are
exact in tests, and none of them sleeps: they only answer "allowed?". The one
task here, :meth:`LagProbe.run`, feeds a :class:`LagMeter`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

Clock = Callable[[], float]

# A frame read this much later than it could have been was delayed by the
# server (a late event loop, a slow handler), not sent in a burst by its client.
LAG_THRESHOLD_S = 0.1


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


class UserBuckets:
    """One token bucket per user, shared by all of that user's connections.

    A connection takes the bucket when it opens and gives it back when it
    closes; the bucket is forgotten with the last one, so the table holds only
    users connected now.
    """

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[TokenBucket, int]] = {}

    def acquire(self, username: str) -> TokenBucket:
        bucket, holders = self._buckets.get(username) or (
            TokenBucket(self.rate, self.burst, self._clock),
            0,
        )
        self._buckets[username] = (bucket, holders + 1)
        return bucket

    def release(self, username: str) -> None:
        entry = self._buckets.get(username)
        if entry is None:
            return
        bucket, holders = entry
        if holders <= 1:
            del self._buckets[username]
        else:
            self._buckets[username] = (bucket, holders - 1)

    def __len__(self) -> int:
        return len(self._buckets)


class LagMeter:
    """Remembers when the server last fell behind its clients by more than ``threshold``.

    While the server lags, frames wait unread and then arrive in a burst that
    a client did not send as one; a rate-limit refusal in that time is not
    held against the client as abuse.
    """

    def __init__(self, threshold: float = LAG_THRESHOLD_S, clock: Clock = time.monotonic) -> None:
        self.threshold = threshold
        self._clock = clock
        self._last: float | None = None

    def record(self, lag: float) -> None:
        """Note a delay of ``lag`` seconds the server caused (a late loop, a slow handler)."""
        if lag > self.threshold:
            self._last = self._clock()

    def lagged_within(self, seconds: float) -> bool:
        """Whether the server lagged during the last ``seconds``."""
        return self._last is not None and self._clock() - self._last <= seconds


# The probe waits once no frame has come for this long: lag matters only to
# a rate-limit refusal, and a refusal needs frames.
PROBE_QUIET_S = 10.0


class LagProbe:
    """Measures how late this event loop wakes a sleeper, into ``meter``, while frames come in.

    It sleeps ``interval`` seconds at a time and records how much later it
    woke. Once no frame has come for ``quiet`` seconds it waits for the next
    one instead, so an idle server does not wake 20 times a second for it.
    """

    def __init__(
        self,
        meter: LagMeter,
        interval: float = 0.05,
        quiet: float = PROBE_QUIET_S,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.meter = meter
        self.interval = interval
        self.quiet = quiet
        self._clock = clock
        self._sleep = sleep
        self._last_frame = -math.inf
        self._frames = asyncio.Event()

    def frame(self) -> None:
        """A client frame came in: probe again if the probe was waiting for one."""
        self._last_frame = self._clock()
        if not self._frames.is_set():
            self._frames.set()

    @property
    def waiting(self) -> bool:
        """Whether the probe waits for a frame (no frame for ``quiet`` seconds)."""
        return not self._frames.is_set()

    async def run(self) -> None:
        """Probe for ever (cancel to stop)."""
        while True:
            if self._clock() - self._last_frame > self.quiet:
                self._frames.clear()
                await self._frames.wait()
            before = self._clock()
            await self._sleep(self.interval)
            self.meter.record(self._clock() - before - self.interval)


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
