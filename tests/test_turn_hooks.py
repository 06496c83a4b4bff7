"""Turn hooks and the recent memory tier, on both store backends."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actors.config import RuntimeConfig
from actors.hooks import AfterTurn, BeforeTurn, HookServices, load_factory
from actors.memory_tier import RECENT_TURNS, RecallHook, recall_budget
from actors.runner import TurnRunner
from actors.turns import TurnOrigin, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from engine.events import StopReason
from engine.providers.scripted import ScriptedModel
from engine.settings import EngineConfig
from store.base import Group, GroupMessage
from store.memory import MemoryBackend, MemoryItem, group_scope, user_scope
from tests.fixtures.stores import StoreFactory

SEEN: list[Any] = []


class Probe:
    """A hook that adds one line to the prompt and records both calls."""

    name = "probe"

    def __init__(self, services: HookServices) -> None:
        self.vp = services.persona.id

    async def before_turn(self, turn: BeforeTurn) -> list[str]:
        SEEN.append(turn)
        return [f"- probe says hello to {self.vp}"]

    async def after_turn(self, turn: AfterTurn) -> None:
        SEEN.append(turn)


def make_probe(services: HookServices) -> Probe:
    return Probe(services)


class Broken:
    name = "broken"

    def __init__(self, services: HookServices) -> None:
        pass

    async def before_turn(self, turn: BeforeTurn) -> list[str]:
        raise RuntimeError("this hook is broken")

    async def after_turn(self, turn: AfterTurn) -> None:
        raise RuntimeError("this hook is broken")


@pytest.fixture
async def worker(store_factory: StoreFactory) -> AsyncIterator[tuple[VPActor, ScriptedModel]]:
    model = ScriptedModel(lambda request: "fine")
    cfg = RuntimeConfig(
        store=store_factory.config,
        engine=EngineConfig(model="offline:default", offline_tps=0),
        provider_overrides={"offline": model},
        dream_idle_s=0,
        dream_every_turns=0,
        turn_hooks=("tests.test_turn_hooks:Broken", "tests.test_turn_hooks:make_probe"),
    )
    vp = VPActor("steve", cfg)
    yield vp, model
    await vp.close()


async def test_configured_hooks_add_to_the_prompt_and_see_the_turn(
    worker: tuple[VPActor, ScriptedModel],
) -> None:
    vp, model = worker
    SEEN.clear()
    store = vp.services.store
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await store.create_group(Group(id=gid, name="g", roster=["steve"]))
    msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text="hi"))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    req = TurnRequest(gid, "steve", TurnRequest.new_turn_id("steve"), origin)
    outcome = await vp.call(RunTurn(req))
    # The broken hook is skipped; the turn runs and the probe's line is in the prompt.
    assert outcome.reason is StopReason.END_TURN and outcome.text == "fine"
    assert "probe says hello to steve" in model.requests[0].system
    before, after = SEEN
    assert isinstance(before, BeforeTurn) and before.query == "[ann] hi"
    # The window of the model the turn ran on, from the model registry.
    window = vp.services.engine.window_for()
    assert before.user_id == "ann" and before.context_window == window == 128_000
    assert isinstance(after, AfterTurn)
    assert (after.turn_id, after.text, after.message_id) == (
        req.turn_id,
        "fine",
        outcome.message_id,
    )
    # Recall and dream scheduling are hooks of the actor too, first.
    names = [h.name for h in vp.services.hooks.hooks]
    assert names == ["memory-recall", "dream-scheduling", "broken", "probe"]


async def test_a_request_that_carries_its_trigger_recalls_once_and_the_same(
    worker: tuple[VPActor, ScriptedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator hands a person's message with its turns: the recall starts
    beside the group-log read, asks what it would have asked, and runs once."""
    vp, model = worker
    store = vp.services.store
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await store.create_group(Group(id=gid, name="g", roster=["steve"]))
    steps: list[str] = []
    context, before_hooks = TurnRunner.context, vp.services.hooks.before

    async def read_context(self: TurnRunner) -> Any:
        found = await context(self)
        steps.append("context read")
        return found

    async def recall(turn: BeforeTurn) -> list[str]:
        steps.append("recall")
        return await before_hooks(turn)

    monkeypatch.setattr(TurnRunner, "context", read_context)
    monkeypatch.setattr(vp.services.hooks, "before", recall)
    asked: list[list[BeforeTurn]] = []
    order: list[list[str]] = []
    for carried in (False, True):
        SEEN.clear()
        steps.clear()
        said = GroupMessage(author="ann", role="user", text="how do caches fail?")
        msg, _ = await store.append_message(gid, said)
        origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
        req = TurnRequest(
            gid, "steve", TurnRequest.new_turn_id("steve"), origin, trigger=msg if carried else None
        )
        outcome = await vp.call(RunTurn(req))
        assert outcome.reason is StopReason.END_TURN
        asked.append([t for t in SEEN if isinstance(t, BeforeTurn)])
        order.append(list(steps))
        assert "probe says hello to steve" in model.requests[-1].system
    # Carried, the recall starts while the context is read, not after it.
    assert order == [["context read", "recall"], ["recall", "context read"]]
    plain, early = asked
    assert len(plain) == len(early) == 1
    assert early[0].query == plain[0].query == "[ann] how do caches fail?"
    assert early[0].context_window == plain[0].context_window


