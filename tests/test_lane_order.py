"""Session lanes in order across the Ray hop (``actors.lanes``, ``coordinator.lane_stamps``).

The unit tests drive :class:`~actors.lanes.Lanes` with stamps that arrive out
of order and a gap timer the test fires itself (no sleeping). The runtime
test sends pairs of messages back to back to one VP on real Ray and checks
that each pair is answered first-first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
import ray

from actors.lanes import Lanes, LaneStamp
from actors.turns import TurnOrigin, TurnRequest
from coordinator.commands import Ingest, WaitIdle
from coordinator.lane_stamps import LaneStamps
from coordinator.runtime import Runtime
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, wait_for_event
from tests.test_recovery import recovered

ROUNDS = 30
ORIGIN = TurnOrigin("m1", "m1")
# A long paste (about 150 KB): the first message of each pair.
PASTE = "长文" * 25_000


class Gap:
    """The lanes' gap timer: each wait ends when the test fires it."""

    def __init__(self) -> None:
        self.waits: list[asyncio.Future[None]] = []
        self.started = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waits.append(fut)
        self.started.set()
        await fut

    def fire(self) -> None:
        for fut in self.waits:
            if not fut.done():
                fut.set_result(None)


async def _settle() -> None:
    """Let every ready task run until none is left (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


def _turn(
    lanes: Lanes, stamp: LaneStamp, order: list[int], release: asyncio.Event
) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        async with lanes.hold("g", stamp):
            order.append(stamp.seq)
            await release.wait()

    return run


async def test_turns_that_arrive_out_of_order_run_in_stamp_order() -> None:
    gap = Gap()
    lanes = Lanes(4, gap_s=2.0, sleep=gap.sleep)
    order: list[int] = []
    release = asyncio.Event()
    stamps = [LaneStamp("e1", n, 1) for n in (1, 2, 3)]
    # 3 and 2 reach the VP before 1 does.
    later = [asyncio.create_task(_turn(lanes, s, order, release)()) for s in stamps[2:0:-1]]
    await _settle()
    assert order == [] and not lanes.busy("g")
    first = asyncio.create_task(_turn(lanes, stamps[0], order, release)())
    await _settle()
    assert order == [1]
    release.set()
    await asyncio.gather(first, *later)
    assert order == [1, 2, 3]
    assert lanes.gaps == 0


async def test_a_missing_turn_is_waited_for_until_the_gap_timer_then_skipped() -> None:
    gap = Gap()
    lanes = Lanes(4, gap_s=2.0, sleep=gap.sleep)
    order: list[int] = []
    release = asyncio.Event()
    release.set()
    # Turn 1 never comes; 2 waits for it until the timer fires.
    second = asyncio.create_task(_turn(lanes, LaneStamp("e1", 2, 1), order, release)())
    await gap.started.wait()
    await _settle()
    assert order == []
    gap.fire()
    await second
    assert order == [2] and lanes.gaps == 1
    # The lane forgot the gap: 3 goes in at once, and a late 1 is not held back.
    await _turn(lanes, LaneStamp("e1", 3, 1), order, release)()
    await _turn(lanes, LaneStamp("e1", 1, 1), order, release)()
    assert order == [2, 3, 1] and lanes.gaps == 1


async def test_a_turn_that_never_takes_the_lane_lets_the_next_one_in() -> None:
    lanes = Lanes(4, gap_s=2.0, sleep=Gap().sleep)
    order: list[int] = []
    release = asyncio.Event()
    release.set()
    third = asyncio.create_task(_turn(lanes, LaneStamp("e1", 3, 1), order, release)())
    await _turn(lanes, LaneStamp("e1", 1, 1), order, release)()
    await _settle()
    assert order == [1]
    lanes.passed("g", LaneStamp("e1", 2, 1))  # steered into turn 1: ended without the lane
    await third
    assert order == [1, 3] and lanes.gaps == 0


async def test_a_new_epoch_and_the_floor_need_no_wait() -> None:
    """After a coordinator restart (new epoch) or a VP restart (no sequence known)."""
    lanes = Lanes(4, gap_s=2.0, sleep=Gap().sleep)
    order: list[int] = []
    release = asyncio.Event()
    release.set()
    await _turn(lanes, LaneStamp("old", 1, 1), order, release)()
    await _turn(lanes, LaneStamp("new", 1, 1), order, release)()
    # A VP that knows nothing of epoch "old" at seq 7: turns below the floor are done.
    fresh = Lanes(4, gap_s=2.0, sleep=Gap().sleep)
    await _turn(fresh, LaneStamp("old", 7, 7), order, release)()
    assert order == [1, 1, 7] and lanes.gaps == fresh.gaps == 0


def test_the_coordinator_stamps_each_lane_in_sending_order_with_its_floor() -> None:
    stamps = LaneStamps("e1")
    a = stamps.stamp("g", "steve")
    b = stamps.stamp("g", "steve")
    other = stamps.stamp("g", "linus")
    assert (a.seq, b.seq, other.seq) == (1, 2, 1)
    assert b.floor == 1
    stamps.landed("g", "steve", a)
    c = stamps.stamp("g", "steve")
    assert (c.seq, c.floor) == (3, 2)
    # Sent again to a restarted VP after 2 was lost: 3 carries the risen floor.
    stamps.landed("g", "steve", b)
    again = stamps.refresh(TurnRequest("g", "steve", "t3", ORIGIN, lane=c))
    assert again == LaneStamp("e1", 3, 3)
    # A restarted coordinator counts again under a new epoch.
    assert LaneStamps().stamp("g", "steve").epoch != "e1"


async def test_back_to_back_messages_to_one_vp_are_answered_in_order(
    make_runtime: MakeRuntime,
) -> None:
    """30 rounds of two quick messages under ``followup``: the second starts after the first ends.

    The first of each pair is a long paste, as when a person pastes a file
    and adds a line: Ray passes a call's large arguments out of band, and
    the short second call used to overtake it.
    """
    # A turn that waited out a gap would keep its group busy past WaitIdle's 30 s.
    rt = make_runtime(lane_gap_s=60, engine={"model": "offline:default?ttft=0&tps=1000&tokens=3"})
    group = await rt.create_group("pairs", ["steve"])
    pairs: list[tuple[str, str]] = []
    for n in range(ROUNDS):
        first = await rt.send(Ingest(group.id, "ann", f"/queue @steve round {n} {PASTE}"))
        second = await rt.send(Ingest(group.id, "ann", f"/queue @steve round {n} second"))
        pairs.append((first.turns["steve"], second.turns["steve"]))
        assert await rt.send(WaitIdle(group.id, 30))
    out_of_order = await _out_of_order(rt, group.id, pairs)
    assert out_of_order == [], f"{len(out_of_order)} of {ROUNDS} pairs answered out of order"


async def _out_of_order(
    rt: Runtime, group_id: str, pairs: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The pairs whose second turn began before the first one's result."""
    began: dict[str, int] = {}
    ended: dict[str, int] = {}
    for e in await all_events(rt, group_id):
        if e.get("type") == "agent_status" and e.get("state") == "thinking":
            began.setdefault(e["turnId"], e["seq"])
        if e.get("type") == "yeaft_output" and e["data"]["type"] == "result":
            ended[e["turnId"]] = e["seq"]
    answered = {t for pair in pairs for t in pair}
    assert answered <= ended.keys() and answered <= began.keys()
    return [(a, b) for a, b in pairs if began[b] < ended[a]]


