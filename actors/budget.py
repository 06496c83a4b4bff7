"""A turn's side of the group budgets (``store.budgets``): its limits, reserve, settle.

A turn charges two accounts of its group: the day's (UTC) and its message
chain's (every VP turn that follows one person's message). It reserves on
both before it starts and settles what it used when it ends, whatever the
end; a refused turn ends with an error result that names the budget. With
no limit on either account it reserves nothing and is charged at its end.
"""

from __future__ import annotations

import logging
import math
import time

from engine.messages import Usage
from protocol.settings import GroupSettings
from store.base import Store, StoreError
from store.budgets import BudgetLimit, BudgetRefusal, chain_account, day_account

log = logging.getLogger(__name__)


def budget_limits(
    settings: GroupSettings, chain_id: str, now: float | None = None
) -> list[BudgetLimit]:
    """The accounts a turn of this chain charges, with the group's limits."""
    return [
        BudgetLimit(
            day_account(time.time() if now is None else now),
            settings.budget_tokens_per_day,
            settings.budget_usd_per_day,
        ),
        BudgetLimit(
            chain_account(chain_id),
            settings.budget_tokens_per_message,
            settings.budget_usd_per_message,
        ),
    ]


class TurnBudget:
    """One turn's reservation: taken before the turn runs, settled once when it ends."""

    def __init__(self, store: Store, group_id: str, turn_id: str) -> None:
        self.store = store
        self.group_id = group_id
        self.turn_id = turn_id
        self.reserved = False
        # The accounts charged at the end without a reservation (no limits).
        self.unreserved: list[str] = []

    async def reserve(self, settings: GroupSettings, chain_id: str) -> str | None:
        """Reserve for the turn; None when it may run, else the sentence naming the budget."""
        limits = budget_limits(settings, chain_id)
        if not any(x.max_tokens or x.max_usd for x in limits):
            self.unreserved = [x.account for x in limits]
            return None
        refusal: BudgetRefusal | None = await self.store.reserve_budget(
            self.group_id, self.turn_id, limits
        )
        if refusal is None:
            self.reserved = True
            return None
        limit = next(x for x in limits if x.account == refusal.account)
        return refusal.describe(limit)

    def hand_over(self) -> tuple[str, ...]:
        """The accounts to charge where the turn's usage is counted (``TurnUsage.accounts``).

        They are charged there, once, in the write that ends the turn; :meth:`settle`
        then charges them nothing more.
        """
        unreserved, self.unreserved = self.unreserved, []
        return tuple(unreserved)

    async def settle(self, usage: Usage, cost: float) -> None:
        """Charge what the turn used (``cost`` in US dollars) and release its reservation (once).

        A cost that is not a finite number (a model without a price) is charged as 0.
        """
        reserved, unreserved = self.reserved, self.unreserved
        self.reserved, self.unreserved = False, []
        if not reserved and not unreserved:
            return
        cost = cost if math.isfinite(cost) else 0.0
        tokens = usage.input_tokens + usage.output_tokens
        try:
            if reserved:
                await self.store.settle_budget(self.group_id, self.turn_id, tokens, cost)
            else:
                await self.store.charge_budget(self.group_id, unreserved, tokens, cost)
        except StoreError as exc:
            # The reservation stays held (the turn's group spends it): never under-counted.
            log.warning("budget of turn %s not settled: %s", self.turn_id, exc)
