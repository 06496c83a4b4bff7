"""Two ``yeaft serve`` processes on one Ray cluster and one Redis, as a scaled deployment runs.

A Ray head started here with ``ray start --head`` (token authentication on),
two gateway processes joining it with ``--ray-address``, both on the same
Redis key prefix and JWT secret, each with its own data directory and port.
ann talks on gateway A and bob on gateway B: each sees the other's message
and every VP's reply, exactly once, in seq order, with no gap. Then gateway A
is killed while a reply streams; ann reconnects to B with ``lastSeq`` and
misses nothing, duplicates nothing.
"""

from __future__ import annotations

import asyncio
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
from tests.fault_helpers import Gateway, RayNode
from tests.fixtures.gateway import PASSWORD, WsClient
from tests.fixtures.stores import _delete_prefix
from tests.test_cli import PROVIDER_VARS, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # whole deployments start here

ROSTER = ["linus", "steve", "ken"]
# Each reply streams for about two seconds: long enough to kill a gateway mid-stream.
MODEL = "offline:default?ttft=0&tps=40&tokens=80"


@dataclass
class Deployment:
    head: RayNode
    a: Gateway
    b: Gateway
    store_config: StoreConfig


@pytest.fixture
async def deployment(redis_server_url: str | None, tmp_path: Path) -> AsyncIterator[Deployment]:
    if redis_server_url is None:
        pytest.skip("two gateways share their state through Redis, and none is available")
    prefix = f"yeaft-test-{uuid.uuid4().hex[:12]}"
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    for var in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    # One token for the head and both gateways, fresh for this test.
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    # The detached actors never let the node drain on SIGTERM: do not wait 30 s for it.
    head = RayNode({**env, "PYTHONPATH": str(ROOT), "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "1"})
    env.update(
        YEAFT_REDIS_URL=redis_server_url,
        YEAFT_REDIS_PREFIX=prefix,
        YEAFT_JWT_SECRET=secrets.token_urlsafe(48),
        YEAFT_MODEL=MODEL,
        YEAFT_OFFLINE_TPS="0",
        YEAFT_RAY_NAMESPACE=f"two-gateways-{uuid.uuid4().hex[:8]}",
        YEAFT_LOG_LEVEL="warning",
    )
    a = Gateway(env, tmp_path / "a")
    b = Gateway(env, tmp_path / "b")
    leftovers: list[int] = []
    try:
        await head.start()
        # Both replicas start at once, as a Deployment's pods do on an empty Redis.
        await asyncio.gather(a.start(head.address), b.start(head.address))
        yield Deployment(
            head, a, b, StoreConfig(redis_server_url, tmp_path / "t", redis_prefix=prefix)
        )
    finally:
        a.stop()
        b.stop()
        leftovers = head.stop()
        await _delete_prefix(redis_server_url, prefix)
    assert leftovers == [], f"Ray processes left behind: {leftovers}"


async def _login(gw: Gateway, username: str) -> str:
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
        reply = await http.post("/api/login", json={"username": username, "password": PASSWORD})
        assert reply.status_code == 200, reply.text
        return str(reply.json()["token"])


async def ann_and_bob_crew(deployment: Deployment) -> tuple[str, str, str]:
    """ann signed in on A, bob on B, and ann's group "crew" with bob in it.

    Returns ann's token, bob's token and the group's id.
    """
    store = deployment.store_config.open_store()
    try:
        for name in ("ann", "bob"):
            await users.add_user(store, name, PASSWORD)
    finally:
        await store.close()
    ann_token = await _login(deployment.a, "ann")
    bob_token = await _login(deployment.b, "bob")
    ann_auth = {"Authorization": f"Bearer {ann_token}"}
    async with httpx.AsyncClient(base_url=deployment.a.url, timeout=30) as http:
        made = await http.post(
            "/api/groups", json={"name": "crew", "roster": ROSTER}, headers=ann_auth
        )
        assert made.status_code == 201, made.text
        gid = str(made.json()["id"])
        added = await http.post(
            f"/api/groups/{gid}/members", json={"username": "bob"}, headers=ann_auth
        )
        assert added.status_code == 200, added.text
    return ann_token, bob_token, gid


async def _watch(gw: Gateway, token: str, gid: str, **extra: Any) -> WsClient:
    conn = await connect(
        gw.ws_url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=None
    )
    client = WsClient(conn)
    reply = await client.request({"type": "subscribe", "groupId": gid, **extra})
    assert reply.get("action") == "subscribed", reply
    return client


def _log(client: WsClient, gid: str) -> list[dict[str, Any]]:
    """The group's envelopes ``client`` has received so far, in arrival order."""
    return [f for f in client.received if "seq" in f and f.get("groupId") == gid]


def _is_result(vp: str | None = None) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "yeaft_output"
        and f["data"].get("type") == "result"
        and (vp is None or f.get("vpId") == vp)
    )


async def _until_count(
    client: WsClient, pred: Callable[[dict[str, Any]], bool], n: int, within: float = 40
) -> None:
    """Read until ``client`` has received ``n`` envelopes matching ``pred``."""
    async with asyncio.timeout(within):
        while sum(1 for f in client.received if "seq" in f and pred(f)) < n:
            await client.recv(within)


def _check_stream(log: list[dict[str, Any]]) -> None:
    seqs = [f["seq"] for f in log]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"gaps or repeats: {seqs}"


def _said(author: str, cmid: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "group_message"
        and f.get("author") == author
        and f.get("clientMessageId") == cmid
    )


async def test_two_gateway_processes_deliver_every_message_to_clients_of_both(
    deployment: Deployment,
) -> None:
    a, b = deployment.a, deployment.b
    ann_token, bob_token, gid = await ann_and_bob_crew(deployment)
    # One JWT secret: a token from A is good on B.
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        listed = await http.get("/api/groups", headers={"Authorization": f"Bearer {ann_token}"})
        assert listed.status_code == 200 and gid in listed.text, listed.text

    ann = await _watch(a, ann_token, gid)
    bob = await _watch(b, bob_token, gid)

    # ann on A asks all three VPs; bob on B sees her message and every reply.
    await ann.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus @steve @ken how should we shard the cache?",
            "clientMessageId": "m1",
        }
    )
    for client in (ann, bob):
        await _until_count(client, _is_result(), len(ROSTER))
    acks = [f for f in ann.received if f.get("type") == "ack"]
    assert [f["clientMessageId"] for f in acks] == ["m1"] and not acks[0].get("duplicate")
    for client in (ann, bob):
        log = _log(client, gid)
        said = [i for i, f in enumerate(log) if _said("ann", "m1")(f)]
        assert len(said) == 1, log
        assert said[0] < min(i for i, f in enumerate(log) if _is_result()(f))
        assert sorted(f["vpId"] for f in log if _is_result()(f)) == sorted(ROSTER)
        assert log[said[0]]["messageId"] == acks[0]["messageId"]
        _check_stream(log)

    # bob on B answers; ann on A sees his message and steve's reply.
    await bob.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@steve and the eviction policy?",
            "clientMessageId": "m2",
        }
    )
    for client in (ann, bob):
        await _until_count(client, _is_result(), len(ROSTER) + 1)
        log = _log(client, gid)
        assert sum(map(_said("bob", "m2"), log)) == 1
        assert [f["vpId"] for f in log if _is_result()(f)][-1] == "steve"
        _check_stream(log)

    # ann asks linus on A; A is killed while his reply streams.
    before = len(_log(ann, gid))
    await ann.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus and what if a shard dies?",
            "clientMessageId": "m3",
        }
    )
    await ann.recv_until(
        lambda f: (
            f.get("type") == "yeaft_output"
            and f.get("vpId") == "linus"
            and f["data"].get("type") == "assistant"
            and "seq" in f
            and f["seq"] > _log(ann, gid)[before - 1]["seq"]
        )
    )
    a.kill()
    seen_on_a = _log(ann, gid)
    last_seq = seen_on_a[-1]["seq"]
    assert not any(_is_result("linus")(f) for f in seen_on_a[before:]), "A was killed too late"

    ann_again = await _watch(b, ann_token, gid, lastSeq=last_seq)
    await _until_count(bob, _is_result(), len(ROSTER) + 2)
    await _until_count(ann_again, _is_result("linus"), 1)
    ann_all = seen_on_a + _log(ann_again, gid)
    bob_all = _log(bob, gid)
    _check_stream(ann_all)
    _check_stream(bob_all)
    assert [f["seq"] for f in ann_all] == [f["seq"] for f in bob_all[-len(ann_all) :]]
    assert ann_all == bob_all[-len(ann_all) :]
    assert sum(map(_said("ann", "m3"), ann_all)) == 1
    answered = [f["vpId"] for f in ann_all if _is_result()(f)]
    assert sorted(answered[:3]) == sorted(ROSTER) and answered[3:] == ["steve", "linus"]
    # The reply A was streaming when it died ended normally, on the cluster.
    assert not [f for f in ann_all if _is_result("linus")(f)][-1]["data"].get("is_error")
    await ann_again.conn.close()
    await bob.conn.close()
