"""A VP actor's process SIGKILLed mid-turn, with another turn queued behind it.

Not ``ray.kill`` (tests/test_group_chat.py does that) but the signal an
out-of-memory killer or a crash sends: the process is gone at once. The
running turn ends with an error result that says what happened; the queued
one, which never started, runs on the actor Ray starts again; the next
message is answered; every acked message has one result per turn. Both
store backends.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from coordinator.commands import Ingest, VPStatsOf, WaitIdle
from coordinator.runtime import Runtime
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, wait_for_event

# These tests kill or restart actors: their runtimes get processes of their own.
pytestmark = pytest.mark.own_processes

# About five seconds a reply: long enough to be killed mid-stream.
SLOW = {"model": "offline:default?ttft=0&tps=20&tokens=100"}


def _results(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for env in events:
        if env.get("type") == "yeaft_output" and env["data"]["type"] == "result":
            out.setdefault(env["turnId"], []).append(env["data"])
    return out


async def _one_result_per_turn(rt: Runtime, group_id: str, acked: list[str]) -> None:
    store = await rt.store()
    by_turn = _results(await all_events(rt, group_id))
    for message_id in acked:
        turns = await store.turns_of(group_id, message_id)
        assert turns, f"acked message {message_id} has no turn"
        for turn in turns:
            assert len(by_turn.get(turn.turn_id, [])) == 1, (turn, by_turn)
    assert await store.open_turns() == []


async def test_a_sigkilled_vp_process_ends_its_turn_and_runs_the_queued_one(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine=SLOW)
    group = await rt.create_group("team", ["linus"], members=["ann"])
    [before] = await rt.send(VPStatsOf(group.id, ["linus"]))
    first = await rt.send(
        Ingest(group.id, "ann", "@linus a long answer please", client_message_id="c1")
    )
    queued = await rt.send(Ingest(group.id, "ann", "@linus and then this", client_message_id="c2"))
    await wait_for_event(
        rt,
        group.id,
        lambda e: (
            e.get("turnId") == first.turns["linus"]
            and e.get("type") == "yeaft_output"
            and e["data"]["type"] == "assistant"
        ),
    )
    os.kill(before.pid, signal.SIGKILL)

    assert await rt.send(WaitIdle(group.id, 60))
    by_turn = _results(await all_events(rt, group.id))
    [lost] = by_turn[first.turns["linus"]]
    assert lost["is_error"] and lost["error_kind"] == "actor_died", lost
    assert "@linus stopped unexpectedly and this turn was lost" in lost["error"]
    assert "Ray is restarting it: send the message again." in lost["error"]
    [answered] = by_turn[queued.turns["linus"]]
    assert answered["subtype"] == "success", answered
    [after] = await rt.send(VPStatsOf(group.id, ["linus"]))
    assert after.pid != before.pid

    nxt = await rt.send(Ingest(group.id, "ann", "@linus are you back?", client_message_id="c3"))
    assert await rt.send(WaitIdle(group.id, 60))
    [back] = _results(await all_events(rt, group.id))[nxt.turns["linus"]]
    assert back["subtype"] == "success"
    await _one_result_per_turn(rt, group.id, [first.message_id, queued.message_id, nxt.message_id])


async def test_a_sigkilled_vp_host_ends_the_turns_of_every_vp_it_held(
    make_runtime: MakeRuntime,
) -> None:
    """One pooled process hosts both VPs: killing it ends both running turns, and
    both VPs answer again from the process Ray starts in its place."""
    pair = ["linus", "steve"]
    rt = make_runtime(engine=SLOW, vp_hosts=1)
    group = await rt.create_group("team", pair, members=["ann"])
    before = await rt.send(VPStatsOf(group.id, pair))
    assert before[0].pid == before[1].pid
    first = await rt.send(
        Ingest(group.id, "ann", "@linus @steve long answers please", client_message_id="c1")
    )
    for vp in pair:
        await wait_for_event(
            rt,
            group.id,
            lambda e, vp=vp: (
                e.get("turnId") == first.turns[vp]
                and e.get("type") == "yeaft_output"
                and e["data"]["type"] == "assistant"
            ),
        )
    os.kill(before[0].pid, signal.SIGKILL)

    assert await rt.send(WaitIdle(group.id, 60))
    by_turn = _results(await all_events(rt, group.id))
    for vp in pair:
        [lost] = by_turn[first.turns[vp]]
        assert lost["is_error"] and lost["error_kind"] == "actor_died", lost
        assert f"@{vp} stopped unexpectedly and this turn was lost" in lost["error"]

    # Sent while Ray may still be starting the process again: the turns wait for it.
    nxt = await rt.send(
        Ingest(group.id, "ann", "@linus @steve are you back?", client_message_id="c2")
    )
    assert await rt.send(WaitIdle(group.id, 60))
    by_turn = _results(await all_events(rt, group.id))
    assert [by_turn[nxt.turns[vp]][0]["subtype"] for vp in pair] == ["success", "success"]
    after = await rt.send(VPStatsOf(group.id, pair))
    assert after[0].pid == after[1].pid != before[0].pid
    await _one_result_per_turn(rt, group.id, [first.message_id, nxt.message_id])
