"""A cancel racing the end of a turn, through a real runtime, on both stores.

Many short turns, each cancelled after a random (seeded) delay around the
time a turn takes, so cancels land before, during and just after each turn's
end. Every turn must end with exactly one ``result``, aborted or successful,
and none with the coordinator's lost-turn error ("stopped unexpectedly").
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

from coordinator.commands import Cancel, Ingest, WaitIdle
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events

ROUNDS = 120
LOST = "stopped unexpectedly"


async def test_a_cancel_at_the_end_of_a_turn_leaves_it_one_result(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine={"model": "offline:default?ttft=0&tps=1000&tokens=5"})
    group = await rt.create_group("team", ["steve"])
    # The first turn starts the actors; the second shows how long a turn takes.
    await rt.send(Ingest(group.id, "ann", "@steve warm up"))
    assert await rt.send(WaitIdle(group.id, 30))
    started = time.monotonic()
    await rt.send(Ingest(group.id, "ann", "@steve warm up"))
    assert await rt.send(WaitIdle(group.id, 30))
    turn_s = time.monotonic() - started
    rng = random.Random(15)
    turns: list[str] = []
    for _ in range(ROUNDS):
        out = await rt.send(Ingest(group.id, "ann", "@steve hello"))
        turns.extend(out.turns.values())
        await asyncio.sleep(rng.uniform(0, 1.5 * turn_s))
        await rt.send(Cancel(group.id))
        assert await rt.send(WaitIdle(group.id, 30))
    ends = [
        e
        for e in await all_events(rt, group.id)
        if e.get("type") == "yeaft_output" and e["data"]["type"] == "result"
    ]
    per_turn = Counter(e["turnId"] for e in ends)
    assert {t: per_turn[t] for t in turns if per_turn[t] != 1} == {}
    assert [e["data"]["error"] for e in ends if LOST in (e["data"].get("error") or "")] == []
    reasons = Counter(e["data"]["stop_reason"] for e in ends if e["turnId"] in turns)
    assert set(reasons) <= {"end_turn", "aborted"}, reasons


async def test_a_cancel_right_after_the_message_is_never_missed(
    make_runtime: MakeRuntime,
) -> None:
    """Cancelled before its VP holds the turn, the turn still ends aborted, once.

    A fresh VP actor is still starting when the cancel comes, so the abort can
    reach it before the turn does; the VP aborts a turn sent before the cancel
    when it arrives.
    """
    rt = make_runtime(engine={"model": "offline:default?ttft=0.05&tps=20&tokens=100"})
    group = await rt.create_group("team", ["steve", "linus"])
    out = await rt.send(Ingest(group.id, "ann", "@steve @linus think it over"))
    await rt.send(Cancel(group.id))
    assert await rt.send(WaitIdle(group.id, 30))
    ends = [
        e
        for e in await all_events(rt, group.id)
        if e.get("type") == "yeaft_output" and e["data"]["type"] == "result"
    ]
    assert sorted(e["turnId"] for e in ends) == sorted(out.turns.values())
    assert {e["data"]["stop_reason"] for e in ends} == {"aborted"}
