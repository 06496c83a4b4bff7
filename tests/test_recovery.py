"""Nothing acked is left unanswered: crashes, restarts and shutdowns, on both stores.

A deployment's processes are gone when its actors are killed; a second
runtime on the same store plays the restarted server. Every turn that was
dispatched must end with exactly one ``result``: those that never started
run again, those that started end with an error result, and a person who
sends an interrupted message again gets it answered.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from coordinator.commands import Ingest, Recover, WaitIdle
from coordinator.results import RecoveryReport
from coordinator.runtime import Runtime
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, wait_for_event

# These tests kill or restart actors: their runtimes get processes of their own.
pytestmark = pytest.mark.own_processes

# Long enough to be killed mid-reply: about 10 s of text.
SLOW = {"model": "offline:default?ttft=0.05&tps=20&tokens=200"}
QUICK = {"model": "offline:default?ttft=0&tps=1000&tokens=5"}
PAIR = ["steve", "linus"]


def result_of(env: dict[str, Any]) -> bool:
    return env.get("type") == "yeaft_output" and env["data"]["type"] == "result"


def results_by_turn(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for env in events:
        if result_of(env):
            out.setdefault(env["turnId"], []).append(env["data"])
    return out


async def started_streaming(rt: Runtime, group_id: str, vps: list[str]) -> None:
    """Wait until each VP has streamed text (its turn is under way)."""
    for vp in vps:
        await wait_for_event(
            rt,
            group_id,
            lambda e, vp=vp: (
                e.get("vpId") == vp
                and e.get("type") == "yeaft_output"
                and e["data"]["type"] == "assistant"
            ),
        )


async def busy_group(rt: Runtime) -> tuple[str, list[str]]:
    """A group of two VPs, each running one turn with two more queued behind it."""
    group = await rt.create_group("team", PAIR, members=["ann"])
    ids = []
    for n in range(3):
        out = await rt.send(Ingest(group.id, "ann", f"question {n}", client_message_id=f"c{n}"))
        assert sorted(out.dispatched) == sorted(PAIR)
        ids.append(out.message_id)
    await started_streaming(rt, group.id, PAIR)
    return group.id, ids


async def crash(rt: Runtime) -> None:
    """Every actor of the deployment dies, the coordinator first.

    In a real crash all processes go at once; killed one by one, a VP that
    died before its coordinator would be reported lost by that coordinator.
    """
    coordinator = ray.get_actor(rt.config.actor_name("coordinator", 0), rt.config.namespace)
    ray.kill(coordinator, no_restart=True)
    with pytest.raises(RayActorError):  # the kill has landed once a call fails
        for _ in range(1000):
            await coordinator.call.remote(Recover())
    rt.shutdown()


async def recovered(rt: Runtime, after: float) -> RecoveryReport:
    """The report of the coordinator Ray started again after ``after``.

    Until then a call reaches the old one, or fails while the new one starts;
    no event tells a driver that an actor is back, so this asks again.
    """
    for _ in range(200):
        try:
            report = await rt.recover()
        except ActorUnavailableError:
            report = None
        if report is not None and report.since > after:
            return report
        await asyncio.sleep(0.05)
    raise AssertionError("the coordinator did not come back")


async def turns_of(rt: Runtime, group_id: str, message_id: str) -> dict[str, list[str]]:
    records = await (await rt.store()).turns_of(group_id, message_id)
    out: dict[str, list[str]] = {}
    for r in sorted(records, key=lambda r: r.created_at):
        out.setdefault(r.vp_id, []).append(r.turn_id)
    return out


async def test_a_crash_reruns_queued_turns_and_ends_running_ones(
    make_runtime: MakeRuntime,
) -> None:
    first = make_runtime(engine=SLOW)
    group_id, ids = await busy_group(first)
    await crash(first)

    second = make_runtime(engine=QUICK, store=first.config.store)
    report = await second.recover()
    assert report.turns == (0, 4, 2)
    assert await second.recover() == report  # once per coordinator life
    assert await second.send(WaitIdle(group_id))

    by_turn = results_by_turn(await all_events(second, group_id))
    assert len(by_turn) == 6 and all(len(r) == 1 for r in by_turn.values()), by_turn
    # Ray does not promise the order in which an async actor takes calls, so
    # which message each VP was answering is read from the results.
    lost = {t for t, [r] in by_turn.items() if r["subtype"] != "success"}
    assert len(lost) == 2
    for turn_id in lost:
        [r] = by_turn[turn_id]
        assert r["error_kind"] == "restarted" and "Send your message again" in r["error"]
    assert await (await second.store()).open_turns() == []

    # The person sends the interrupted messages again: the VPs that lost
    # their turn on each answer it now, and only they do.
    interrupted: dict[int, set[str]] = {}
    for n, message_id in enumerate(ids):
        for vp, turn_ids in (await turns_of(second, group_id, message_id)).items():
            if turn_ids[0] in lost:
                interrupted.setdefault(n, set()).add(vp)
    assert sum(len(vps) for vps in interrupted.values()) == 2
    for n, vps in interrupted.items():
        again = await second.send(Ingest(group_id, "ann", f"q{n}", client_message_id=f"c{n}"))
        assert again.duplicate and set(again.dispatched) == vps
        assert await second.send(WaitIdle(group_id))
        answered = results_by_turn(await all_events(second, group_id))
        for turn_id in again.turns.values():
            assert [r["subtype"] for r in answered[turn_id]] == ["success"]
        # Answered now: a third send starts nothing.
        third = await second.send(Ingest(group_id, "ann", f"q{n}", client_message_id=f"c{n}"))
        assert third.duplicate and third.dispatched == []
    # Nor does a repeat of a message whose turns were answered the first time.
    answered_first = next(n for n in range(3) if n not in interrupted)
    repeat = await second.send(
        Ingest(group_id, "ann", "again", client_message_id=f"c{answered_first}")
    )
    assert repeat.duplicate and repeat.dispatched == []


async def test_a_graceful_stop_ends_every_turn_with_one_result(make_runtime: MakeRuntime) -> None:
    first = make_runtime(engine=SLOW)
    group_id, _ = await busy_group(first)
    drained = await first.drain(0.2)
    assert not drained.drained and drained.interrupted == 6
    assert await first.send(WaitIdle(group_id))
    by_turn = results_by_turn(await all_events(first, group_id))
    assert len(by_turn) == 6 and all(len(r) == 1 for r in by_turn.values()), by_turn
    kinds = Counter(r[0]["error_kind"] for r in by_turn.values())
    assert kinds == {"shutdown": 6}
    # Each says how long it went on before the stop (the drain alone waited 0.2 s).
    assert all(r[0]["duration_ms"] >= 200 for r in by_turn.values()), by_turn
    first.shutdown()

    second = make_runtime(engine=QUICK, store=first.config.store)
    assert (await second.recover()).turns == (0, 0, 0)
    again = await second.send(Ingest(group_id, "ann", "question 2", client_message_id="c2"))
    assert sorted(again.dispatched) == sorted(PAIR)
    assert await second.send(WaitIdle(group_id))
    by_turn = results_by_turn(await all_events(second, group_id))
    assert all(by_turn[t][0]["subtype"] == "success" for t in again.turns.values())
    assert all(len(r) == 1 for r in by_turn.values())


async def test_a_restarted_coordinator_follows_the_turns_its_vps_still_run(
    make_runtime: MakeRuntime,
) -> None:
    # 8 s replies: each VP's first turn outlives the coordinator's restart,
    # which takes a few seconds on a loaded two-core machine (2 s did not).
    rt = make_runtime(engine={"model": "offline:default?ttft=0.05&tps=10&tokens=80"})
    group_id, _ = await busy_group(rt)
    coordinator = ray.get_actor(rt.config.actor_name("coordinator", 0), rt.config.namespace)
    killed = time.time()
    ray.kill(coordinator, no_restart=False)  # Ray starts it again; the VPs keep running

    report = await recovered(rt, after=killed)
    # Turns that ended while the coordinator was down need nothing; every
    # other one is still held by its VP actor, and is followed, not re-run.
    assert report.followed >= 2 and report.rerun == report.interrupted == 0
    assert await rt.send(WaitIdle(group_id))
    by_turn = results_by_turn(await all_events(rt, group_id))
    assert len(by_turn) == 6
    assert all([r["subtype"] for r in rs] == ["success"] for rs in by_turn.values()), by_turn
    assert await (await rt.store()).open_turns() == []
