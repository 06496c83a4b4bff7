"""A turn's side of budgets and quotas: its limits, reserve, settle.

A turn charges three accounts of its group (``store.budgets``): the day's
and the month's (UTC) and its message chain's (every VP turn that follows
one person's message); and, when a person's message started its chain, two
accounts of that person's own ledger (``store.quotas``), shared by all
their groups: the day's and the month's. It reserves on the ledgers that
have a limit before it starts, the person's first, and settles what it
used when it ends, whatever the end. A refused turn ends with an error
result that names the budget (:class:`QuotaRefusal`). With no limit on a
ledger it reserves nothing there and is charged at its end.

The coordinator may reserve a turn's budgets before it dispatches it
(``coordinator.quota_gate``): a reservation is made once per turn id, so
the turn's own reserve then finds it held and goes ahead.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from engine.messages import Usage
from protocol.inbox import ActivityEvent
from protocol.settings import GroupSettings
from store.base import Store, StoreError
from store.budgets import BudgetLimit, BudgetRefusal, chain_account, day_account
from store.mentions import ACTIVITY_LOG
from store.quotas import PersonQuota, month_account

log = logging.getLogger(__name__)

_PERIODS = {"day": "today", "month": "this month", "chain": "this message"}
_NEXT = {"day": "tomorrow (UTC)", "month": "next month (UTC)", "chain": "the next message"}


def budget_limits(
    settings: GroupSettings, chain_id: str, now: float | None = None
) -> list[BudgetLimit]:
    """The group's accounts a turn of this chain charges, with the group's limits."""
    now = time.time() if now is None else now
    return [
        BudgetLimit(day_account(now), settings.budget_tokens_per_day, settings.budget_usd_per_day),
        BudgetLimit(
            month_account(now), settings.budget_tokens_per_month, settings.budget_usd_per_month
        ),
        BudgetLimit(
            chain_account(chain_id),
            settings.budget_tokens_per_message,
            settings.budget_usd_per_message,
        ),
    ]


def _limited(limits: list[BudgetLimit]) -> bool:
    return any(x.max_tokens or x.max_usd for x in limits)


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """Whose budget refused a turn, for which period, and its limit.

    ``person`` is the person whose own quota it was (None: the group's).
    """

    person: str | None
    period: str
    unit: str
    limit: float

    @classmethod
    def of(
        cls, person: str | None, refusal: BudgetRefusal, limits: list[BudgetLimit]
    ) -> QuotaRefusal:
        limit = next(x for x in limits if x.account == refusal.account)
        period = refusal.account.partition(":")[0]
        amount = float(limit.max_tokens) if refusal.kind == "tokens" else limit.max_usd
        return cls(person, period, refusal.kind, amount)

    @property
    def amount(self) -> str:
        return f"{int(self.limit):,} tokens" if self.unit == "tokens" else f"${self.limit:g}"

    def describe(self) -> str:
        """One sentence for the group: whose budget, which period, the limit, what to do."""
        when = _PERIODS.get(self.period, self.period)
        if self.person is not None:
            return (
                f"{self.person}'s own budget for {when} ({self.amount}) is spent, so the VPs "
                f"will not answer {self.person}'s messages until {_NEXT.get(self.period)}. "
                "An admin can raise it in the admin panel."
            )
        if self.period == "chain":
            return (
                f"The group's budget for {when} ({self.amount}) is spent; no more turns run "
                "on it. Send a new message, or ask a group owner to raise it in the group settings."
            )
        return (
            f"The group's budget for {when} ({self.amount}) is spent, so no VP answers here "
            f"until {_NEXT.get(self.period)}. A group owner can raise it in the group settings."
        )

    def detail(self) -> dict[str, object]:
        """The notice's ``detail``: ``scope``, ``period``, ``unit``, ``limit`` (and ``user``)."""
        out: dict[str, object] = {
            "scope": "group" if self.person is None else "person",
            "period": self.period,
            "unit": self.unit,
            "limit": self.limit,
        }
        if self.person is not None:
            out["user"] = self.person
        return out


class TurnBudget:
    """One turn's reservations: taken before the turn runs, settled once when it ends."""

    def __init__(
        self, store: Store, group_id: str, turn_id: str, person: str | None = None
    ) -> None:
        self.store = store
        self.group_id = group_id
        self.turn_id = turn_id
        # The person whose quota the turn spends (None: a turn no person started).
        self.person = person
        self.reserved = False
        self.person_reserved = False
        # The accounts charged at the end without a reservation (no limits).
        self.unreserved: list[str] = []
        self.person_unreserved: list[str] = []
        # Why the turn was refused, when it was.
        self.refusal: QuotaRefusal | None = None

    async def reserve(self, settings: GroupSettings, chain_id: str) -> str | None:
        """Reserve for the turn; None when it may run, else the sentence naming the budget."""
        now = time.time()
        if self.person is not None:
            quota = await self.store.get_person_quota(self.person) or PersonQuota()
            mine = quota.limits(now)
            if not _limited(mine):
                self.person_unreserved = [x.account for x in mine]
            else:
                refused = await self.store.reserve_person(self.person, self.turn_id, mine)
                if refused is not None:
                    self.refusal = QuotaRefusal.of(self.person, refused, mine)
                    return self.refusal.describe()
                self.person_reserved = True
        limits = budget_limits(settings, chain_id, now)
        if not _limited(limits):
            self.unreserved = [x.account for x in limits]
            return None
        refusal = await self.store.reserve_budget(self.group_id, self.turn_id, limits)
        if refusal is None:
            self.reserved = True
            return None
        # The person's reservation is given back: this turn will not run.
        await self._release_person()
        self.refusal = QuotaRefusal.of(None, refusal, limits)
        return self.refusal.describe()

    async def _release_person(self) -> None:
        if self.person_reserved and self.person is not None:
            self.person_reserved = False
            await self.store.settle_person(self.person, self.turn_id, 0, 0.0)
        self.person_unreserved = []

    def hand_over(self) -> tuple[str, ...]:
        """The group accounts to charge where the turn's usage is counted (``TurnUsage.accounts``).

        They are charged there, once, in the write that ends the turn; :meth:`settle`
        then charges them nothing more.
        """
        unreserved, self.unreserved = self.unreserved, []
        return tuple(unreserved)

    async def _tell_spent(self, person: str) -> None:
        """Every gateway moves the person's quota meter in every group they watch."""
        spent = ActivityEvent(
            kind="spent",
            group_id=self.group_id,
            user=person,
            message_id=self.turn_id,
            ts=time.time(),
        )
        await self.store.append_event(ACTIVITY_LOG, spent)

    async def settle(self, usage: Usage, cost: float) -> None:
        """Charge what the turn used (``cost`` in US dollars) and release its reservations (once).

        A cost that is not a finite number (a model without a price) is charged as 0.
        """
        reserved, unreserved = self.reserved, self.unreserved
        mine, mine_unreserved = self.person_reserved, self.person_unreserved
        self.reserved, self.unreserved = False, []
        self.person_reserved, self.person_unreserved = False, []
        cost = cost if math.isfinite(cost) else 0.0
        tokens = usage.input_tokens + usage.output_tokens
        try:
            if reserved:
                await self.store.settle_budget(self.group_id, self.turn_id, tokens, cost)
            elif unreserved:
                await self.store.charge_budget(self.group_id, unreserved, tokens, cost)
            if self.person is not None and mine:
                await self.store.settle_person(self.person, self.turn_id, tokens, cost)
                if tokens or cost:
                    await self._tell_spent(self.person)
            elif self.person is not None and mine_unreserved and (tokens or cost):
                await self.store.charge_person(self.person, mine_unreserved, tokens, cost)
        except StoreError as exc:
            # A reservation stays held (its ledger spends it): never under-counted.
            log.warning("budget of turn %s not settled: %s", self.turn_id, exc)
