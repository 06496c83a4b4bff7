"""Backpressure at the gateway over real WebSockets, and its small parts on their own.

Chat frames are handled off the receive loop, a few at a time per
connection; control frames are not queued behind them; a per-user rate limit
spans a user's connections; refusals the server causes (``busy``, rate
limits after the server read late) never close a client as abusive. Slow
handlers are made with events the test sets, not with sleeps.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.inflight import InFlight
from gateway.limits import LagMeter, UserBuckets
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime

EMBEDDED = pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
SLOW = {"model": "offline:default?ttft=60&tps=100&tokens=5"}


def chat(group_id: str, cmid: str, text: str = "@steve hello") -> dict[str, Any]:
    return {
        "type": "yeaft_session_chat",
        "groupId": group_id,
        "text": text,
        "clientMessageId": cmid,
    }


async def new_group(gw: Gateway, user: str, roster: list[str]) -> str:
    reply = await gw.http.post(
        "/api/groups", json={"name": "g", "roster": roster}, headers=gw.auth(user)
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


def hold(gw: Gateway, monkeypatch: pytest.MonkeyPatch, name: str) -> asyncio.Event:
    """Make the gateway's ``groups.<name>`` wait for the returned event first."""
    release = asyncio.Event()
    real = getattr(gw.ctx.groups, name)

    async def held(*args: Any, **kwargs: Any) -> Any:
        await release.wait()
        return await real(*args, **kwargs)

    monkeypatch.setattr(gw.ctx.groups, name, held)
    return release


# -- over a real WebSocket -------------------------------------------------------
@EMBEDDED
async def test_a_ping_is_answered_while_chat_frames_are_in_flight(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    gw = await start_gateway(chat_in_flight=2)
    await gw.user("ann")
    gid = await new_group(gw, "ann", ["steve"])
    release = hold(gw, monkeypatch, "ingest")
    ws = await WsClient.open(gw, "ann")
    await ws.send(chat(gid, "m1"))
    await ws.send(chat(gid, "m2"))
    # Both chats wait on the coordinator; the ping does not wait for them.
    assert (await ws.request({"type": "ping"}, within=2))["type"] == "pong"
    # Every in-flight place is taken: the next chat is refused at once.
    busy = await ws.request(chat(gid, "m3"), within=2)
    assert (busy["type"], busy["code"], busy["requestId"]) == ("error", "busy", "m3")
    assert busy["retryAfter"] > 0 and busy["detail"]["reason"] == "in_flight"
    release.set()
    acks = [await ws.recv_until(lambda f: f["type"] == "ack") for _ in range(2)]
    # Chats to one group are stored in the order they were sent.
    assert [a["clientMessageId"] for a in acks] == ["m1", "m2"]
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert ws.conn.close_code is None
    await ws.close()


@EMBEDDED
async def test_a_busy_group_refuses_a_chat_with_a_typed_error_and_stays_open(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await start_gateway(make_runtime(engine=SLOW, max_group_pending_turns=1))
    await gw.user("ann")
    gid = await new_group(gw, "ann", ["steve"])
    ws = await WsClient.open(gw, "ann")
    ack = await ws.request(chat(gid, "m1"))
    assert ack["type"] == "ack" and ack["clientMessageId"] == "m1"
    busy = await ws.request(chat(gid, "m2"))
    assert (busy["type"], busy["code"], busy["requestId"]) == ("error", "busy", "m2")
    assert busy["retryAfter"] > 0 and busy["detail"] == {"reason": "busy"}
    assert "1 turns waiting" in busy["message"]
    # Nothing was stored for the refused message.
    history = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    assert [m["text"] for m in history.json()["messages"]] == ["@steve hello"]
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert ws.conn.close_code is None
    await ws.close()


@EMBEDDED
async def test_the_per_user_limit_spans_the_users_connections(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(
        rate_limit_per_s=100,
        rate_limit_burst=100,
        user_rate_limit_per_s=0.01,
        user_rate_limit_burst=4,
    )
    await gw.user("ann")
    await gw.user("bob")
    first, second = await WsClient.open(gw, "ann"), await WsClient.open(gw, "ann")
    bobs = await WsClient.open(gw, "bob")
    assert [(await first.request({"type": "ping"}))["type"] for _ in range(3)] == ["pong"] * 3
    replies = [await second.request({"type": "ping"}) for _ in range(3)]
    assert [r["type"] for r in replies] == ["pong", "error", "error"]
    limited = replies[1]
    assert limited["code"] == "rate_limited" and limited["retryAfter"] > 0
    assert "from ann across all connections" in limited["message"]
    # Another user has a bucket of their own.
    assert [(await bobs.request({"type": "ping"}))["type"] for _ in range(3)] == ["pong"] * 3
    for ws in (first, second, bobs):
        assert ws.conn.close_code is None
        await ws.close()


@EMBEDDED
async def test_a_client_the_server_read_late_is_not_closed_as_abusive(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    gw = await start_gateway(rate_limit_per_s=10, rate_limit_burst=2, abuse_max_errors=3)
    await gw.user("ann")
    release = hold(gw, monkeypatch, "list_for")
    ws = await WsClient.open(gw, "ann")
    await ws.send({"type": "list_groups"})
    # Well under 10 frames a second, while the server is stuck in a handler:
    # the frames wait unread, then arrive together and overflow the bucket.
    for _ in range(8):
        await ws.send({"type": "ping"})
        await asyncio.sleep(0.15)
    release.set()
    replies = [await ws.next() for _ in range(9)]
    assert replies[0]["type"] == "group_update"
    limited = [r for r in replies if r["type"] == "error"]
    assert len(limited) > 3 and {r["code"] for r in limited} == {"rate_limited"}
    # More refusals than the abuse limit, but the lag was the server's.
    await asyncio.sleep(0.3)
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert ws.conn.close_code is None
    await ws.close()


# -- the parts ---------------------------------------------------------------------
async def test_in_flight_work_keeps_its_order_per_key_and_refuses_when_full() -> None:
    inflight = InFlight(limit=3)
    gate = asyncio.Event()
    done = {name: asyncio.Event() for name in "abc"}
    order: list[str] = []

    def work(name: str, wait: bool) -> Any:
        async def run() -> None:
            if wait:
                await gate.wait()
            order.append(name)
            done[name].set()

        return run

    assert inflight.start("g1", work("a", True))
    assert inflight.start("g1", work("b", False))
    assert inflight.start("g2", work("c", False))
    assert not inflight.start("g3", work("d", False))  # three in flight: refused
    await asyncio.wait_for(done["c"].wait(), 5)  # another key does not wait for g1
    assert order == ["c"]
    gate.set()
    await asyncio.wait_for(done["b"].wait(), 5)
    assert order == ["c", "a", "b"] and inflight.retry_after() >= 0.1


def test_user_buckets_are_shared_and_forgotten_with_the_last_connection() -> None:
    now = [0.0]
    buckets = UserBuckets(rate=1, burst=2, clock=lambda: now[0])
    one, two = buckets.acquire("ann"), buckets.acquire("ann")
    assert one is two and len(buckets) == 1
    assert one.take() and two.take() and not one.take()
    buckets.release("ann")
    assert len(buckets) == 1
    buckets.release("ann")
    assert len(buckets) == 0


def test_the_lag_meter_remembers_lag_over_its_threshold() -> None:
    now = [10.0]
    meter = LagMeter(threshold=0.1, clock=lambda: now[0])
    meter.record(0.05)
    assert not meter.lagged_within(5)
    meter.record(0.5)
    now[0] += 2
    assert meter.lagged_within(2) and not meter.lagged_within(1.5)
