"""Redis (AOF on) restarted while a group streams, behind a real gateway.

A ``redis-server`` of this test's own (the shared one is never restarted),
the actors and a gateway on it, two people watching one group over
WebSockets. Both VPs stream when Redis is stopped (SIGTERM: it writes its
append-only file) and started again on the same port and directory. ann
stays connected: her gateway's tail reconnects and goes on. bob leaves
before the restart and comes back after it with ``lastSeq``. Both see one
stream without a gap or a repeat; every event and acked message from before
the restart is still in the store; every turn has one result; the next
message is answered. tests/test_store_outage.py covers the same restart
without a gateway.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig
from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import RedisProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # whole deployments start here

PAIR = ["steve", "linus"]
# About three seconds a reply: the restart lands mid-stream.
MODEL = "offline:default?ttft=0&tps=40&tokens=120"


def _result(f: dict[str, Any]) -> bool:
    return f.get("type") == "yeaft_output" and f["data"].get("type") == "result"


def _streaming(vp: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "yeaft_output" and f.get("vpId") == vp and f["data"]["type"] == "assistant"
    )


async def _until(client: WsClient, pred: Callable[[dict[str, Any]], bool], n: int) -> None:
    async with asyncio.timeout(60):
        while sum(map(pred, client.envelopes())) < n:
            await client.recv(60)


async def _watch(gw: Any, who: str, gid: str, **extra: Any) -> WsClient:
    client = await WsClient.open(gw, who, max_size=None)
    reply = await client.request({"type": "subscribe", "groupId": gid, **extra})
    assert reply.get("action") == "subscribed", reply
    return client


def _one_stream(envelopes: list[dict[str, Any]]) -> list[int]:
    seqs = [f["seq"] for f in envelopes]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"gaps or repeats: {seqs}"
    return seqs


# The runtime's store is this test's own Redis; the parametrised fixture
# behind make_runtime only needs one backend.
@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_a_redis_restart_mid_stream_loses_nothing_and_clients_resume(
    make_runtime: MakeRuntime,
    start_gateway: StartGateway,
    own_redis: RedisProcess,
    tmp_path: Path,
) -> None:
    rt = make_runtime(
        store=StoreConfig(own_redis.url, tmp_path / "data", redis_prefix="restart"),
        engine={"model": MODEL},
    )
    gw = await start_gateway(rt)
    await gw.user("ann")
    await gw.user("bob")
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": PAIR}, headers=gw.auth("ann")
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    added = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    assert added.status_code == 200, added.text
    ann = await _watch(gw, "ann", gid)
    bob = await _watch(gw, "bob", gid)

    chat = {"type": "yeaft_session_chat", "groupId": gid, "text": "@steve @linus go"}
    await ann.send({**chat, "clientMessageId": "m1"})
    ack = await ann.recv_until(lambda f: f.get("type") == "ack", 30)
    for vp in PAIR:
        await ann.recv_until(_streaming(vp), 30)
    await _until(bob, _streaming("linus"), 1)
    await bob.close()
    bob_before = bob.envelopes()
    store = await rt.store()
    logged = await store.read_events(gid, 0, limit=100_000)
    assert not any(_result(json.loads(e.text)) for e in logged.events), "restarted too late"

    own_redis.stop()
    # While Redis is away a chat is refused with an error frame, not acked.
    await ann.send({**chat, "clientMessageId": "m-outage"})
    refused = await ann.recv_until(lambda f: f.get("type") in ("ack", "error"), 30)
    assert refused["type"] == "error" and refused["code"] == "internal", refused
    own_redis.start()

    # ann's connection carries on: both turns end, each with one result.
    await _until(ann, _result, 2)
    # Everything logged before the restart is still there, unchanged.
    after = await store.read_events(gid, 0, limit=100_000)
    assert [e.text for e in after.events[: len(logged.events)]] == [e.text for e in logged.events]
    assert ack["messageId"] in [m.id for m in await store.read_messages(gid)]
    # A turn the outage reached ends saying so; none blames the model.
    for data in [f["data"] for f in ann.envelopes() if _result(f)]:
        assert data["subtype"] == "success" or data["error_kind"] == "store", data
        assert data["subtype"] == "success" or "the store was unavailable" in data["error"]

    # The group goes on: the next message is answered.
    await ann.send({**chat, "text": "@steve again", "clientMessageId": "m2"})
    await _until(ann, _result, 3)
    assert [f["data"]["subtype"] for f in ann.envelopes() if _result(f)][-1] == "success"

    # bob comes back with the last seq he saw: nothing missed, nothing twice.
    bob = await _watch(gw, "bob", gid, lastSeq=bob_before[-1]["seq"])
    await _until(bob, _result, 3)
    ann_seqs = _one_stream(ann.envelopes())
    bob_all = bob_before + bob.envelopes()
    assert _one_stream(bob_all) == ann_seqs
    assert bob_all == ann.envelopes()

    # Every turn of every acked message has exactly one result.
    results: dict[str, int] = {}
    for f in ann.envelopes():
        if _result(f):
            results[f["turnId"]] = results.get(f["turnId"], 0) + 1
    asked = [m for m in await store.read_messages(gid) if m.role == "user"]
    assert [m.meta.get("clientMessageId") for m in asked] == ["m1", "m2"]
    for message in asked:
        for turn in await store.turns_of(gid, message.id):
            assert results.get(turn.turn_id) == 1, (turn, results)
    assert await store.open_turns() == []
    await ann.close()
    await bob.close()
