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
- The event log, and how blocking reads are woken rather than polled, is
  ``store.embedded_events``; engine transcripts are
  ``store.embedded_transcripts``.
- A turn's result is appended in the same transaction that marks its record
  finished (``store.embedded_turns``), and only if it was not finished yet.
  The tables and migrations are in ``store.embedded_schema``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from protocol import EventFrame
from store import embedded_chat as chat_sql
from store import embedded_turns as turn_sql
from store._shared import DEFAULT_EVENT_RETENTION, check_retention, client_message_id
from store.appends import AppendQueue
from store.base import (
    Group,
    GroupMessage,
    NotFound,
    Store,
    StoreError,
    decode_user,
    encode_user,
    user_record_key,
)
from store.chatviews import TurnUsage
from store.embedded_audit import EmbeddedAudit
from store.embedded_budgets import GROUP_TABLES as BUDGET_TABLES
from store.embedded_budgets import EmbeddedBudgets
from store.embedded_disabled import EmbeddedDisabled
from store.embedded_events import GROUP_TABLES as EVENT_TABLES
from store.embedded_events import EmbeddedEvents
from store.embedded_invites import EmbeddedInvites
from store.embedded_logins import EmbeddedLogins
from store.embedded_members import EmbeddedMembers
from store.embedded_mentions import GROUP_TABLES as MENTION_TABLES
from store.embedded_mentions import EmbeddedMentions, activity_of, index_mentions
from store.embedded_quotas import EmbeddedQuotas
from store.embedded_reactions import GROUP_TABLES as REACTION_TABLES
from store.embedded_reactions import EmbeddedReactions
from store.embedded_schema import event_counter, setup_schema
from store.embedded_sessions import EmbeddedSessions
from store.embedded_tasks import GROUP_TABLES as TASK_TABLES
from store.embedded_tasks import EmbeddedTasks
from store.embedded_threads import EmbeddedThreads
from store.embedded_transcripts import GROUP_TABLES as TRANSCRIPT_TABLES
from store.embedded_transcripts import EmbeddedTranscripts
from store.embedded_wake import EventWaker
from store.events import (
    encode_event,
)
from store.mentions import ACTIVITY_LOG, counts_as_activity
from store.sqlite import SQLiteThread, read_txn, write_txn
from store.turns import TurnEnd, TurnRecord, finish_frames
from store.versions import MessageVersions

log = logging.getLogger(__name__)

T = TypeVar("T")

DB_FILENAME = "yeaft-store.sqlite3"


class EmbeddedStore(
    EmbeddedMembers,
    EmbeddedEvents,
    EmbeddedTranscripts,
    chat_sql.EmbeddedChatViews,
    EmbeddedBudgets,
    EmbeddedQuotas,
    EmbeddedTasks,
    EmbeddedLogins,
    EmbeddedSessions,
    EmbeddedReactions,
    MessageVersions,
    EmbeddedThreads,
    EmbeddedMentions,
    EmbeddedAudit,
    EmbeddedInvites,
    EmbeddedDisabled,
    Store,
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
                    "turns",
                    *EVENT_TABLES,
                    *TRANSCRIPT_TABLES,
                    *chat_sql.GROUP_TABLES,
                    *BUDGET_TABLES,
                    *TASK_TABLES,
                    *REACTION_TABLES,
                    *MENTION_TABLES,
                )
                for table in tables:
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
                pos = int(cur.lastrowid or 0)
                chat_sql.index_message(conn, pos, group_id, message)
                index_mentions(conn, pos, group_id, message)
                turn_sql.insert(conn, group_id, turns)
                if encoded is not None:
                    self._append_event_sync(conn, group_id, encoded)
                if counts_as_activity(message.role):
                    # Every gateway learns of it through the one activity log (store.mentions).
                    self._append_event_sync(conn, ACTIVITY_LOG, activity_of(group_id, message))
            return None

        existing = await self._run(op)
        if existing is not None:
            return GroupMessage.model_validate_json(existing), False
        moved = [group_id] if encoded is not None else []
        if counts_as_activity(message.role):
            moved.append(ACTIVITY_LOG)
        if moved:
            self._waker.wake_all(moved)
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

    async def identity_user(self, identity: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT username FROM identities WHERE identity = ?", (identity,)
            ).fetchone()
            return str(row[0]) if row else None

        return await self._read(op)

    async def link_identity(self, identity: str, username: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "INSERT INTO identities (identity, username) VALUES (?, ?)"
                " ON CONFLICT (identity) DO NOTHING",
                (identity, username),
            )
            return cur.rowcount == 1

        return await self._run(op)

    # -- lifecycle ---------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._waker.close()
        await self._sqlite.close()
