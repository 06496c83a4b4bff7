"""The embedded store's person quotas, ledgers and usage records (``store.quotas``).

A person's ledger uses the same steps as a group's budgets
(``store.embedded_budgets.Ledger``) on tables keyed by username, so one
IMMEDIATE transaction reserves against everything the person's turns in
every group have spent and reserved. Usage rows are written by
:func:`add_usage_row` inside the transaction that counts a turn's usage.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from store.budgets import RESERVE_TOKENS, RESERVE_USD, BudgetLimit, BudgetRefusal, BudgetSpend
from store.embedded_budgets import Ledger
from store.quotas import PersonQuota, UsageKey, UsageRow
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS person_quotas (
    username TEXT PRIMARY KEY,
    quota TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS person_ledgers (
    username TEXT NOT NULL,
    account TEXT NOT NULL,
    spent_tokens INTEGER NOT NULL DEFAULT 0,
    spent_usd REAL NOT NULL DEFAULT 0,
    reserved_tokens INTEGER NOT NULL DEFAULT 0,
    reserved_usd REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (username, account)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS person_reservations (
    username TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    accounts TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    usd REAL NOT NULL,
    PRIMARY KEY (username, turn_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage_rows (
    day TEXT NOT NULL,
    username TEXT NOT NULL,
    group_id TEXT NOT NULL,
    vp TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    usd REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (day, username, group_id, vp, model)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS usage_rows_by_user ON usage_rows (username, day);
"""

PERSON_LEDGER = Ledger("person_ledgers", "person_reservations", "username")


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def add_usage_row(
    conn: sqlite3.Connection, group_id: str, key: UsageKey, tin: int, tout: int, usd: float
) -> None:
    """Add a turn's usage to its row; inside the caller's write transaction."""
    conn.execute(
        "INSERT INTO usage_rows (day, username, group_id, vp, model, input_tokens,"
        " output_tokens, usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (day, username, group_id, vp, model) DO UPDATE SET"
        " input_tokens = input_tokens + excluded.input_tokens,"
        " output_tokens = output_tokens + excluded.output_tokens,"
        " usd = usd + excluded.usd",
        (key.day, key.user, group_id, key.vp, key.model, tin, tout, usd),
    )


class EmbeddedQuotas:
    """``store.quotas.Quotas`` on SQLite (mixed into EmbeddedStore)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def get_person_quota(self, username: str) -> PersonQuota | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT quota FROM person_quotas WHERE username = ?", (username,)
            ).fetchone()
            return str(row[0]) if row else None

        data = await self._run(op)
        return PersonQuota.from_dict(json.loads(data)) if data else None

    async def set_person_quota(self, username: str, quota: PersonQuota | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                if quota is None:
                    conn.execute("DELETE FROM person_quotas WHERE username = ?", (username,))
                    return
                conn.execute(
                    "INSERT INTO person_quotas (username, quota) VALUES (?, ?)"
                    " ON CONFLICT (username) DO UPDATE SET quota = excluded.quota",
                    (username, json.dumps(quota.to_dict())),
                )

        await self._run(op)

    async def reserve_person(
        self,
        username: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        def op(conn: sqlite3.Connection) -> BudgetRefusal | None:
            with write_txn(conn):
                return PERSON_LEDGER.reserve(conn, username, turn_id, limits, tokens, usd)

        return await self._run(op)

    async def settle_person(self, username: str, turn_id: str, tokens: int, usd: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                return PERSON_LEDGER.settle(conn, username, turn_id, tokens, usd)

        return await self._run(op)

    async def charge_person(
        self, username: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                for account in accounts:
                    PERSON_LEDGER.add(conn, username, account, tokens, usd, 0, 0.0)

        await self._run(op)

    async def person_spend(self, username: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        def op(conn: sqlite3.Connection) -> list[BudgetSpend]:
            with read_txn(conn):
                return [PERSON_LEDGER.spend(conn, username, a) for a in accounts]

        return await self._run(op)

    async def usage_rows(
        self, first_day: str, last_day: str, user: str | None = None
    ) -> list[UsageRow]:
        def op(conn: sqlite3.Connection) -> list[UsageRow]:
            sql = (
                "SELECT day, username, group_id, vp, model, input_tokens, output_tokens, usd"
                " FROM usage_rows WHERE day >= ? AND day <= ?"
            )
            args: list[str] = [first_day, last_day]
            if user is not None:
                sql += " AND username = ?"
                args.append(user)
            sql += " ORDER BY day, username, group_id, vp, model"
            rows = conn.execute(sql, args).fetchall()
            return [
                UsageRow(r[0], r[1], r[2], r[3], r[4], int(r[5]), int(r[6]), float(r[7]))
                for r in rows
            ]

        return await self._run(op)
