"""Session lanes: turns of one key run one at a time, in arrival order.

Different keys run concurrently, under one global cap for the process. This
is the two-level queue (session lane inside a global lane) that keeps a
conversation's history linear without serialising unrelated work.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class Lanes:
    """One FIFO lane per key inside a global concurrency cap.

    ``hold(key)`` waits for the key's lane (asyncio.Lock wakes waiters in
    order, so arrival order holds) and then for a global slot. Idle lanes are
    forgotten, so a long-lived actor does not accumulate them.
    """

    def __init__(self, max_concurrent: int) -> None:
        self._global = asyncio.Semaphore(max_concurrent)
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}

    def busy(self, key: str) -> bool:
        """Whether a turn holds the lane ``key`` or waits for it."""
        return key in self._waiting

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        """Hold the lane ``key`` (and a global slot) for the body of the block."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            async with lock, self._global:
                yield
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                self._locks.pop(key, None)
