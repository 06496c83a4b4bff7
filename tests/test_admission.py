"""Admission control: bounds on the turns waiting per group and per VP actor.

The bookkeeping is checked on its own with a hand-driven clock; the bounds
end to end on a real Ray cluster, against both stores, with a model slow
enough (a minute to its first token) that admitted turns stay waiting until
the test cancels them.
"""

from __future__ import annotations

import asyncio
import pickle

import pytest

from actors.config import RuntimeConfig
from coordinator.admission import Admission
from coordinator.commands import Cancel, Ingest, VPStatsOf, WaitIdle
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.runtime import Runtime
from gateway.errors import from_group_error
from tests.fixtures.ray_cluster import MakeRuntime

SLOW = {"model": "offline:default?ttft=60&tps=100&tokens=5"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def busy(admission: Admission, group: str, vps: list[str]) -> GroupError:
    with pytest.raises(GroupError) as refused:
        admission.reserve(group, vps)
    assert refused.value.code is GroupErrorCode.BUSY
    return refused.value


# -- the bookkeeping -------------------------------------------------------------
def test_a_group_admits_up_to_its_bound_and_again_when_turns_finish() -> None:
    admission = Admission(group_limit=3, vp_limit=100, clock=Clock())
    for vp in ("a", "b", "c"):
        with admission.reserve("g", [vp]):
            admission.hold("g", vp)
    assert admission.group("g").pending == 3
    refused = busy(admission, "g", ["a"])
    assert "3 turns waiting" in refused.message and refused.retry_after is not None
    admission.release("g", "a")
    with admission.reserve("g", ["a"]):
        admission.hold("g", "a")
    # A fan-out that does not fit is refused whole, not admitted in part.
    admission.release("g", "b")
    busy(admission, "g", ["a", "b"])
    assert admission.group("g").pending == 2


def test_an_idle_group_admits_a_fan_out_wider_than_its_bound() -> None:
    admission = Admission(group_limit=2, vp_limit=100, clock=Clock())
    with admission.reserve("g", ["a", "b", "c"]):
        for vp in ("a", "b", "c"):
            admission.hold("g", vp)
    assert admission.group("g").pending == 3
    busy(admission, "g", ["a"])


def test_a_vp_bound_counts_the_turns_of_every_group() -> None:
    admission = Admission(group_limit=100, vp_limit=2, clock=Clock())
    for group in ("g1", "g2"):
        with admission.reserve(group, ["a"]):
            admission.hold(group, "a")
    refused = busy(admission, "g3", ["b", "a"])
    assert "@a has 2 turns waiting" in refused.message
    assert admission.vp("b").pending == 0  # nothing of the refused message is held
    with admission.reserve("g3", ["b"]):
        admission.hold("g3", "b")


def test_a_reservation_holds_places_until_its_turns_take_them() -> None:
    admission = Admission(group_limit=2, vp_limit=100, clock=Clock())
    with admission.reserve("g", ["a", "b"]):
        # While the message is being stored its places are taken already.
        busy(admission, "g", ["c"])
        admission.hold("g", "a")
        assert admission.group("g").pending == 2
        # "b" is never dispatched (the loop guard refused it, say).
    assert admission.group("g").pending == 1 and admission.vp("b").pending == 0
    # Turns that follow up on a chain count, but are never refused.
    admission.hold("g", "b")
    admission.hold("g", "c")
    assert admission.group("g").pending == 3
    for vp in ("a", "b", "c"):
        admission.release("g", vp)
    assert admission.group("g").pending == 0


def test_retry_after_follows_the_time_between_finishes() -> None:
    clock = Clock()
    admission = Admission(group_limit=2, vp_limit=100, clock=clock)
    admission.hold("g", "a")
    admission.hold("g", "a")
    clock.now += 4.0
    # No turn has finished: at least as long as the oldest has waited.
    assert busy(admission, "g", ["a"]).retry_after == 4.0
    for _ in range(2):
        admission.release("g", "a")
        admission.hold("g", "a")
        clock.now += 2.0
    # Mean gap 3.6 s; a two-VP message misses two places.
    two = busy(admission, "g", ["a", "b"]).retry_after
    assert two is not None and 6.0 < two < 8.5
    assert admission.group("g").pending == 2


def test_a_busy_error_crosses_ray_and_the_gateway_with_its_retry_after() -> None:
    refused = pickle.loads(pickle.dumps(GroupError(GroupErrorCode.BUSY, "full", 2.5)))
    assert refused.retry_after == 2.5
    translated = from_group_error(refused)
    assert translated is not None
    frame = translated.to_frame("m1")
    assert (frame.code, frame.retry_after, frame.request_id) == ("busy", 2.5, "m1")
    assert translated.status == 503 and translated.headers() == {"Retry-After": "3"}


def test_each_coordinator_holds_a_share_of_a_vp_bound() -> None:
    config = RuntimeConfig(coordinator_shards=2, max_vp_pending_turns=256)
    assert Admission.for_shard(config).vp_limit == 128
    defaults = Admission.for_shard(RuntimeConfig(coordinator_shards=1))
    assert (defaults.group_limit, defaults.vp_limit) == (64, 256)


# -- end to end on Ray -----------------------------------------------------------
async def _until_queued(rt: Runtime, group_id: str, vp: str, turns: int) -> None:
    """Wait until ``vp``'s actor holds ``turns`` turns, so a cancel reaches them all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while loop.time() < deadline:
        (stats,) = await rt.send(VPStatsOf(group_id, [vp]))
        if stats.active_turns >= turns:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{vp} never held {turns} turns")


async def _refused(rt: Runtime, group_id: str, text: str) -> GroupError:
    with pytest.raises(GroupError) as refused:
        await rt.send(Ingest(group_id, "ann", text, client_message_id="late"))
    error = refused.value
    assert error.code is GroupErrorCode.BUSY
    assert error.retry_after is not None and error.retry_after > 0
    return error


async def test_the_coordinator_refuses_past_the_group_bound_until_turns_finish(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine=SLOW, max_group_pending_turns=2)
    group = await rt.create_group("team", ["steve", "linus"])
    assert (await rt.send(Ingest(group.id, "ann", "@steve one"))).dispatched == ["steve"]
    assert (await rt.send(Ingest(group.id, "ann", "@linus two"))).dispatched == ["linus"]
    error = await _refused(rt, group.id, "@steve three")
    assert "this group has 2 turns waiting" in error.message
    await _until_queued(rt, group.id, "steve", 1)
    await _until_queued(rt, group.id, "linus", 1)
    # Refused before it was stored: the log has the two admitted messages only.
    store = await rt.store()
    assert [m.text for m in await store.read_messages(group.id)] == ["@steve one", "@linus two"]
    # Once the turns finish, their places are free again.
    await rt.send(Cancel(group.id))
    assert await rt.send(WaitIdle(group.id, 30))
    out = await rt.send(Ingest(group.id, "ann", "@steve three", client_message_id="late"))
    assert out.dispatched == ["steve"] and not out.duplicate
    await _until_queued(rt, group.id, "steve", 1)
    await rt.send(Cancel(group.id))


async def test_the_coordinator_refuses_past_a_vp_bound_across_groups(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine=SLOW, max_group_pending_turns=50, max_vp_pending_turns=2)
    first = await rt.create_group("one", ["steve", "linus"])
    second = await rt.create_group("two", ["steve", "linus"])
    await rt.send(Ingest(first.id, "ann", "@steve one"))
    await rt.send(Ingest(first.id, "ann", "@steve two"))
    error = await _refused(rt, second.id, "@steve three")
    assert "@steve has 2 turns waiting" in error.message
    await _until_queued(rt, first.id, "steve", 2)
    # Another VP of the same group has room.
    assert (await rt.send(Ingest(second.id, "ann", "@linus four"))).dispatched == ["linus"]
    await rt.send(Cancel(first.id))
    assert await rt.send(WaitIdle(first.id, 30))
    assert (await rt.send(Ingest(second.id, "ann", "@steve three"))).dispatched == ["steve"]
    await _until_queued(rt, second.id, "steve", 1)
    await rt.send(Cancel(second.id))
