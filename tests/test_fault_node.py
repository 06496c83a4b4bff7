"""A Ray worker node killed while its VP actors answer.

A head (which offers the coordinators' resource), a worker node offering the
VP actors' resource (``YEAFT_VP_RESOURCES``), a gateway joined to the head,
one Redis. The VPs answer on the worker; a second worker offering the same
resource joins; then every process of the first worker (its raylet, the VP
actors) is SIGKILLed while both VPs stream. The turns that were running end
with error results that say what happened; the VP actors come back on the
second worker; the next message is answered; every acked message has its
results and the client's stream has no gap and no repeat.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from gateway import users
from store import StoreConfig
from tests.fault_helpers import FAST_NODE_DEATH, Gateway, RayNode, processes_named
from tests.fixtures.gateway import PASSWORD, WsClient
from tests.fixtures.stores import _delete_prefix
from tests.test_cli import PROVIDER_VARS, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PAIR = ["steve", "linus"]
# About three seconds a reply: long enough to kill a node mid-stream.
MODEL = "offline:default?ttft=0&tps=40&tokens=120"
VP_ACTOR = "ray::VPHost"


@dataclass
class Cluster:
    head: RayNode
    first: RayNode
    second: RayNode
    gateway: Gateway
    store_config: StoreConfig


@pytest.fixture
async def cluster(redis_server_url: str | None, tmp_path: Path) -> AsyncIterator[Cluster]:
    if redis_server_url is None:
        pytest.skip("the nodes share their state through Redis, and none is available")
    prefix = f"yeaft-test-{uuid.uuid4().hex[:12]}"
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    for var in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    # Token authentication on every node and the gateway, one fresh token.
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    ray_env = {
        **env,
        **FAST_NODE_DEATH,
        "PYTHONPATH": str(ROOT),
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "1",
    }
    head = RayNode(ray_env, {"yeaft_coordinator": 100})
    first = RayNode(ray_env, {"yeaft_vp": 100}, head_address=head.address)
    second = RayNode(ray_env, {"yeaft_vp": 100}, head_address=head.address)
    env.update(
        YEAFT_REDIS_URL=redis_server_url,
        YEAFT_REDIS_PREFIX=prefix,
        YEAFT_JWT_SECRET=secrets.token_urlsafe(48),
        YEAFT_MODEL=MODEL,
        YEAFT_OFFLINE_TPS="0",
        YEAFT_RAY_NAMESPACE=f"node-fault-{uuid.uuid4().hex[:8]}",
        YEAFT_COORDINATOR_SHARDS="1",
        YEAFT_VP_RESOURCES='{"yeaft_vp": 1}',
        YEAFT_COORDINATOR_RESOURCES='{"yeaft_coordinator": 1}',
        YEAFT_LOG_LEVEL="warning",
    )
    gateway = Gateway(env, tmp_path / "gw")
    leftovers: list[int] = []
    try:
        await head.start()
        await first.start()
        await gateway.start(head.address)
        yield Cluster(
            head,
            first,
            second,
            gateway,
            StoreConfig(redis_server_url, tmp_path / "t", redis_prefix=prefix),
        )
    finally:
        gateway.stop()
        for node in (second, first, head):
            leftovers += node.stop()
        await _delete_prefix(redis_server_url, prefix)
    assert leftovers == [], f"Ray processes left behind: {leftovers}"


def _result(vp: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "yeaft_output"
        and f["data"].get("type") == "result"
        and (vp is None or f.get("vpId") == vp)
    )


def _streaming(vp: str, after: int) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "yeaft_output"
        and f.get("vpId") == vp
        and f["data"].get("type") == "assistant"
        and f.get("seq", 0) > after
    )


async def _until(client: WsClient, pred: Callable[[dict[str, Any]], bool], n: int) -> None:
    while sum(map(pred, client.envelopes())) < n:
        await client.recv(60)


async def _send(client: WsClient, gid: str, text: str, cmid: str) -> dict[str, Any]:
    await client.send(
        {"type": "yeaft_session_chat", "groupId": gid, "text": text, "clientMessageId": cmid}
    )
    return await client.recv_until(
        lambda f: f.get("type") == "ack" and f.get("clientMessageId") == cmid, 60
    )


async def test_a_killed_worker_node_ends_its_turns_and_its_vps_answer_from_another(
    cluster: Cluster,
) -> None:
    store = cluster.store_config.open_store()
    try:
        await users.add_user(store, "ann", PASSWORD)
    finally:
        await store.close()
    gw = cluster.gateway
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
        login = await http.post("/api/login", json={"username": "ann", "password": PASSWORD})
        token = str(login.json()["token"])
        auth = {"Authorization": f"Bearer {token}"}
        made = await http.post("/api/groups", json={"name": "crew", "roster": PAIR}, headers=auth)
        assert made.status_code == 201, made.text
        gid = str(made.json()["id"])
    conn = await connect(gw.ws_url, additional_headers=auth, max_size=None)
    ann = WsClient(conn)
    reply = await ann.request({"type": "subscribe", "groupId": gid})
    assert reply.get("action") == "subscribed", reply

    # The first answers come from actors on the first worker.
    acks = [await _send(ann, gid, "@steve @linus first question", "m1")]
    await _until(ann, _result(), 2)
    on_first = processes_named(VP_ACTOR, cluster.first.sid)
    assert len(on_first) == 2, on_first
    await cluster.second.start()

    # Both VPs stream their next answers; the first worker dies under them.
    head = ann.envelopes()[-1]["seq"]
    acks.append(await _send(ann, gid, "@steve @linus second question", "m2"))
    for vp in PAIR:
        await ann.recv_until(_streaming(vp, head), 60)
    cluster.first.kill()

    await _until(ann, _result(), 4)
    lost = [f["data"] for f in ann.envelopes() if _result()(f)][2:]
    for data in lost:
        assert data["is_error"] and data["error_kind"] == "actor_died", data
        assert "stopped unexpectedly and this turn was lost" in data["error"], data
        assert "Ray is restarting it" in data["error"], data

    # The next message is answered, by the VP actors Ray started on the second worker.
    acks.append(await _send(ann, gid, "@steve @linus are you back?", "m3"))
    await _until(ann, _result(), 6)
    back = [f["data"] for f in ann.envelopes() if _result()(f)][4:]
    assert [d["subtype"] for d in back] == ["success", "success"], back
    assert len(processes_named(VP_ACTOR, cluster.second.sid)) == 2

    # Nothing acked was lost: each message has one result per VP, in one
    # stream without a gap or a repeat.
    seqs = [f["seq"] for f in ann.envelopes()]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    store = cluster.store_config.open_store()
    try:
        results = {f["turnId"] for f in ann.envelopes() if _result()(f)}
        for ack in acks:
            turns = await store.turns_of(gid, ack["messageId"])
            assert sorted(t.vp_id for t in turns) == sorted(PAIR), turns
            assert {t.turn_id for t in turns} <= results
        assert await store.open_turns() == []
    finally:
        await store.close()
    await ann.close()
