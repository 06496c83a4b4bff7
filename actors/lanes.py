"""Session lanes: turns of one key run one at a time, in arrival order.

Different keys run concurrently, under one global cap for the process. This
is the two-level queue (session lane inside a global lane) that keeps a
conversation's history linear without serialising unrelated work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class Lanes:
    def __init__(self, max_concurrent: int) -> None:
        self._global = asyncio.Semaphore(max_concurrent)
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}

    async def run(self, key: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` in the lane ``key``; asyncio.Lock is FIFO, so order holds."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            async with lock, self._global:
                return await fn()
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                # Forget idle lanes so a long-lived actor does not accumulate them.
                del self._waiting[key]
                self._locks.pop(key, None)
