"""Per-group budgets in the store: reserve and settle on both backends, exact under concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from engine.events import StopReason
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.offline import OfflineProvider
from engine.settings import EngineConfig
from protocol import GroupSettings
from store import Store
from store.base import Group, GroupMessage
from store.budgets import (
    RESERVE_TOKENS,
    BudgetLimit,
    BudgetRefusal,
    BudgetSpend,
    chain_account,
    day_account,
)
from tests.fixtures.stores import StoreFactory
from tests.group_helpers import ROSTER


async def test_reserve_settle_and_refuse(store: Store) -> None:
    day = day_account(0)
    assert day == "day:1970-01-01"
    limits = [BudgetLimit(day, max_tokens=2500), BudgetLimit(chain_account("m1"), max_usd=0.5)]
    assert await store.reserve_budget("g1", "t1", limits, tokens=1000, usd=0.1) is None
    # A turn that reserved already is not charged twice.
    assert await store.reserve_budget("g1", "t1", limits, tokens=1000, usd=0.1) is None
    assert await store.budget_spend("g1", [day]) == [BudgetSpend(day, 0, 0.0, 1000, 0.1)]
    assert await store.settle_budget("g1", "t1", 2600, 0.2)
    assert not await store.settle_budget("g1", "t1", 2600, 0.2)
    [spend] = await store.budget_spend("g1", [day])
    assert (spend.spent_tokens, spend.reserved_tokens) == (2600, 0)
    assert abs(spend.spent_usd - 0.2) < 1e-9 and abs(spend.reserved_usd) < 1e-9
    # The day's tokens are spent: the next turn is refused, naming the budget.
    refusal = await store.reserve_budget("g1", "t2", limits)
    assert refusal == BudgetRefusal(day, "tokens")
    assert "today's" in refusal.describe(limits[0]) and "2500 tokens" in refusal.describe(limits[0])
    # Other groups and accounts are apart; no limit (0) never refuses.
    assert await store.reserve_budget("g2", "t3", limits) is None
    assert await store.reserve_budget("g1", "t4", [BudgetLimit(day)]) is None
    # Refused on USD by the chain account.
    usd = [BudgetLimit(chain_account("m1"), max_usd=0.2)]
    assert await store.reserve_budget("g1", "t5", usd) == BudgetRefusal(chain_account("m1"), "usd")


async def test_a_charge_without_reservation_adds_to_every_account(store: Store) -> None:
    """A turn with no limit reserves nothing; what it used is charged at its end."""
    accounts = [day_account(0), chain_account("m1")]
    await store.charge_budget("g1", accounts, 700, 0.25)
    await store.charge_budget("g1", accounts[:1], 300, 0.5)
    day, chain = await store.budget_spend("g1", accounts)
    assert (day.spent_tokens, day.reserved_tokens, chain.spent_tokens) == (1000, 0, 700)
    assert abs(day.spent_usd - 0.75) < 1e-9 and abs(chain.spent_usd - 0.25) < 1e-9
    assert await store.budget_spend("g2", accounts[:1]) == [BudgetSpend(accounts[0])]


async def test_concurrent_turns_on_several_stores_never_pass_the_limit(
    store_factory: StoreFactory,
) -> None:
    """Turns on many actors (store instances stand for processes) reserve at once."""
    stores = [store_factory() for _ in range(4)]
    day = day_account()
    limits = [BudgetLimit(day, max_tokens=5000)]

    async def turn(i: int) -> bool:
        store = stores[i % len(stores)]
        return await store.reserve_budget("g", f"t{i}", limits, tokens=1000) is None

    admitted = await asyncio.gather(*(turn(i) for i in range(40)))
    # Exactly as many as the limit holds reservations for: no double spend.
    assert sum(admitted) == 5
    [spend] = await stores[0].budget_spend("g", [day])
    assert spend.reserved_tokens == 5000
    # They used more than reserved: the overshoot is theirs alone, and nothing else starts.
    ran = [i for i, ok in enumerate(admitted) if ok]
    await asyncio.gather(*(stores[i % 4].settle_budget("g", f"t{i}", 1100, 0.0) for i in ran))
    [spend] = await stores[0].budget_spend("g", [day])
    assert (spend.spent_tokens, spend.reserved_tokens) == (5500, 0)
    retry = await asyncio.gather(*(turn(i) for i in range(40, 60)))
    assert not any(retry)


class _Held(OfflineProvider):
    """The offline model, each call waiting for ``gate``; ``entered`` counts calls begun."""

    def __init__(self, gate: asyncio.Event, entered: list[str], name: str) -> None:
        super().__init__()
        self.gate, self.entered, self.vp = gate, entered, name

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.entered.append(self.vp)
        await self.gate.wait()
        async for item in super().stream(request):
            yield item


async def test_turns_on_several_vp_actors_share_the_group_budget(
    store_factory: StoreFactory,
) -> None:
    gate, entered = asyncio.Event(), []
    workers = []
    for vp in ROSTER:
        cfg = RuntimeConfig(
            store=store_factory.config,
            engine=EngineConfig(model="offline:default", offline_tps=0),
            provider_overrides={"offline": _Held(gate, entered, vp)},
            dream_idle_s=0,
            dream_every_turns=0,
        )
        workers.append(VPActor(vp, cfg))
    store = workers[0].services.store
    settings = GroupSettings(budget_tokens_per_day=2 * RESERVE_TOKENS)
    await store.create_group(Group(id="grp_budget", name="g", roster=ROSTER, settings=settings))
    msg, _ = await store.append_message(
        "grp_budget", GroupMessage(author="ann", role="user", text="@all hello")
    )
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    reqs = [TurnRequest("grp_budget", vp, TurnRequest.new_turn_id(vp), origin) for vp in ROSTER]
    try:
        turns = [
            asyncio.create_task(w.call(RunTurn(r))) for w, r in zip(workers, reqs, strict=True)
        ]
        # Two turns hold the day's budget between them; the third is refused at once.
        done, _ = await asyncio.wait(turns, return_when=asyncio.FIRST_COMPLETED)
        [refused] = [t.result() for t in done]
        assert refused.reason is StopReason.ERROR
        assert refused.error is not None
        assert "group's budget for today (2,000 tokens)" in refused.error
        gate.set()
        outcomes = await asyncio.gather(*turns)
        assert sorted(o.reason.value for o in outcomes) == ["end_turn", "end_turn", "error"]
        assert len(entered) == 2
        # Both ran past their reservation: spent is what they used, nothing held.
        [spend] = await store.budget_spend("grp_budget", [day_account()])
        assert spend.reserved_tokens == 0 and spend.spent_tokens > 0
        # Once spent, the next turn is refused too, and says which budget.
        late = await workers[0].call(
            RunTurn(
                TurnRequest("grp_budget", ROSTER[0], TurnRequest.new_turn_id(ROSTER[0]), origin)
            )
        )
        # (each turn's prompt alone is over a thousand tokens: the system prompt)
        assert spend.spent_tokens >= settings.budget_tokens_per_day
        assert late.reason is StopReason.ERROR and "budget" in (late.error or "")
    finally:
        for w in workers:
            await w.close()


async def test_a_turn_without_limits_is_charged_once_with_its_usage(
    store_factory: StoreFactory,
) -> None:
    """No limit set: nothing is reserved, and the write that ends the turn charges both accounts."""
    cfg = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(model="offline:default", offline_tps=0),
        dream_idle_s=0,
        dream_every_turns=0,
    )
    worker = VPActor(ROSTER[0], cfg)
    store = worker.services.store
    try:
        await store.create_group(Group(id="grp_free", name="g", roster=ROSTER[:1]))
        msg, _ = await store.append_message(
            "grp_free", GroupMessage(author="ann", role="user", text="hello")
        )
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        req = TurnRequest("grp_free", ROSTER[0], TurnRequest.new_turn_id(ROSTER[0]), origin)
        outcome = await worker.call(RunTurn(req))
        assert outcome.reason is StopReason.END_TURN
        totals = await store.group_usage("grp_free")
        assert totals.turns == 1 and totals.input_tokens > 0
        used = totals.input_tokens + totals.output_tokens
        accounts = [day_account(), chain_account(msg.id)]
        assert await store.budget_spend("grp_free", accounts) == [
            BudgetSpend(account, used, totals.cost_usd) for account in accounts
        ]
    finally:
        await worker.close()
