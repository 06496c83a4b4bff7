"""Per-group budgets: tokens and USD per day and per message chain, reserved and settled.

A budget account is one ledger of a group: ``day:YYYY-MM-DD`` (UTC) or
``chain:<chain id>``. Each holds what finished turns spent and what running
turns have reserved. A turn reserves before it runs (``reserve_budget``) and
settles what it used when it ends (``settle_budget``); both are one atomic
step in the store (a Lua script on Redis, an IMMEDIATE transaction on
SQLite), so turns on many VP actors see each other's reservations.

A turn is refused when, on any of its accounts, what is spent plus what is
reserved has reached a limit. So the spend can pass a limit only by what
the turns already running when it was reached use beyond their reservation,
never by turns started after it. A limit of 0 means none; a turn none of
whose accounts has a limit reserves nothing and is charged when it ends
(``charge_budget``), so no store write precedes its first token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# What one turn reserves on each of its accounts while it runs.
RESERVE_TOKENS = 1000
RESERVE_USD = 0.0


@dataclass(frozen=True, slots=True)
class BudgetLimit:
    """One account a turn charges, with its limits (0: no limit)."""

    account: str
    max_tokens: int = 0
    max_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class BudgetSpend:
    """One account's ledger: spent by finished turns, reserved by running ones."""

    account: str
    spent_tokens: int = 0
    spent_usd: float = 0.0
    reserved_tokens: int = 0
    reserved_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class BudgetRefusal:
    """The budget a turn was refused by: its account and ``tokens`` or ``usd``."""

    account: str
    kind: str

    @classmethod
    def parse(cls, text: str) -> BudgetRefusal | None:
        if not text:
            return None
        account, _, kind = text.rpartition("|")
        return cls(account, kind)

    def describe(self, limit: BudgetLimit) -> str:
        """A sentence naming the budget, for the refused turn's result."""
        scope = "today's" if self.account.startswith("day:") else "this message's"
        if self.kind == "tokens":
            amount = f"{limit.max_tokens} tokens"
        else:
            amount = f"${limit.max_usd:g}"
        return f"The group's budget for {scope} turns ({amount}) is spent; no more turns run."


def day_account(now: float | None = None) -> str:
    return "day:" + time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))


def chain_account(chain_id: str) -> str:
    return f"chain:{chain_id}"


class Budgets(Protocol):
    """The store's side of budgets (both backends implement it)."""

    async def reserve_budget(
        self,
        group_id: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        """Reserve for a turn on every account, or refuse it (nothing reserved).

        A turn that reserved already is not charged again (None).
        """
        ...

    async def settle_budget(self, group_id: str, turn_id: str, tokens: int, usd: float) -> bool:
        """Release the turn's reservation and charge what it used; False if it had none."""
        ...

    async def charge_budget(
        self, group_id: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        """Add what a turn that reserved nothing used to these accounts."""
        ...

    async def budget_spend(self, group_id: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        """The ledgers of these accounts, in the order given (empty ones zero)."""
        ...
