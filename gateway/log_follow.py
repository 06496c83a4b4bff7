"""Following one of the store's shared logs (the directory, the activity) from its head.

A gateway process keeps one reader per such log: it starts at the log's
head when it first reads (what came before is old news), blocks for new
events, skips a gap the log's retention made, and tries a failed read again,
a little later each time, so a store that restarts loses no reader.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from store.base import Store
from store.events import StoredEvent

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 5.0


async def follow(
    store_of: Callable[[], Awaitable[Store]],
    log_name: str,
    wait_s: float,
    ready: asyncio.Event,
    what: str,
) -> AsyncIterator[tuple[Store, list[StoredEvent]]]:
    """Each batch of events appended to ``log_name`` since the first read (``ready`` set then).

    ``what`` names the reader in the log when a read fails.
    """
    position: int | None = None
    backoff = FIRST_BACKOFF_S
    while True:
        try:
            store = await store_of()
            if position is None:
                position = await store.head(log_name)
                ready.set()
            batch = await store.read_events(log_name, position, wait=wait_s)
        except Exception:
            log.warning("%s: read failed", what, exc_info=True)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            continue
        backoff = FIRST_BACKOFF_S
        if batch.gap:
            position = batch.last_seq  # past the retention: nothing to replay
        if batch.events:
            position = batch.events[-1].seq
        yield store, batch.events
