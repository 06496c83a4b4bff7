"""The embedded store's budget ledgers (``store.budgets``), on its SQLite file."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Ledger:
    """The tables of one kind of ledger: a group's budgets, or a person's quota.

    ``owner`` is the column naming whose ledger a row is (a group id, a
    username). Every step runs inside the caller's transaction.
    """

    accounts: str
    reservations: str
    owner: str

    def spend(self, conn: sqlite3.Connection, owner: str, account: str) -> BudgetSpend:
        row = conn.execute(
            "SELECT spent_tokens, spent_usd, reserved_tokens, reserved_usd"
            f" FROM {self.accounts} WHERE {self.owner} = ? AND account = ?",
            (owner, account),
        ).fetchone()
        if row is None:
            return BudgetSpend(account)
        return BudgetSpend(account, int(row[0]), float(row[1]), int(row[2]), float(row[3]))

    def add(
        self,
        conn: sqlite3.Connection,
        owner: str,
        account: str,
        st: int,
        su: float,
        rt: int,
        ru: float,
    ) -> None:
        conn.execute(
            f"INSERT INTO {self.accounts} ({self.owner}, account, spent_tokens, spent_usd,"
            " reserved_tokens, reserved_usd) VALUES (?, ?, ?, ?, ?, ?)"
            f" ON CONFLICT ({self.owner}, account) DO UPDATE SET"
            " spent_tokens = spent_tokens + excluded.spent_tokens,"
            " spent_usd = spent_usd + excluded.spent_usd,"
            " reserved_tokens = reserved_tokens + excluded.reserved_tokens,"
            " reserved_usd = reserved_usd + excluded.reserved_usd",
            (owner, account, st, su, rt, ru),
        )

    def reserve(
        self,
        conn: sqlite3.Connection,
        owner: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int,
        usd: float,
    ) -> BudgetRefusal | None:
        held = conn.execute(
            f"SELECT 1 FROM {self.reservations} WHERE {self.owner} = ? AND turn_id = ?",
            (owner, turn_id),
        ).fetchone()
        if held is not None:
            return None
        for limit in limits:
            s = self.spend(conn, owner, limit.account)
            if limit.max_tokens and s.spent_tokens + s.reserved_tokens >= limit.max_tokens:
                return BudgetRefusal(limit.account, "tokens")
            if limit.max_usd and s.spent_usd + s.reserved_usd >= limit.max_usd:
                return BudgetRefusal(limit.account, "usd")
        for limit in limits:
            self.add(conn, owner, limit.account, 0, 0.0, tokens, usd)
        conn.execute(
            f"INSERT INTO {self.reservations} ({self.owner}, turn_id, accounts, tokens, usd)"
            " VALUES (?, ?, ?, ?, ?)",
            (owner, turn_id, json.dumps([x.account for x in limits]), tokens, usd),
        )
        return None

    def settle(
        self, conn: sqlite3.Connection, owner: str, turn_id: str, tokens: int, usd: float
    ) -> bool:
        row = conn.execute(
            f"SELECT accounts, tokens, usd FROM {self.reservations}"
            f" WHERE {self.owner} = ? AND turn_id = ?",
            (owner, turn_id),
        ).fetchone()
        if row is None:
            return False
        for account in json.loads(row[0]):
            self.add(conn, owner, account, tokens, usd, -int(row[1]), -float(row[2]))
        conn.execute(
            f"DELETE FROM {self.reservations} WHERE {self.owner} = ? AND turn_id = ?",
            (owner, turn_id),
        )
        return True


GROUP_LEDGER = Ledger("budget_accounts", "budget_reservations", "group_id")


def add_to_account(
    conn: sqlite3.Connection, group_id: str, account: str, st: int, su: float, rt: int, ru: float
) -> None:
    GROUP_LEDGER.add(conn, group_id, account, st, su, rt, ru)


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
                return GROUP_LEDGER.reserve(conn, group_id, turn_id, limits, tokens, usd)

        return await self._run(op)

    async def settle_budget(self, group_id: str, turn_id: str, tokens: int, usd: float) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                return GROUP_LEDGER.settle(conn, group_id, turn_id, tokens, usd)

        return await self._run(op)

    async def charge_budget(
        self, group_id: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                for account in accounts:
                    GROUP_LEDGER.add(conn, group_id, account, tokens, usd, 0, 0.0)

        await self._run(op)

    async def budget_spend(self, group_id: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        def op(conn: sqlite3.Connection) -> list[BudgetSpend]:
            with read_txn(conn):
                return [GROUP_LEDGER.spend(conn, group_id, a) for a in accounts]

        return await self._run(op)
