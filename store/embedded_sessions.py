"""The embedded store's sign-in sessions (``store.sessions``), on its SQLite file."""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from store.sessions import SessionRecord, SignIn
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    username TEXT NOT NULL,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    last_seen REAL NOT NULL,
    how TEXT NOT NULL,
    user_agent TEXT NOT NULL,
    address TEXT NOT NULL,
    ended REAL,
    label TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions (username);
CREATE INDEX IF NOT EXISTS sessions_by_expiry ON sessions (expires);
"""

_COLUMNS = "id, username, created, expires, last_seen, how, user_agent, address, ended, label"


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")
    with write_txn(conn):
        have = {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}
        if "label" not in have:  # a database made before API tokens
            conn.execute("ALTER TABLE sessions ADD COLUMN label TEXT NOT NULL DEFAULT ''")


def _record(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(
        id=str(row[0]),
        username=str(row[1]),
        created=float(row[2]),
        expires=float(row[3]),
        last_seen=float(row[4]),
        how=SignIn(row[5]),
        user_agent=str(row[6]),
        address=str(row[7]),
        ended=None if row[8] is None else float(row[8]),
        label=str(row[9]),
    )


class EmbeddedSessions:
    """``store.sessions.SessionLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def record_session(self, session: SessionRecord) -> None:
        s = session

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute("DELETE FROM sessions WHERE expires <= ?", (s.created,))
                conn.execute(
                    f"INSERT INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        s.id,
                        s.username,
                        s.created,
                        s.expires,
                        s.last_seen,
                        s.how.value,
                        s.user_agent,
                        s.address,
                        s.ended,
                        s.label,
                    ),
                )

        await self._run(op)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        def op(conn: sqlite3.Connection) -> SessionRecord | None:
            with read_txn(conn):
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
            return None if row is None else _record(row)

        return await self._run(op)

    async def user_sessions(self, username: str, now: float) -> list[SessionRecord]:
        def op(conn: sqlite3.Connection) -> list[SessionRecord]:
            with read_txn(conn):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM sessions WHERE username = ? AND ended IS NULL"
                    " AND expires > ? ORDER BY created DESC, id",
                    (username, now),
                ).fetchall()
            return [_record(row) for row in rows]

        return await self._run(op)

    async def touch_session(
        self, session_id: str, last_seen: float, expires: float | None = None
    ) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "UPDATE sessions SET last_seen = max(last_seen, ?),"
                    " expires = max(expires, coalesce(?, expires))"
                    " WHERE id = ? AND ended IS NULL",
                    (last_seen, expires, session_id),
                )

        await self._run(op)

    async def end_sessions(
        self, username: str, session_ids: Sequence[str] | None, now: float, keep: str = ""
    ) -> list[str]:
        def op(conn: sqlite3.Connection) -> list[str]:
            with write_txn(conn):
                rows = conn.execute(
                    "SELECT id FROM sessions WHERE username = ? AND ended IS NULL"
                    " AND expires > ? AND id != ?",
                    (username, now, keep),
                ).fetchall()
                live = [str(r[0]) for r in rows]
                wanted = set(session_ids) if session_ids is not None else None
                ending = [i for i in live if wanted is None or i in wanted]
                conn.executemany(
                    "UPDATE sessions SET ended = ? WHERE id = ?", [(now, i) for i in ending]
                )
            return ending

        return await self._run(op)

    async def prune_sessions(self, now: float) -> int:
        def op(conn: sqlite3.Connection) -> int:
            with write_txn(conn):
                return conn.execute("DELETE FROM sessions WHERE expires <= ?", (now,)).rowcount

        return await self._run(op)
