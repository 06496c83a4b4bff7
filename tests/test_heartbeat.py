"""A VP's heartbeat: ``agent_status busy`` with its turn's phase until the turn ends.

On real Ray, with a short interval: a turn that thinks for a second and then
streams for a while writes repeated beats naming each phase, and none after
its result, whose last status is ``idle``.
"""

from __future__ import annotations

from coordinator.commands import Ingest, WaitIdle
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events

BEAT_S = 0.2


async def test_a_long_turn_beats_busy_with_its_phase_then_goes_idle(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(
        heartbeat_s=BEAT_S, engine={"model": "offline:default?ttft=1.2&tps=20&tokens=30"}
    )
    group = await rt.create_group("beats", ["steve"])
    out = await rt.send(Ingest(group.id, "ann", "@steve take your time"))
    turn = out.turns["steve"]
    assert await rt.send(WaitIdle(group.id, 60))
    frames = [e for e in await all_events(rt, group.id) if e.get("turnId") == turn]
    statuses = [f for f in frames if f.get("type") == "agent_status"]
    beats = [f for f in statuses if f["state"] == "busy"]
    assert len(beats) >= 4, statuses
    assert {b["heartbeatS"] for b in beats} == {BEAT_S}
    assert {"thinking", "streaming"} <= {b["phase"] for b in beats}
    assert {b["phase"] for b in beats} <= {"thinking", "streaming", "tool", "queued"}
    result = next(
        f for f in frames if f.get("type") == "yeaft_output" and f["data"]["type"] == "result"
    )
    assert max(b["seq"] for b in beats) < result["seq"]
    assert statuses[-1]["state"] == "idle" and statuses[-1]["seq"] > result["seq"]


async def test_no_heartbeat_when_it_is_off(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(heartbeat_s=0, engine={"model": "offline:default?ttft=0.5&tps=50&tokens=5"})
    group = await rt.create_group("quiet", ["steve"])
    await rt.send(Ingest(group.id, "ann", "@steve hi"))
    assert await rt.send(WaitIdle(group.id, 60))
    events = await all_events(rt, group.id)
    assert [e for e in events if e.get("state") == "busy"] == []
