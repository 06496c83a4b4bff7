"""Group commit for the event log: the appends waiting at once go to the store in one write.

Every VP of a process streams through that process's one store client, and
each flushed stretch of text is an append. Written one by one, an append
costs a store round trip of its own (embedded: a hop to the store thread, a
``BEGIN IMMEDIATE``/``COMMIT`` pair on the database's one write lock, and a
wake-up to every waiting process; Redis: a command and its reply); on a busy
machine those, not the rows, were most of the store's time.
:class:`AppendQueue` therefore sends every append that was waiting when the
previous write returned in the next write: alone, an append is written at
once, as before; under load the writes get fewer and larger instead of
queueing one by one.

Each caller still gets its own seqs, in the order it asked; a group's events
keep their order (the backend takes the seqs in arrival order); a failure
reaches exactly the appends it concerns (the embedded store's transaction
fails whole, a Redis batch reports per append).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence

from store.events import EncodedEvent

Append = tuple[str, list[EncodedEvent]]
"""One caller's append: a group and its events, in order."""
Outcome = list[int] | Exception
"""An append's seqs, or why it failed."""
WriteBatch = Callable[[Sequence[Append]], Awaitable[Sequence[Outcome]]]
"""Writes the appends of one batch, in order; one outcome per append."""
Written = Callable[[Collection[str]], None]
"""Called with the groups that got events, once they are stored."""

_Pending = tuple[Append, asyncio.Future[list[int]]]


class AppendQueue:
    """The appends of one store client waiting for the next shared write."""

    def __init__(self, write: WriteBatch, written: Written | None = None) -> None:
        self._write_batch = write
        self._written = written
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self.writes = 0  # how many writes the appends took (for tests and figures)

    async def append(self, group_id: str, events: list[EncodedEvent]) -> list[int]:
        """Append ``events`` to ``group_id`` (in order) with whatever else is waiting."""
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._pending.append(((group_id, events), fut))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_all())
        return await fut

    async def _write_all(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._write(batch)
        except BaseException as exc:
            # Cancelled (the loop is closing): nobody is left to write the rest.
            rest, self._pending = self._pending, []
            _fail(rest, exc)
            raise
        finally:
            self._writer = None

    async def _write(self, batch: list[_Pending]) -> None:
        try:
            outcomes = await self._write_batch([append for append, _ in batch])
        except BaseException as exc:
            _fail(batch, exc)
            if isinstance(exc, Exception):
                return
            raise
        self.writes += 1
        stored = {
            append[0]
            for (append, _), got in zip(batch, outcomes, strict=True)
            if not isinstance(got, Exception)
        }
        if stored and self._written is not None:
            self._written(stored)
        for (_, fut), got in zip(batch, outcomes, strict=True):
            if fut.done():
                continue
            if isinstance(got, Exception):
                fut.set_exception(got)
            else:
                fut.set_result(got)


def _fail(batch: list[_Pending], exc: BaseException) -> None:
    for _, fut in batch:
        if fut.done():
            continue
        if isinstance(exc, Exception):
            fut.set_exception(exc)
        else:
            fut.cancel()
