"""Chat frames of one connection, handled off its receive loop, a few at a time.

A chat frame waits for the coordinator (it is acknowledged once stored). A
receive loop that waited with it would stop reading the socket: the
WebSocket layer reads nothing more from a connection until the application
has taken the message it holds, so pings, pongs and cancels would wait
behind chat frames, the server's keepalive pings would go unanswered (1011),
and the frames that follow would be charged to the client late, in a burst.
So each chat frame runs in a task of its own, at most ``limit`` at once per
connection, and a frame that finds every place taken is refused at once
(``busy``) instead of being waited for.

Frames for one group keep their order: each task first takes its group's
lock, and asyncio hands a lock to waiters in the order they asked, which is
the order the frames arrived. Frames for different groups do not wait for
each other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.limits import Clock

log = logging.getLogger(__name__)

# Weight of the newest duration in the mean time one frame takes.
_ALPHA = 0.2
# Until a frame has been handled, one is assumed to take this long.
_FIRST_ESTIMATE_S = 1.0


class InFlight:
    """At most ``limit`` pieces of work at once, in order per key, each in its own task."""

    def __init__(self, limit: int, clock: Clock = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._mean: float | None = None

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, key: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Run ``work`` after the earlier work for ``key``; False (and nothing runs) when full."""
        if len(self._tasks) >= self.limit:
            return False
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        task = asyncio.create_task(self._run(key, lock, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, key: str, lock: asyncio.Lock, work: Callable[[], Awaitable[None]]) -> None:
        try:
            async with lock:
                started = self._clock()
                try:
                    await work()
                except Exception:
                    # The work reports its own errors; this is a bug, not a refusal.
                    log.exception("a chat frame's handler failed")
                self._learn(self._clock() - started)
        finally:
            _, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def _learn(self, took: float) -> None:
        self._mean = took if self._mean is None else (1 - _ALPHA) * self._mean + _ALPHA * took

    def retry_after(self) -> float:
        """Seconds until a place is likely free: about the time one piece of work takes."""
        mean = self._mean if self._mean is not None else _FIRST_ESTIMATE_S
        return max(0.1, round(mean, 1))

    def cancel(self) -> None:
        """Cancel all the work (the connection closed: nobody would read the answers)."""
        for task in self._tasks:
            task.cancel()
