"""The embedded store: SQLite in WAL mode under a data directory.

This is the default backend. It needs no server, and several processes (Ray
actor processes and a gateway) may open the same directory at once:

- WAL mode lets readers run while one writer commits, and ``busy_timeout``
  makes a writer wait for another process's write lock instead of failing.
- Every write that must be atomic (per-group event seq, idempotent message
  append) runs in a ``BEGIN IMMEDIATE`` transaction, which takes the database
  write lock up front, so a read-then-write inside it cannot race a writer in
  another process. Unique indexes back the same rules up.
- Blocking SQLite calls run on one dedicated thread per store instance
  (``store.sqlite.SQLiteThread``), so the event loop never blocks and the
  connection is only ever used by the thread that opened it.
- An event row keeps the frame's JSON text (seq spliced in, inside the
  append's transaction) and, in their own columns, the header fields a
  subscriber filter reads, so a read never decodes JSON. A database made
  before those columns existed gets them, filled from the JSON, on open.
- Appends that wait for the store thread together go in one transaction
  (``store.appends``): under load, fewer and larger writes.
- A turn's result is appended in the same transaction that marks its record
  finished (``store.embedded_turns``), and only if it was not finished yet.
  The tables and migrations are in ``store.embedded_schema``.

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
instance on the same file) at once, without a datagram.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from protocol import EventFrame
from store import embedded_chat as chat_sql
from store import embedded_turns as turn_sql
from store._shared import DEFAULT_EVENT_RETENTION, check_retention, client_message_id
from store.appends import Append, AppendQueue, Outcome
from store.base import (
    Group,
    GroupMessage,
    NotFound,
    Store,
    StoredTranscript,
    StoreError,
    decode_user,
    encode_user,
    user_record_key,
)
from store.chatviews import TurnUsage
from store.embedded_budgets import GROUP_TABLES as BUDGET_TABLES
from store.embedded_budgets import EmbeddedBudgets
from store.embedded_members import EmbeddedMembers
from store.embedded_schema import event_counter, setup_schema
from store.embedded_tasks import GROUP_TABLES as TASK_TABLES
from store.embedded_tasks import EmbeddedTasks
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
from store.turns import TurnEnd, TurnRecord, finish_frames

log = logging.getLogger(__name__)

T = TypeVar("T")

DB_FILENAME = "yeaft-store.sqlite3"


class EmbeddedStore(
    EmbeddedMembers, chat_sql.EmbeddedChatViews, EmbeddedBudgets, EmbeddedTasks, Store
):
    """A Store on one SQLite file under ``data_dir``; safe across processes."""

    def __init__(
        self,
        data_dir: Path,
        *,
        event_retention: int = DEFAULT_EVENT_RETENTION,
        poll_interval: float = 1.0,
        busy_timeout: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser()
        # absolute() (no disk access) so instances in one process that name the
        # same directory differently still find each other (store.embedded_wake).
        self.path = (self.data_dir / DB_FILENAME).absolute()
        self.event_retention = check_retention(event_retention)
        self._busy_timeout = busy_timeout
        self._closed = False
        # Opening the file and creating the schema is disk I/O, so it happens
        # lazily on the store thread, never in this (possibly async) caller.
        self._sqlite = SQLiteThread(
            self.path, setup=self._setup, busy_timeout=busy_timeout, label="embedded store"
        )
        self._waker = EventWaker(self.path, poll_interval, busy_timeout)
        # Appends waiting together share one transaction (store.appends).
        self._appends = AppendQueue(self._write_appends, self._waker.wake_all)

    # -- plumbing ----------------------------------------------------------
    def _setup(self, conn: sqlite3.Connection) -> None:
        """Make the schema on a new connection (the store thread's, on first use)."""
        setup_schema(conn)
        # The poller starts from here; every waiter reads after this point,
        # so no event committed after a waiter's read is missed.
        self._waker.base = event_counter(conn)

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreError("store is closed")
        return await self._sqlite.run(fn)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read-only step, on the reading connection: it never waits behind a write."""
        if self._closed:
            raise StoreError("store is closed")
        return await self._sqlite.read(fn)

    # -- groups ------------------------------------------------------------
    async def create_group(self, group: Group) -> Group:
        def op(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO groups (id, created_at, data) VALUES (?, ?, ?)",
                    (group.id, group.created_at, group.model_dump_json()),
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"group {group.id!r} already exists") from exc

        await self._run(op)
        return group

    async def get_group(self, group_id: str) -> Group | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT data FROM groups WHERE id = ?", (group_id,)).fetchone()
            return row[0] if row else None

        data = await self._read(op)
        return Group.model_validate_json(data) if data else None

    async def save_group(self, group: Group) -> Group:
        def op(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "UPDATE groups SET created_at = ?, data = ? WHERE id = ?",
                (group.created_at, group.model_dump_json(), group.id),
            )
            return cur.rowcount

        if await self._run(op) == 0:
            raise NotFound(f"group {group.id!r} not found")
        return group

    async def delete_group(self, group_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                existed = conn.execute("DELETE FROM groups WHERE id = ?", (group_id,)).rowcount
                # Data written under the id without a group row is removed too.
                tables = (
                    "messages",
                    "transcripts",
                    "transcript_rows",
                    "events",
                    "event_heads",
                    "turns",
                )
                for table in (*tables, *chat_sql.GROUP_TABLES, *BUDGET_TABLES, *TASK_TABLES):
                    conn.execute(f"DELETE FROM {table} WHERE group_id = ?", (group_id,))
            return existed > 0

        return await self._run(op)

    async def list_groups(self, member: str | None = None) -> list[Group]:
        def op(conn: sqlite3.Connection) -> list[str]:
            if member is None:
                rows = conn.execute("SELECT data FROM groups ORDER BY created_at, id")
            else:
                rows = conn.execute(
                    "SELECT data FROM groups WHERE EXISTS ("
                    " SELECT 1 FROM json_each(groups.data, '$.members') WHERE value = ?"
                    ") ORDER BY created_at, id",
                    (member,),
                )
            return [r[0] for r in rows]

        return [Group.model_validate_json(d) for d in await self._read(op)]

    # -- group log ---------------------------------------------------------
    async def append_message(
        self,
        group_id: str,
        message: GroupMessage,
        turns: Sequence[TurnRecord] = (),
        announce: EventFrame | None = None,
    ) -> tuple[GroupMessage, bool]:
        client_id = client_message_id(message)
        data = message.model_dump_json()
        encoded = encode_event(announce) if announce is not None else None

        def op(conn: sqlite3.Connection) -> str | None:
            with write_txn(conn):
                # Inside BEGIN IMMEDIATE no other process can insert between
                # this lookup and the insert, so the check is race-free.
                row = None
                if client_id is not None:
                    row = conn.execute(
                        "SELECT data FROM messages WHERE group_id = ? AND client_id = ?",
                        (group_id, client_id),
                    ).fetchone()
                if row is None:
                    row = conn.execute(
                        "SELECT data FROM messages WHERE group_id = ? AND id = ?",
                        (group_id, message.id),
                    ).fetchone()
                if row is not None:
                    return str(row[0])
                cur = conn.execute(
                    "INSERT INTO messages (group_id, id, client_id, data) VALUES (?, ?, ?, ?)",
                    (group_id, message.id, client_id, data),
                )
                chat_sql.index_message(conn, int(cur.lastrowid or 0), group_id, message)
                turn_sql.insert(conn, group_id, turns)
                if encoded is not None:
                    self._append_event_sync(conn, group_id, encoded)
            return None

        existing = await self._run(op)
        if existing is not None:
            return GroupMessage.model_validate_json(existing), False
        if encoded is not None:
            self._waker.wake(group_id)
        return message, True

    async def read_messages(
        self, group_id: str, *, before: str | None = None, limit: int = 100
    ) -> list[GroupMessage]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[str]:
            with read_txn(conn):
                bound = None
                if before is not None:
                    row = conn.execute(
                        "SELECT pos FROM messages WHERE group_id = ? AND id = ?",
                        (group_id, before),
                    ).fetchone()
                    if row is None:
                        return []
                    bound = row[0]
                rows = conn.execute(
                    "SELECT data FROM messages WHERE group_id = ? AND pos < ?"
                    " ORDER BY pos DESC LIMIT ?",
                    (group_id, bound if bound is not None else 2**63 - 1, limit),
                ).fetchall()
            return [r[0] for r in reversed(rows)]

        return [GroupMessage.model_validate_json(d) for d in await self._read(op)]

    async def group_and_messages(
        self, group_id: str, limit: int
    ) -> tuple[Group | None, list[GroupMessage]]:
        def op(conn: sqlite3.Connection) -> tuple[str | None, list[str]]:
            with read_txn(conn):
                group = conn.execute("SELECT data FROM groups WHERE id = ?", (group_id,)).fetchone()
                rows = conn.execute(
                    "SELECT data FROM messages WHERE group_id = ? ORDER BY pos DESC LIMIT ?",
                    (group_id, max(0, limit)),
                ).fetchall()
            return (group[0] if group else None), [r[0] for r in reversed(rows)]

        group, rows = await self._read(op)
        return (
            Group.model_validate_json(group) if group is not None else None,
            [GroupMessage.model_validate_json(d) for d in rows],
        )

    async def get_message(self, group_id: str, message_id: str) -> GroupMessage | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT data FROM messages WHERE group_id = ? AND id = ?", (group_id, message_id)
            ).fetchone()
            return row[0] if row else None

        data = await self._read(op)
        return GroupMessage.model_validate_json(data) if data else None

    # -- engine transcripts ------------------------------------------------
    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        def op(conn: sqlite3.Connection) -> StoredTranscript | None:
            key = (group_id, vp_id)
            with read_txn(conn):
                head = conn.execute(
                    "SELECT data FROM transcripts WHERE group_id = ? AND vp_id = ?", key
                ).fetchone()
                if head is None:
                    return None
                rows = conn.execute(
                    "SELECT data FROM transcript_rows WHERE group_id = ? AND vp_id = ? ORDER BY n",
                    key,
                ).fetchall()
            return StoredTranscript(head[0], [r[0] for r in rows])

        return await self._read(op)

    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            key = (group_id, vp_id)
            with write_txn(conn):
                if keep > 0:
                    (held,) = conn.execute(
                        "SELECT COUNT(*) FROM transcript_rows"
                        " WHERE group_id = ? AND vp_id = ? AND n < ?",
                        (*key, keep),
                    ).fetchone()
                    if held < keep:
                        return False
                conn.execute(
                    "DELETE FROM transcript_rows WHERE group_id = ? AND vp_id = ? AND n >= ?",
                    (*key, keep),
                )
                conn.executemany(
                    "INSERT INTO transcript_rows (group_id, vp_id, n, data) VALUES (?, ?, ?, ?)",
                    [(*key, keep + i, row) for i, row in enumerate(messages)],
                )
                conn.execute(
                    "INSERT INTO transcripts (group_id, vp_id, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (group_id, vp_id) DO UPDATE SET data = excluded.data",
                    (*key, head),
                )
            return True

        return await self._run(op)

    # -- event log ---------------------------------------------------------
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

    # -- turn records ------------------------------------------------------
    async def add_turns(self, group_id: str, turns: Sequence[TurnRecord]) -> None:
        if turns:
            await self._run(lambda conn: turn_sql.add(conn, group_id, turns))

    async def start_turn(
        self, group_id: str, turn_id: str, frame: EventFrame | None = None
    ) -> bool:
        encoded = [encode_event(frame)] if frame is not None else []

        def op(conn: sqlite3.Connection) -> bool:
            return turn_sql.start(conn, group_id, turn_id, self._appender(conn, group_id, encoded))

        started = await self._run(op)
        if started and encoded:
            self._waker.wake(group_id)
        return started

    async def finish_turn(
        self,
        group_id: str,
        turn_id: str,
        frame: EventFrame | None,
        end: TurnEnd,
        *,
        after: EventFrame | None = None,
        usage: TurnUsage | None = None,
    ) -> int | None:
        encoded = [encode_event(f) for f in finish_frames(frame, after)]

        def op(conn: sqlite3.Connection) -> int | None:
            count = None if usage is None else lambda: chat_sql.insert_usage(conn, group_id, usage)
            append = self._appender(conn, group_id, encoded)
            return turn_sql.finish(conn, group_id, turn_id, end, append, count)

        seq = await self._run(op)
        if seq:
            self._waker.wake(group_id)
        return seq

    async def turns_of(self, group_id: str, trigger_id: str) -> list[TurnRecord]:
        return await self._run(lambda conn: turn_sql.of_trigger(conn, group_id, trigger_id))

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

    async def open_turns(self) -> list[TurnRecord]:
        return await self._run(turn_sql.open_all)

    # -- users -------------------------------------------------------------
    async def get_user(self, username: str) -> dict[str, Any] | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT data FROM users WHERE username = ?", (username,)).fetchone()
            return row[0] if row else None

        data = await self._read(op)
        return decode_user(data) if data else None

    async def put_user(self, user: dict[str, Any]) -> None:
        username = user_record_key(user)
        data = encode_user(user)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO users (username, data) VALUES (?, ?)"
                " ON CONFLICT (username) DO UPDATE SET data = excluded.data",
                (username, data),
            )

        await self._run(op)

    async def create_user(self, user: dict[str, Any]) -> bool:
        username = user_record_key(user)
        data = encode_user(user)

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT INTO users (username, data) VALUES (?, ?)"
                " ON CONFLICT (username) DO NOTHING",
                (username, data),
            )
            return cur.rowcount == 1

        return await self._run(op)

    async def list_users(self) -> list[dict[str, Any]]:
        def op(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute("SELECT data FROM users ORDER BY username")]

        return [decode_user(d) for d in await self._run(op)]

    # -- lifecycle ---------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._waker.close()
        await self._sqlite.close()
