"""The loop guard's counts outlive a coordinator restart (``coordinator.chains``).

A chain at its limit when its coordinator is killed stays refused by the
coordinator Ray starts again: the new one rebuilds the chain from the turn
records and group log in the store, on both backends.
"""

from __future__ import annotations

import time

import pytest
import ray

from coordinator.chains import rebuild_chain
from coordinator.commands import Answer, Cancel, Ingest, WaitIdle
from coordinator.loop_guard import LoopRule
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from protocol import GroupSettingsPatch
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import (
    all_events,
    last_is_tool_result,
    notices,
    results,
    wait_for_event,
)
from tests.test_recovery import recovered

# These tests kill or restart actors: their runtimes get processes of their own.
pytestmark = pytest.mark.own_processes

PAIR = ["steve", "linus"]


def steve_hands_over_and_linus_asks(request: ModelRequest) -> Reply:
    """steve mentions linus; linus asks the person first, then mentions steve back.

    linus's question holds his turn open for as long as the test needs: the
    coordinator is killed and restarted while it waits, with no clock involved.
    """
    if request.context.speaker_id == "steve":
        return Reply("@linus over to you")
    if last_is_tool_result(request):
        return Reply("@steve back to you")
    return Reply(tool_calls=[("ask_user", {"question": "go on?", "choices": ["yes"]})])


async def test_a_chain_at_its_limit_stays_refused_after_a_coordinator_restart(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(
        provider_overrides={"offline": ScriptedModel(steve_hands_over_and_linus_asks)}
    )
    # Two turns per message: steve's and the linus turn his reply causes.
    settings = GroupSettingsPatch(max_turns_per_message=2)
    group = await rt.create_group("team", PAIR, members=["ann"], settings=settings)
    sent = await rt.send(Ingest(group.id, "ann", "@steve start", client_message_id="c1"))
    question = await wait_for_event(rt, group.id, lambda e: e["type"] == "ask_user_question")
    assert question["vpId"] == "linus"
    store = await rt.store()
    rebuilt = await rebuild_chain(store, group.id, sent.message_id)
    assert (rebuilt.turns, dict(rebuilt.pairs), rebuilt.stopped) == (
        2,
        {("linus", "steve"): 1},
        None,
    )

    coordinator = ray.get_actor(rt.config.actor_name("coordinator", 0), rt.config.namespace)
    killed = time.time()
    ray.kill(coordinator, no_restart=False)
    report = await recovered(rt, after=killed)
    assert report.followed == 1  # linus's turn, still waiting for its answer

    # linus goes on and mentions steve: the chain has used its two turns.
    assert await rt.send(Answer(group.id, question["requestId"], "yes"))
    assert await rt.send(WaitIdle(group.id, 30))
    events = await all_events(rt, group.id)
    by_vp = results(events)
    assert {vp: len(r) for vp, r in by_vp.items()} == {"steve": 1, "linus": 1}, by_vp
    assert all(r[0]["subtype"] == "success" for r in by_vp.values())
    rules = [n["detail"]["rule"] for n in notices(events)]
    assert rules == [LoopRule.TURN_BUDGET.value]
    assert await store.open_turns() == []

    # The stop is in the store too: rebuilt again, the chain is stopped, and
    # a third coordinator would not report it a second time.
    again = await rebuild_chain(store, group.id, sent.message_id)
    assert again.stopped is LoopRule.TURN_BUDGET and again.turns == 2

    # A new message starts a fresh chain, restart or not.
    out = await rt.send(Ingest(group.id, "ann", "@linus plain question", client_message_id="c2"))
    assert out.dispatched == ["linus"]
    await wait_for_event(rt, group.id, lambda e: e["type"] == "ask_user_question" and e != question)
    await rt.send(Cancel(group.id))
    assert await rt.send(WaitIdle(group.id, 30))
