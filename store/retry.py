"""Writes that must not be lost: retried with back-off while the store is unreachable.

A turn's result and a group notice are what tell people that something
ended; dropping one leaves a VP "typing" forever. When the store is briefly
unreachable (a Redis restart, a failover) such a write waits and tries again
until it lands. Only :class:`~store.base.StoreUnavailable` is retried: any
other store error is a real refusal and is raised at once. Retrying is safe
for a turn's result because :meth:`~store.base.TurnLog.finish_turn` appends
nothing when an earlier attempt already did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from store.base import StoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 5.0

Sleep = Callable[[float], Awaitable[None]]


async def until_stored(
    write: Callable[[], Awaitable[T]],
    what: str,
    *,
    first_delay: float = FIRST_DELAY_S,
    max_delay: float = MAX_DELAY_S,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Run ``write`` until the store takes it; ``what`` names it in the log.

    The delay doubles from ``first_delay`` up to ``max_delay``. Cancelling the
    caller stops the retries.
    """
    delay = first_delay
    failures = 0
    while True:
        try:
            result = await write()
        except StoreUnavailable as exc:
            failures += 1
            if failures == 1:
                log.warning(
                    "store unavailable writing %s; retrying until it is back: %s", what, exc
                )
            await sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if failures:
            log.warning("wrote %s after %d failed attempts", what, failures)
        return result
