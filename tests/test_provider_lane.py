"""The provider lane: a cluster-wide cap on model calls; turns over it wait, shown as queued."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from actors.group_events import GroupEvents
from actors.writer import TurnWriter
from engine.engine import Engine
from engine.events import EngineEvent, NoticeEvent, NoticeKind
from engine.messages import Conversation, Message
from engine.provider_lane import ProviderLane
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.offline import OfflineProvider
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig
from protocol import AgentState
from store.base import Store
from tests.fixtures.stores import StoreFactory


class GatedProvider:
    """The offline model, each call held until the test opens its gate."""

    name = "offline"

    def __init__(self) -> None:
        self.inner = OfflineProvider(default_tps=0)
        self.started: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        gate = asyncio.Event()
        await self.started.put(gate)
        await gate.wait()
        async for item in self.inner.stream(request):
            yield item

    async def aclose(self) -> None:
        return None


async def test_slots_are_counted_leases_on_both_backends(store_factory: StoreFactory) -> None:
    state = store_factory.config.open_provider_state()
    try:
        assert await state.try_acquire("openai", "a", 2, now=100.0, lease_s=10)
        assert await state.try_acquire("openai", "b", 2, now=100.0, lease_s=10)
        assert not await state.try_acquire("openai", "c", 2, now=101.0, lease_s=10)
        # Another key is another lane.
        assert await state.try_acquire("openai:gpt-4o", "c", 1, now=101.0, lease_s=10)
        await state.release("openai", "a")
        assert await state.try_acquire("openai", "c", 2, now=102.0, lease_s=10)
        assert not await state.try_acquire("openai", "d", 2, now=105.0, lease_s=10)
        # A holder that never released (a dead process): its lease lapses.
        assert await state.try_acquire("openai", "d", 2, now=110.5, lease_s=10)
    finally:
        await state.aclose()


async def test_a_full_lane_queues_turns_and_the_vp_shows_queued(
    store_factory: StoreFactory,
) -> None:
    provider = GatedProvider()
    config = EngineConfig(provider_concurrency={"offline": 1}, offline_tps=0)
    # Two engines (two VP actors) on the deployment's shared provider state.
    states = [store_factory.config.open_provider_state() for _ in range(2)]
    engines = [
        Engine(
            ProviderRegistry(config, {"offline": provider}),
            model="offline:test",
            settings=config,
            provider_state=state,
        )
        for state in states
    ]
    store: Store = store_factory()
    events = GroupEvents(store, "g1")
    writers = [TurnWriter(events, vp, f"t-{vp}") for vp in ("linus", "steve")]
    notices: list[list[NoticeEvent]] = [[], []]
    queued = asyncio.Event()

    def sink(i: int) -> Any:
        async def emit(event: EngineEvent) -> None:
            if isinstance(event, NoticeEvent):
                notices[i].append(event)
            await writers[i].feed(event)
            if isinstance(event, NoticeEvent) and event.kind is NoticeKind.QUEUED:
                queued.set()

        return emit

    first = asyncio.create_task(
        engines[0].run_turn(Conversation(id="a"), Message.user("1"), system="s", emit=sink(0))
    )
    gate_one = await provider.started.get()  # the first call holds the only slot
    second = asyncio.create_task(
        engines[1].run_turn(Conversation(id="b"), Message.user("2"), system="s", emit=sink(1))
    )
    await queued.wait()
    assert notices[1][0].kind is NoticeKind.QUEUED and notices[1][0].detail["waiting"] is True
    assert provider.started.empty()  # the second call has not reached the provider
    assert writers[1].state is AgentState.QUEUED
    gate_one.set()
    assert (await first).error is None
    gate_two = await provider.started.get()
    gate_two.set()
    result = await second
    assert result.error is None and result.text
    assert [n.detail["waiting"] for n in notices[1]] == [True, False]
    for writer in writers:
        await writer.finish()
    states_seen = [
        e.envelope()["state"]
        for e in (await store.read_events("g1", 0, limit=100)).events
        if e.envelope()["type"] == "agent_status" and e.envelope()["vpId"] == "steve"
    ]
    assert states_seen[0] == "queued" and "thinking" in states_seen
    for state in states:
        await state.aclose()


async def test_a_model_cap_and_a_provider_cap_both_apply() -> None:
    from engine.provider_lane import LocalSlots

    lane = ProviderLane({"openai": 3, "openai:gpt-4o": 1}, LocalSlots())
    assert lane.keys_for("openai:gpt-4o") == [("openai", 3), ("openai:gpt-4o", 1)]
    assert lane.keys_for("anthropic:claude-x") == []
    waited = asyncio.Event()

    async def on_wait() -> None:
        waited.set()

    async with lane.slot("openai:gpt-4o"):
        task = asyncio.create_task(_hold(lane, "openai:gpt-4o", on_wait))
        await waited.wait()
        # Another model of the provider still has room under the provider cap.
        async with lane.slot("openai:gpt-4o-mini"):
            pass
    await task


async def _hold(lane: ProviderLane, model: str, on_wait: Any) -> None:
    async with lane.slot(model, on_wait):
        pass
