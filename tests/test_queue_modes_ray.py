"""Queue modes end to end: a ``/steer`` prefix through the coordinator to a VP actor on Ray."""

from __future__ import annotations

from coordinator.commands import Ingest, WaitIdle
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, results, wait_for_event


async def test_a_steer_prefix_joins_the_running_turn(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(engine={"model": "offline:default?tps=20"})
    group = await rt.create_group("solo", ["steve"], members=["ann"])
    first = await rt.send(Ingest(group.id, "ann", "tell me a long story"))
    await wait_for_event(
        rt,
        group.id,
        lambda e: e.get("type") == "yeaft_output" and e["data"]["type"] == "assistant",
    )
    second = await rt.send(Ingest(group.id, "ann", "/steer make it shorter"))
    assert await rt.send(WaitIdle(group.id, 60))
    events = await all_events(rt, group.id)
    steered = [
        e
        for e in events
        if e.get("type") == "agent_status" and e.get("turnId") == second.turns["steve"]
    ]
    assert any(
        s.get("queue") == "steered" and s.get("otherTurnId") == first.turns["steve"]
        for s in steered
    ), steered
    # The running turn said it took a new message in.
    joined = [
        e
        for e in events
        if e.get("type") == "yeaft_output"
        and e["turnId"] == first.turns["steve"]
        and e["data"].get("detail", {}).get("kind") == "steer"
    ]
    assert len(joined) == 1
    # The message is stored without its prefix, the mode it asked for kept beside it.
    stored = await (await rt.store()).get_message(group.id, second.message_id)
    assert stored is not None
    assert stored.text == "make it shorter" and stored.meta["queueMode"] == "steer"
    # Both turns ended, each with one result; only the first answered.
    assert [r["stop_reason"] for r in results(events)["steve"]] == ["end_turn", "end_turn"]
