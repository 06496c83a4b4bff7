"""The embedded store's event log: appends, blocking reads and the head.

A mixin of :class:`~store.embedded.EmbeddedStore`. An event row keeps the
frame's JSON text (seq spliced in, inside the append's transaction) and, in
their own columns, the header fields a subscriber filter reads, so a read
never decodes JSON. A database made before those columns existed gets them,
filled from the JSON, on open (``store.embedded_schema``). Appends that wait
for the store thread together go in one transaction (``store.appends``):
under load, fewer and larger writes. A message's announcement and a turn's
events are inserted by the same code, inside those writes' own transactions.

Blocking event reads are pushed, not polled. Each store instance runs at
most one waker thread, and only while some coroutine is waiting. It blocks
on this process's wake-up socket (``store.notify``): every writer, in any
process, sends a datagram there once its transaction has committed. On a
wake-up the thread reads one number, the global AUTOINCREMENT counter of the
events table; when it moved it asks which groups got the new rows and wakes
only their waiters. The database decides, the datagram only says when to
look, so a lost datagram costs latency, never an envelope: the thread also
looks every ``poll_interval`` seconds (1 s), which is all it does while
nothing happens. A writer in the same process wakes waiters (of every
instance on the same file) at once, without a datagram (``store.embedded_wake``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from protocol import EventFrame
from store.appends import Append, AppendQueue, Outcome
from store.embedded_wake import EventWaker
from store.events import (
    EncodedEvent,
    EventBatch,
    StoredEvent,
    encode_event,
    make_batch,
    with_seq,
)
from store.sqlite import SQLiteThread, read_txn, write_txn

T = TypeVar("T")

# Tables (beside the store's own) that hold rows of a group, for delete_group.
GROUP_TABLES = ("events", "event_heads")


class EmbeddedEvents:
    """``store.base.EventLog`` on SQLite (mixed into EmbeddedStore)."""

    event_retention: int
    _closed: bool
    _sqlite: SQLiteThread
    _waker: EventWaker
    _appends: AppendQueue

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        return (await self._appends.append(group_id, [encode_event(frame)]))[0]

    async def append_events(self, group_id: str, frames: Sequence[EventFrame]) -> list[int]:
        encoded = [encode_event(frame) for frame in frames]
        if not encoded:
            return []
        return await self._appends.append(group_id, encoded)

    async def _write_appends(self, appends: Sequence[Append]) -> list[Outcome]:
        """One transaction for a batch of appends (``AppendQueue``); it fails whole."""

        def op(conn: sqlite3.Connection) -> list[Outcome]:
            with write_txn(conn):
                return [
                    [self._append_event_sync(conn, g, e) for e in events] for g, events in appends
                ]

        return await self._run(op)

    def _append_event_sync(
        self, conn: sqlite3.Connection, group_id: str, encoded: EncodedEvent
    ) -> int:
        """Take the group's next seq and insert the event; the caller holds a write txn."""
        header = encoded.header
        seq = int(
            conn.execute(
                "INSERT INTO event_heads (group_id, last_seq) VALUES (?, 1)"
                " ON CONFLICT (group_id) DO UPDATE SET last_seq = last_seq + 1"
                " RETURNING last_seq",
                (group_id,),
            ).fetchone()[0]
        )
        conn.execute(
            "INSERT INTO events (group_id, seq, data, type, vp_id, data_type)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                group_id,
                seq,
                with_seq(encoded.body, seq),
                header.type,
                header.vp_id,
                header.data_type,
            ),
        )
        if seq > self.event_retention:
            conn.execute(
                "DELETE FROM events WHERE group_id = ? AND seq <= ?",
                (group_id, seq - self.event_retention),
            )
        return seq

    async def read_events(
        self, group_id: str, after_seq: int, *, limit: int = 500, wait: float = 0.0
    ) -> EventBatch:
        after_seq = max(0, after_seq)
        limit = max(1, limit)

        def op(conn: sqlite3.Connection) -> EventBatch:
            return self._read_events_sync(conn, group_id, after_seq, limit)

        if wait <= 0:
            return await self._read(op)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        # The waker counts from the file's state when it was set up.
        await self._sqlite.set_up()
        waker = self._waker
        batch: EventBatch | None = None
        while True:
            # Register and stamp before reading: an event committed after
            # this read is then certain to wake the future (by the writer or
            # the thread) and to move the stamp.
            # One read per wake-up, and none from a head already reached with
            # nothing woken since (a tail back from delivering a batch): the
            # reads of every group watched here queue on one connection.
            fut = waker.add(group_id)
            stamp = waker.stamp(group_id)
            try:
                if loop.time() >= deadline or not waker.unmoved(group_id, after_seq):
                    batch = await self._read(op)
                    if (head := batch.head_reached(after_seq)) is not None:
                        waker.reached(group_id, head, stamp)
                    if batch.events or loop.time() >= deadline:
                        return batch
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(fut, deadline - loop.time())
            finally:
                waker.remove(group_id, fut)
            if self._closed:
                return batch if batch is not None else EventBatch(last_seq=after_seq)

    @staticmethod
    def _read_events_sync(
        conn: sqlite3.Connection, group_id: str, after_seq: int, limit: int
    ) -> EventBatch:
        with read_txn(conn):
            head = conn.execute(
                "SELECT last_seq FROM event_heads WHERE group_id = ?", (group_id,)
            ).fetchone()
            first = conn.execute(
                "SELECT MIN(seq) FROM events WHERE group_id = ?", (group_id,)
            ).fetchone()
            rows = conn.execute(
                "SELECT seq, data, type, vp_id, data_type FROM events"
                " WHERE group_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (group_id, after_seq, limit),
            ).fetchall()
        events = [
            StoredEvent(int(seq), text, kind or "", vp, dt) for seq, text, kind, vp, dt in rows
        ]
        first_seq = int(first[0]) if first and first[0] is not None else 0
        return make_batch(after_seq, events, first_seq, int(head[0]) if head else 0)

    async def head(self, group_id: str) -> int:
        def op(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT last_seq FROM event_heads WHERE group_id = ?", (group_id,)
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._read(op)

    def _appender(
        self, conn: sqlite3.Connection, group_id: str, encoded: Sequence[EncodedEvent]
    ) -> Callable[[], int] | None:
        """The inserts of ``encoded`` into the event log, for a turn step's transaction.

        The callable returns the first one's seq; None when there is nothing to insert.
        """
        if not encoded:
            return None

        def append() -> int:
            seqs = [self._append_event_sync(conn, group_id, e) for e in encoded]
            return seqs[0]

        return append
