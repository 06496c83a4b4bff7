"""The embedded store's disabled accounts (``store.disabled``), on its SQLite file."""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from store.disabled import DisabledMark
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS disabled_accounts (
    username TEXT PRIMARY KEY,
    at REAL NOT NULL,
    by TEXT
) WITHOUT ROWID;
"""


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


class EmbeddedDisabled:
    """``store.disabled.DisabledAccounts`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def disable_account(self, mark: DisabledMark) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                cur = conn.execute(
                    "INSERT OR IGNORE INTO disabled_accounts (username, at, by) VALUES (?, ?, ?)",
                    (mark.username, mark.at, mark.by),
                )
                return cur.rowcount > 0

        return await self._run(op)

    async def enable_account(self, username: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                cur = conn.execute("DELETE FROM disabled_accounts WHERE username = ?", (username,))
                return cur.rowcount > 0

        return await self._run(op)

    async def disabled_mark(self, username: str) -> DisabledMark | None:
        def op(conn: sqlite3.Connection) -> DisabledMark | None:
            with read_txn(conn):
                row = conn.execute(
                    "SELECT username, at, by FROM disabled_accounts WHERE username = ?",
                    (username,),
                ).fetchone()
            return DisabledMark(str(row[0]), float(row[1]), row[2]) if row else None

        return await self._run(op)

    async def disabled_accounts(self) -> list[DisabledMark]:
        def op(conn: sqlite3.Connection) -> list[DisabledMark]:
            with read_txn(conn):
                rows = conn.execute(
                    "SELECT username, at, by FROM disabled_accounts ORDER BY username"
                ).fetchall()
            return [DisabledMark(str(u), float(a), b) for u, a, b in rows]

        return await self._run(op)
