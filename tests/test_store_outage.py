"""A Redis restart in the middle of a turn: the turn still ends, exactly once.

Each test runs its own ``redis-server`` with AOF on (the shared one on 6379
is never restarted) and stops and starts it while a VP is answering. The
turn's writes fail while Redis is away; its result is retried until Redis is
back, and nothing acked or logged before the restart is lost.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from coordinator.commands import Ingest, WaitIdle
from coordinator.runtime import Runtime
from store import StoreConfig
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import RedisProcess
from tests.group_helpers import wait_for_event

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # whole deployments start here


def _result(env: dict[str, object]) -> bool:
    data = env.get("data")
    return env.get("type") == "yeaft_output" and isinstance(data, dict) and data["type"] == "result"


async def _events(rt: Runtime, group_id: str) -> list[dict[str, object]]:
    batch = await (await rt.store()).read_events(group_id, 0, limit=100_000)
    return [json.loads(e.text) for e in batch.events]


# The runtime's store is this test's own Redis; the parametrised fixture
# behind make_runtime only needs one backend.
@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_a_turn_survives_a_redis_restart(
    make_runtime: MakeRuntime, own_redis: RedisProcess, tmp_path: Path
) -> None:
    rt = make_runtime(
        store=StoreConfig(own_redis.url, tmp_path / "data", redis_prefix="outage"),
        engine={"model": "offline:default?ttft=0.05&tps=40&tokens=120"},
    )
    group = await rt.create_group("team", ["linus"], members=["ann"])
    sent = await rt.send(Ingest(group.id, "ann", "@linus go", client_message_id="c1"))
    await wait_for_event(rt, group.id, lambda e: e.get("vpId") == "linus")
    before = await (await rt.store()).head(group.id)

    own_redis.stop()
    await asyncio.sleep(1.0)  # the outage: the VP's writes fail meanwhile
    own_redis.start()

    await wait_for_event(rt, group.id, _result)
    assert await rt.send(WaitIdle(group.id))
    events = await _events(rt, group.id)
    # Everything logged before the restart is still there, seqs without a hole.
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(events) >= before
    results = [e for e in events if _result(e)]
    assert len(results) == 1, results
    [turn_id] = sent.turns.values()
    assert results[0]["turnId"] == turn_id
    stored = await (await rt.store()).read_messages(group.id)
    assert stored[0].id == sent.message_id
    assert await (await rt.store()).open_turns() == []

    # The group goes on: the next message is answered.
    await rt.send(Ingest(group.id, "ann", "@linus again", client_message_id="c2"))
    assert await rt.send(WaitIdle(group.id))
    events = await _events(rt, group.id)
    assert [e["data"]["subtype"] for e in events if _result(e)][-1] == "success"  # type: ignore[index]
