"""Per-person quotas and usage records: who spent what, and how much they may.

Two things live here, both written by the turns of every group:

- **A person's ledger.** One ledger per person, shared by every group they
  write in: accounts ``day:YYYY-MM-DD`` and ``month:YYYY-MM`` (UTC), with
  the same spent/reserved book-keeping and the same reserve-then-settle
  rules as a group's budget (``store.budgets``). It is keyed by the person
  alone (a table keyed by username; on Redis ``P:u:{user}:ledger``, a slot
  of its own), so a reservation made by a turn in one group is seen by a
  turn in any other, on any VP actor, in one atomic step.
- **Usage records.** Each finished turn adds its input and output tokens
  and cost to one row per (day, person, group, VP, model), once (in the
  same step that counts the group's usage, idempotent on the turn id).
  The person is the one whose message started the turn's chain: a VP's
  hand-off keeps the person at its origin. A turn no person started is
  recorded under :data:`NO_PERSON`. Rows outlive their group (an admin
  still sees what a deleted group spent).

A person's quota (:class:`PersonQuota`) is set by an admin; a group's day
and month limits are group settings (``protocol.settings``).
"""

from __future__ import annotations

import math
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from store.budgets import (
    RESERVE_TOKENS,
    RESERVE_USD,
    BudgetLimit,
    BudgetRefusal,
    BudgetSpend,
    day_account,
)

NO_PERSON = "(system)"
"""The person of a turn no person's message started (not a valid username)."""

# Separates the parts of a usage row's key on Redis (never in a name or id).
ROW_SEP = "\x1f"


def month_account(now: float | None = None) -> str:
    return "month:" + time.strftime("%Y-%m", time.gmtime(time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class PersonQuota:
    """A person's limits across all groups (0: no limit)."""

    tokens_per_day: int = 0
    usd_per_day: float = 0.0
    tokens_per_month: int = 0
    usd_per_month: float = 0.0

    @property
    def limited(self) -> bool:
        return any(
            (self.tokens_per_day, self.usd_per_day, self.tokens_per_month, self.usd_per_month)
        )

    def limits(self, now: float | None = None) -> list[BudgetLimit]:
        """The person's ledger accounts a turn charges now, with these limits."""
        return [
            BudgetLimit(day_account(now), self.tokens_per_day, self.usd_per_day),
            BudgetLimit(month_account(now), self.tokens_per_month, self.usd_per_month),
        ]

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> PersonQuota:
        def num(name: str) -> float:
            value = data.get(name, 0)
            return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0

        return cls(
            int(num("tokens_per_day")),
            num("usd_per_day"),
            int(num("tokens_per_month")),
            num("usd_per_month"),
        )


@dataclass(frozen=True, slots=True)
class UsageKey:
    """Where a turn's usage is recorded: its UTC day, person, VP and model (the group aside)."""

    day: str
    user: str
    vp: str
    model: str

    @property
    def month(self) -> str:
        return self.day[:7]

    def field(self) -> str:
        """The row's key on Redis (its group is the hash's)."""
        return ROW_SEP.join((self.day, self.user, self.vp, self.model))

    @classmethod
    def of_field(cls, text: str) -> UsageKey:
        day, user, vp, model = text.split(ROW_SEP)
        return cls(day, user, vp, model)


@dataclass(frozen=True, slots=True)
class UsageRow:
    """What one person's turns of one VP and model in one group used in one day."""

    day: str
    user: str
    group_id: str
    vp: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0


class Quotas(Protocol):
    """The store's side of person quotas and usage records (both backends)."""

    @abstractmethod
    async def get_person_quota(self, username: str) -> PersonQuota | None:
        """The person's quota, or None when none was set."""

    @abstractmethod
    async def set_person_quota(self, username: str, quota: PersonQuota | None) -> None:
        """Set (or with None remove) the person's quota."""

    @abstractmethod
    async def reserve_person(
        self,
        username: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        """Reserve on the person's ledger for a turn, or refuse it (as ``reserve_budget``)."""

    @abstractmethod
    async def settle_person(self, username: str, turn_id: str, tokens: int, usd: float) -> bool:
        """Release the turn's reservation on the person's ledger and charge what it used."""

    @abstractmethod
    async def charge_person(
        self, username: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        """Add what a turn that reserved nothing used to the person's accounts."""

    @abstractmethod
    async def person_spend(self, username: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        """The person's ledgers of these accounts, in order (empty ones zero)."""

    @abstractmethod
    async def usage_rows(
        self, first_day: str, last_day: str, user: str | None = None
    ) -> list[UsageRow]:
        """The usage rows of the days ``first_day``..``last_day`` (``YYYY-MM-DD``, both
        included), of one person when ``user`` is given, sorted by day, person, group,
        VP and model."""
