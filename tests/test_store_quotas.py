"""Person quotas and usage records in the store, on both backends."""

from __future__ import annotations

import asyncio
import calendar

from store import Store
from store.budgets import BudgetLimit, BudgetRefusal, BudgetSpend, day_account
from store.chatviews import TurnUsage
from store.quotas import NO_PERSON, PersonQuota, UsageKey, UsageRow, month_account
from store.turns import TurnEnd, TurnRecord
from tests.fixtures.stores import StoreFactory

# 2026-01-31 23:59:00 UTC and one minute later: a new day and a new month.
LAST_MINUTE = calendar.timegm((2026, 1, 31, 23, 59, 0, 0, 0, 0))
NEXT_MONTH = LAST_MINUTE + 60


async def test_a_quota_is_kept_and_removed(store: Store) -> None:
    assert await store.get_person_quota("ann") is None
    quota = PersonQuota(tokens_per_day=5000, usd_per_month=2.5)
    await store.set_person_quota("ann", quota)
    assert await store.get_person_quota("ann") == quota
    assert await store.get_person_quota("bob") is None
    await store.set_person_quota("ann", None)
    assert await store.get_person_quota("ann") is None


async def test_the_person_ledger_rolls_over_with_the_day_and_the_month(store: Store) -> None:
    quota = PersonQuota(tokens_per_day=1500, tokens_per_month=2500)
    limits = quota.limits(LAST_MINUTE)
    assert [x.account for x in limits] == ["day:2026-01-31", "month:2026-01"]
    assert await store.reserve_person("ann", "t1", limits, tokens=1000) is None
    assert await store.settle_person("ann", "t1", 1600, 0.1)
    # Today's tokens are spent.
    refusal = await store.reserve_person("ann", "t2", limits, tokens=1000)
    assert refusal == BudgetRefusal("day:2026-01-31", "tokens")
    # A minute later it is a new day and a new month: a fresh ledger.
    later = quota.limits(NEXT_MONTH)
    assert [x.account for x in later] == ["day:2026-02-01", "month:2026-02"]
    assert await store.reserve_person("ann", "t3", later, tokens=1000) is None
    assert await store.settle_person("ann", "t3", 1000, 0.0)
    # Another person's ledger is apart.
    assert await store.reserve_person("bob", "t4", limits, tokens=1000) is None
    day, month = await store.person_spend("ann", [x.account for x in limits])
    assert (day.spent_tokens, month.spent_tokens, day.reserved_tokens) == (1600, 1600, 0)
    assert abs(day.spent_usd - 0.1) < 1e-9


async def test_the_month_limit_refuses_across_days(store: Store) -> None:
    quota = PersonQuota(usd_per_month=1.0)
    day1 = calendar.timegm((2026, 3, 1, 12, 0, 0, 0, 0, 0))
    await store.charge_person("ann", [x.account for x in quota.limits(day1)], 100, 1.0)
    day2 = day1 + 86_400
    assert month_account(day2) == "month:2026-03" and day_account(day2) == "day:2026-03-02"
    refusal = await store.reserve_person("ann", "t1", quota.limits(day2))
    assert refusal == BudgetRefusal("month:2026-03", "usd")


async def test_person_reservations_on_many_stores_never_pass_the_limit(
    store_factory: StoreFactory,
) -> None:
    """Turns of one person in several groups, on several actors, share one ledger."""
    stores = [store_factory() for _ in range(4)]
    limits = [BudgetLimit(day_account(), max_tokens=6000)]

    async def turn(i: int) -> bool:
        return await stores[i % 4].reserve_person("ann", f"g{i % 3}:t{i}", limits) is None

    admitted = await asyncio.gather(*(turn(i) for i in range(40)))
    assert sum(admitted) == 6
    [spend] = await stores[1].person_spend("ann", [limits[0].account])
    assert spend == BudgetSpend(limits[0].account, 0, 0.0, 6000, 0.0)


async def test_usage_rows_are_counted_once_per_turn(store: Store) -> None:
    key = UsageKey("2026-01-31", "ann", "linus", "openai:gpt-x")
    usage = TurnUsage("t1", 100, 20, 0.5, row=key)
    assert await store.add_usage("grp_a", usage)
    assert not await store.add_usage("grp_a", usage)
    await store.add_usage("grp_a", TurnUsage("t2", 1, 2, 0.25, row=key))
    await store.add_usage("grp_b", TurnUsage("t3", 5, 5, 0.0, row=key))
    system = UsageKey("2026-02-01", NO_PERSON, "rams", "offline:default")
    await store.add_usage("grp_a", TurnUsage("t4", 7, 8, 0.0, row=system))
    # A turn's finish counts its usage in the same write.
    await store.add_turns(
        "grp_b",
        [TurnRecord(turn_id="t5", group_id="grp_b", vp_id="rams", trigger_id="m1", chain_id="m1")],
    )
    bob = UsageKey("2026-02-01", "bob", "rams", "offline:default")
    await store.finish_turn(
        "grp_b", "t5", None, TurnEnd.ANSWERED, usage=TurnUsage("t5", 3, 4, 0.1, row=bob)
    )
    # Without a row, nothing is recorded but the group's totals.
    await store.add_usage("grp_a", TurnUsage("t6", 1000, 1000, 9.0))
    rows = await store.usage_rows("2026-01-01", "2026-02-28")
    assert rows == [
        UsageRow("2026-01-31", "ann", "grp_a", "linus", "openai:gpt-x", 101, 22, 0.75),
        UsageRow("2026-01-31", "ann", "grp_b", "linus", "openai:gpt-x", 5, 5, 0.0),
        UsageRow("2026-02-01", NO_PERSON, "grp_a", "rams", "offline:default", 7, 8, 0.0),
        UsageRow("2026-02-01", "bob", "grp_b", "rams", "offline:default", 3, 4, 0.1),
    ]
    assert [r.user for r in await store.usage_rows("2026-02-01", "2026-02-01")] == [
        NO_PERSON,
        "bob",
    ]
    assert await store.usage_rows("2026-01-01", "2026-02-28", user="bob") == rows[3:]
    assert await store.usage_rows("2025-01-01", "2025-12-31") == []
    # Rows outlive their group.
    await store.delete_group("grp_a")
    assert len(await store.usage_rows("2026-01-01", "2026-02-28")) == 4