@pytest.mark.own_processes
async def test_pairs_stay_in_order_across_a_coordinator_restart(make_runtime: MakeRuntime) -> None:
    """The restarted coordinator stamps under a new epoch: nothing waits, nothing overtakes."""
    rt = make_runtime(lane_gap_s=60, engine={"model": "offline:default?ttft=0.05&tps=20&tokens=30"})
    group = await rt.create_group("restart", ["steve"])

    async def pair(label: str) -> tuple[str, str]:
        first = await rt.send(Ingest(group.id, "ann", f"/queue @steve {label} first"))
        second = await rt.send(Ingest(group.id, "ann", f"/queue @steve {label} second"))
        return first.turns["steve"], second.turns["steve"]

    pairs = [await pair("before")]
    await wait_for_event(rt, group.id, lambda e: e.get("turnId") == pairs[0][0])
    coordinator = ray.get_actor(rt.config.actor_name("coordinator", 0), rt.config.namespace)
    killed = time.time()
    ray.kill(coordinator, no_restart=False)  # Ray starts it again; the VP keeps its turns
    await recovered(rt, after=killed)
    for n in range(3):
        pairs.append(await pair(f"after {n}"))
        assert await rt.send(WaitIdle(group.id, 30))
    assert await _out_of_order(rt, group.id, pairs) == []
