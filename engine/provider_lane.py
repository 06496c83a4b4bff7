"""The global lane: at most N model calls at once per provider (or model), cluster-wide.

Every model call of every VP actor takes a slot of its provider's lane
before it is sent and gives it back when its stream ends, so a deployment
never has more calls in flight at a provider than the provider allows, and
a turn that finds every slot taken waits for one (its VP shows ``queued``)
instead of collecting 429s. The slots are leases in a :class:`SlotBook`
(:mod:`store.provider_state`: Redis for a cluster, SQLite for one
machine): a lease lapses on its own after ``lease_s``, so the slots of a
process that died come back.

Caps are keyed ``provider`` (``openai``) or ``provider:model``
(``openai:gpt-4o``); a call takes a slot of each cap that names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol

Clock = Callable[[], float]
# How often a waiting call looks for a free slot (seconds; doubling up to the max).
POLL_FIRST_S = 0.02
POLL_MAX_S = 0.25


class SlotBook(Protocol):
    """Counted leases by key (a semaphore whose permits expire)."""

    async def try_acquire(
        self, key: str, holder: str, limit: int, now: float, lease_s: float
    ) -> bool: ...

    async def release(self, key: str, holder: str) -> None: ...


class LocalSlots:
    """A book in this process only (an engine made without a store)."""

    def __init__(self) -> None:
        self._held: dict[str, dict[str, float]] = {}

    async def try_acquire(
        self, key: str, holder: str, limit: int, now: float, lease_s: float
    ) -> bool:
        held = {h: t for h, t in self._held.get(key, {}).items() if t > now}
        ok = holder in held or len(held) < limit
        if ok:
            held[holder] = now + lease_s
        self._held[key] = held
        return ok

    async def release(self, key: str, holder: str) -> None:
        self._held.get(key, {}).pop(holder, None)


class ProviderLane:
    """Takes the slots a model call needs, waiting while they are all taken."""

    def __init__(
        self,
        caps: Mapping[str, int],
        book: SlotBook,
        *,
        lease_s: float = 900.0,
        clock: Clock = time.time,
    ) -> None:
        self.caps = dict(caps)
        self.book = book
        self.lease_s = lease_s
        self.clock = clock

    def keys_for(self, model: str) -> list[tuple[str, int]]:
        """The caps ``model`` (``provider:name``) falls under, broadest first."""
        provider = model.partition(":")[0]
        return [(k, self.caps[k]) for k in (provider, model) if k in self.caps]

    @contextlib.asynccontextmanager
    async def slot(
        self, model: str, on_wait: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[None]:
        """Hold a slot of every cap of ``model`` for the block; ``on_wait`` once if it waits."""
        keys = self.keys_for(model)
        holder = uuid.uuid4().hex
        taken: list[str] = []
        try:
            for key, limit in keys:
                delay = POLL_FIRST_S
                waited = False
                while not await self.book.try_acquire(
                    key, holder, limit, self.clock(), self.lease_s
                ):
                    if not waited and on_wait is not None:
                        waited = True
                        await on_wait()
                    await asyncio.sleep(delay)
                    delay = min(POLL_MAX_S, delay * 2)
                taken.append(key)
            yield
        finally:
            for key in taken:
                # A release that cannot reach the store leaves a lease to lapse.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.book.release(key, holder))
