"""The embedded store's budget ledgers (``store.budgets``), on its SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from store.budgets import RESERVE_TOKENS, RESERVE_USD, BudgetLimit, BudgetRefusal, BudgetSpend
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS budget_accounts (
    group_id TEXT NOT NULL,
    account TEXT NOT NULL,
    spent_tokens INTEGER NOT NULL DEFAULT 0,
    spent_usd REAL NOT NULL DEFAULT 0,
    reserved_tokens INTEGER NOT NULL DEFAULT 0,
    reserved_usd REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (group_id, account)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS budget_reservations (
    group_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    accounts TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    usd REAL NOT NULL,
    PRIMARY KEY (group_id, turn_id)
) WITHOUT ROWID;
"""

GROUP_TABLES = ("budget_accounts", "budget_reservations")


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _spend(conn: sqlite3.Connection, group_id: str, account: str) -> BudgetSpend:
    row = conn.execute(
        "SELECT spent_tokens, spent_usd, reserved_tokens, reserved_usd FROM budget_accounts"
        " WHERE group_id = ? AND account = ?",
        (group_id, account),
    ).fetchone()
    if row is None:
        return BudgetSpend(account)
    return BudgetSpend(account, int(row[0]), float(row[1]), int(row[2]), float(row[3]))


def add_to_account(
    conn: sqlite3.Connection, group_id: str, account: str, st: int, su: float, rt: int, ru: float
) -> None:
    conn.execute(
        "INSERT INTO budget_accounts (group_id, account, spent_tokens, spent_usd,"
        " reserved_tokens, reserved_usd) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (group_id, account) DO UPDATE SET"
        " spent_tokens = spent_tokens + excluded.spent_tokens,"
        " spent_usd = spent_usd + excluded.spent_usd,"
        " reserved_tokens = reserved_tokens + excluded.reserved_tokens,"
        " reserved_usd = reserved_usd + excluded.reserved_usd",
        (group_id, account, st, su, rt, ru),
    )


class EmbeddedBudgets:
    """``store.budgets.Budgets`` on SQLite (mixed into EmbeddedStore)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def reserve_budget(
        self,
        group_id: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        def op(conn: sqlite3.Connection) -> BudgetRefusal | None:
            with write_txn(conn):
                held = conn.execute(
                    "SELECT 1 FROM budget_reservations WHERE group_id = ? AND turn_id = ?",
                    (group_id, turn_id),
                ).fetchone()
                if held is not None:
                    return None
                for limit in limits:
                    s = _spend(conn, group_id, limit.account)
                    if limit.max_tokens and s.spent_tokens + s.reserved_tokens >= limit.max_tokens:
                        return BudgetRefusal(limit.account, "tokens")
                    if limit.max_usd and s.spent_usd + s.reserved_usd >= limit.max_usd:
                        return BudgetRefusal(limit.account, "usd")
                for limit in limits:
                    add_to_account(conn, group_id, limit.account, 0, 0.0, tokens, usd)
                conn.execute(
                    "INSERT INTO budget_reservations (group_id, turn_id, accounts, tokens, usd)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (group_id, turn_id, json.dumps([x.account for x in limits]), tokens, usd),
                )
                return None

        return await self._run(op)

    async def settle_budget(self, group_id: str, turn_id: str, tokens: int, usd: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                row = conn.execute(
                    "SELECT accounts, tokens, usd FROM budget_reservations"
                    " WHERE group_id = ? AND turn_id = ?",
                    (group_id, turn_id),
                ).fetchone()
                if row is None:
                    return False
                for account in json.loads(row[0]):
                    reserved = -int(row[1]), -float(row[2])
                    add_to_account(conn, group_id, account, tokens, usd, *reserved)
                conn.execute(
                    "DELETE FROM budget_reservations WHERE group_id = ? AND turn_id = ?",
                    (group_id, turn_id),
                )
                return True

        return await self._run(op)

    async def charge_budget(
        self, group_id: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                for account in accounts:
                    add_to_account(conn, group_id, account, tokens, usd, 0, 0.0)

        await self._run(op)

    async def budget_spend(self, group_id: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        def op(conn: sqlite3.Connection) -> list[BudgetSpend]:
            with read_txn(conn):
                return [_spend(conn, group_id, a) for a in accounts]

        return await self._run(op)
