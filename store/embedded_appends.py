"""Group commit for the embedded store's event log: the appends waiting at once share a write.

Every VP of a process streams through the one store connection of that
process, and each flushed stretch of text is an append. One transaction per
append costs a ``BEGIN IMMEDIATE``/``COMMIT`` pair (the database's write
lock, shared with every other process), a hop to the store thread and back,
and a wake-up to every process that waits for events; on a busy machine
those, not the rows, were most of the store's time. :class:`AppendQueue`
therefore writes, in one transaction, every append that was waiting when
the previous one committed: alone, an append is written at once, as before;
under load the writes get fewer and larger instead of queueing one by one.

Each caller still gets its own seqs, in the order it asked; a group's events
keep their order (the seqs are taken in the transaction, in arrival order);
a failed transaction fails every append in it, and nothing of it is stored.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Collection

from store.events import EncodedEvent
from store.sqlite import write_txn

Run = Callable[[Callable[[sqlite3.Connection], list[list[int]]]], Awaitable[list[list[int]]]]
"""Runs one operation on the store's writing connection (``SQLiteThread.run``)."""
AppendOne = Callable[[sqlite3.Connection, str, EncodedEvent], int]
"""Appends one encoded event to a group inside an open write transaction; returns its seq."""
Wake = Callable[[Collection[str]], None]
"""Wakes the readers of these groups once their events are committed."""

_Pending = tuple[str, list[EncodedEvent], asyncio.Future[list[int]]]


class AppendQueue:
    """The appends of one store instance waiting for the next shared transaction."""

    def __init__(self, run: Run, append_one: AppendOne, wake: Wake) -> None:
        self._run = run
        self._append_one = append_one
        self._wake = wake
        self._pending: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self.transactions = 0  # how many writes the appends took (for tests and figures)

    async def append(self, group_id: str, events: list[EncodedEvent]) -> list[int]:
        """Append ``events`` to ``group_id`` (in order) with whatever else is waiting."""
        fut: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        self._pending.append((group_id, events, fut))
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
        def op(conn: sqlite3.Connection) -> list[list[int]]:
            # Run again whole if SQLite was busy: the transaction rolled back.
            with write_txn(conn):
                return [[self._append_one(conn, g, e) for e in events] for g, events, _ in batch]

        try:
            seqs = await self._run(op)
        except BaseException as exc:
            _fail(batch, exc)
            if isinstance(exc, Exception):
                return
            raise
        self.transactions += 1
        self._wake({group_id for group_id, _, _ in batch})
        for (_, _, fut), got in zip(batch, seqs, strict=True):
            if not fut.done():
                fut.set_result(got)


def _fail(batch: list[_Pending], exc: BaseException) -> None:
    for _, _, fut in batch:
        if fut.done():
            continue
        if isinstance(exc, Exception):
            fut.set_exception(exc)
        else:
            fut.cancel()