def test_a_hook_that_cannot_be_loaded_is_a_clear_error() -> None:
    for bad in ("nothing-here", "tests.test_turn_hooks:missing", "no_such_module_x:f"):
        with pytest.raises(ValueError, match="turn hook"):
            load_factory(bad)


def test_the_recall_budget_follows_the_window() -> None:
    assert recall_budget(128_000, 1200) == 1280
    assert recall_budget(1_000_000, 1200) == 10_000
    # A small window keeps room to answer: at most 5% of it.
    assert recall_budget(8_000, 1200) == 400
    assert recall_budget(200_000, 1200) == 2000


@pytest.fixture
async def memory(store_factory: StoreFactory) -> AsyncIterator[MemoryBackend]:
    backend = store_factory.config.open_memory()
    yield backend
    await backend.close()


def before(group: str, turn: str, query: str, user: str = "ann") -> BeforeTurn:
    return BeforeTurn(group, "steve", turn, user, query, 128_000)


def after(group: str, turn: str, text: str) -> AfterTurn:
    return AfterTurn(group, "steve", turn, StopReason.END_TURN, text, None)


async def test_the_recent_tier_keeps_what_the_group_used(memory: MemoryBackend) -> None:
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await memory.add(MemoryItem(scope=group_scope(gid), text="the deploy window is friday"))
    # What the later turns' query finds by itself (so recall has hits and no fallback).
    await memory.add(MemoryItem(scope=group_scope(gid), text="zzz unrelated qqq notes"))
    hook = RecallHook(lambda: memory, limit=8, budget_floor=1200)

    def has(lines: list[str], words: str) -> bool:
        return any(words in line for line in lines)

    lines = await hook.before_turn(before(gid, "t1", "when is the deploy window"))
    assert has(lines, "deploy window")
    # The reply drew on it: it stays in front of the VP for the next turns...
    await hook.after_turn(after(gid, "t1", "the deploy window is on friday"))
    for i in range(RECENT_TURNS):
        lines = await hook.before_turn(before(gid, f"u{i}", "zzz unrelated qqq"))
        assert has(lines, "deploy window"), i
        await hook.after_turn(after(gid, f"u{i}", "something else entirely"))
    # ... and fades once turns stop drawing on it.
    lines = await hook.before_turn(before(gid, "late", "zzz unrelated qqq"))
    assert not has(lines, "deploy window")


async def test_the_recent_tier_respects_scopes(memory: MemoryBackend) -> None:
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    await memory.add(MemoryItem(scope=user_scope("ann"), text="ann prefers metric units"))
    await memory.add(MemoryItem(scope=group_scope(gid), text="zzz unrelated qqq notes"))
    hook = RecallHook(lambda: memory, limit=8, budget_floor=1200)
    lines = await hook.before_turn(before(gid, "t1", "which units does ann prefer"))
    assert any("metric units" in line for line in lines)
    await hook.after_turn(after(gid, "t1", "metric units it is"))
    # Bob's turn in the same group never sees ann's own memory through the tier.
    lines = await hook.before_turn(before(gid, "t2", "zzz unrelated qqq", user="bob"))
    assert not any("metric units" in line for line in lines)
    lines = await hook.before_turn(before(gid, "t3", "zzz unrelated qqq", user="ann"))
    assert any("metric units" in line for line in lines)
