"""The embedded store's failed-login counts and lockouts (``store.logins``), on its SQLite file.

A failure is one ``BEGIN IMMEDIATE`` transaction (prune what expired,
count, lock), so two gateway processes on one data directory count every
failure once and agree on the locks.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

from store.logins import Lockouts, LoginRules, collect
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

# A lock row's username '' means the address is locked for every account;
# its address '' means the account itself is locked (store.logins).
SCHEMA = """
CREATE TABLE IF NOT EXISTS login_failures (
    username TEXT NOT NULL,
    address TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS login_failures_by_user ON login_failures (username, address);
CREATE INDEX IF NOT EXISTS login_failures_by_ts ON login_failures (ts);
CREATE TABLE IF NOT EXISTS login_address_failures (
    address TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS login_address_failures_by_address
    ON login_address_failures (address);
CREATE INDEX IF NOT EXISTS login_address_failures_by_ts ON login_address_failures (ts);
CREATE TABLE IF NOT EXISTS login_locks (
    username TEXT NOT NULL,
    address TEXT NOT NULL,
    until REAL NOT NULL,
    PRIMARY KEY (username, address)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS login_locks_by_until ON login_locks (until);
"""


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _lock(conn: sqlite3.Connection, username: str, address: str, until: float) -> None:
    conn.execute(
        "INSERT INTO login_locks (username, address, until) VALUES (?, ?, ?)"
        " ON CONFLICT (username, address) DO UPDATE SET until = max(until, excluded.until)",
        (username, address, until),
    )


def _until(conn: sqlite3.Connection, username: str, address: str, now: float) -> float | None:
    row = conn.execute(
        "SELECT until FROM login_locks WHERE username = ? AND address = ? AND until > ?",
        (username, address, now),
    ).fetchone()
    return float(row[0]) if row else None


def _count(conn: sqlite3.Connection, sql: str, *args: str) -> int:
    return int(conn.execute(sql, args).fetchone()[0])


def record_failure(
    conn: sqlite3.Connection, username: str, address: str, now: float, rules: LoginRules
) -> float | None:
    """One failed login, in the caller's write transaction (rules in ``store.logins``)."""
    cutoff = now - rules.window
    conn.execute("DELETE FROM login_failures WHERE ts <= ?", (cutoff,))
    conn.execute("DELETE FROM login_address_failures WHERE ts <= ?", (cutoff,))
    conn.execute("DELETE FROM login_locks WHERE until <= ?", (now,))
    conn.execute("INSERT INTO login_address_failures (address, ts) VALUES (?, ?)", (address, now))
    locked: float | None = None
    account = _until(conn, username, "", now)
    if account is not None:
        # The account is under attack: a new address that fails is refused too.
        _lock(conn, username, address, account)
        locked = account
    else:
        conn.execute(
            "INSERT INTO login_failures (username, address, ts) VALUES (?, ?, ?)",
            (username, address, now),
        )
        sql = "SELECT count(*) FROM login_failures WHERE username = ?"
        if _count(conn, sql, username) >= rules.max_failures:
            locked = now + rules.lockout
            _lock(conn, username, "", locked)
            failed = conn.execute(
                "SELECT DISTINCT address FROM login_failures WHERE username = ?", (username,)
            ).fetchall()
            for (failed_address,) in failed:
                _lock(conn, username, failed_address, locked)
            conn.execute("DELETE FROM login_failures WHERE username = ?", (username,))
    sql = "SELECT count(*) FROM login_address_failures WHERE address = ?"
    if _count(conn, sql, address) >= rules.address_max_failures:
        everywhere = now + rules.lockout
        _lock(conn, "", address, everywhere)
        conn.execute("DELETE FROM login_address_failures WHERE address = ?", (address,))
        locked = max(locked or 0.0, everywhere)
    return locked


class EmbeddedLogins:
    """``store.logins.LoginLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def login_locked_until(self, username: str, address: str, now: float) -> float | None:
        def op(conn: sqlite3.Connection) -> float | None:
            with read_txn(conn):
                found = [_until(conn, username, address, now), _until(conn, "", address, now)]
            held = [until for until in found if until is not None]
            return max(held) if held else None

        return await self._run(op)

    async def record_login_failure(
        self, username: str, address: str, now: float, rules: LoginRules
    ) -> float | None:
        def op(conn: sqlite3.Connection) -> float | None:
            with write_txn(conn):
                return record_failure(conn, username, address, now, rules)

        return await self._run(op)

    async def forget_login_failures(self, username: str, address: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "DELETE FROM login_failures WHERE username = ? AND address = ?",
                    (username, address),
                )

        await self._run(op)

    async def lift_lockout(self, username: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                conn.execute("DELETE FROM login_failures WHERE username = ?", (username,))
                cur = conn.execute("DELETE FROM login_locks WHERE username = ?", (username,))
                return cur.rowcount > 0

        return await self._run(op)

    async def lockouts(self, now: float) -> Lockouts:
        def op(conn: sqlite3.Connection) -> list[tuple[str, str, float]]:
            with read_txn(conn):
                rows = conn.execute(
                    "SELECT username, address, until FROM login_locks WHERE until > ?", (now,)
                ).fetchall()
            return [(str(u), str(a), float(t)) for u, a, t in rows]

        return collect(await self._run(op))
