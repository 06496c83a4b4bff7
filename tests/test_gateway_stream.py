"""Streaming through the gateway, against both stores: reconnect with lastSeq,
slow clients, retention gaps, and one tail per group."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import connect

from coordinator.commands import WaitIdle
from gateway.metrics import Metrics
from gateway.settings import GatewaySettings
from gateway.tail import Hub
from protocol import YeaftOutput
from store.base import Group, Store, new_id
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.fixtures.stores import StoreFactory


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


def _is_system(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "system"


async def _eventually(cond: Callable[[], bool], within: float = 10.0) -> None:
    """Wait for server-side state that no client frame announces (cleanup after a close).

    Polling is the only way here: the server signals nothing to the test when
    it finishes cleaning up after a client that left.
    """
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def _store_group(gw: Gateway, *members: str) -> str:
    """A group made directly in the store: these tests are about the event log."""
    group = Group(id=new_id("grp"), name="stream", roster=["steve"], members=list(members))
    await (await gw.store()).create_group(group)
    return group.id


def _notice(gid: str, i: int, size: int = 10) -> YeaftOutput:
    """An envelope as a VP actor would append it.

    The message is random text: uvicorn compresses WebSocket messages
    (permessage-deflate), and repeated characters would shrink to nothing.
    """
    return YeaftOutput.model_validate(
        {
            "type": "yeaft_output",
            "conversationId": gid,
            "groupId": gid,
            "vpId": "steve",
            "turnId": "t1",
            "data": {
                "type": "system",
                "subtype": "notice",
                "message": secrets.token_urlsafe(size)[:size],
                "detail": {"i": i},
            },
        }
    )


async def test_reconnect_with_last_seq_ends_exactly_like_an_uninterrupted_client(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    # Replies of 40 tokens at 20 a second: still streaming when the client drops,
    # however many deltas a loaded machine merges into one envelope.
    runtime = make_runtime(engine={"model": "offline:default?tps=20&tokens=40"})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    created = await gw.http.post(
        "/api/groups", json={"name": "t", "roster": ["steve", "linus"]}, headers=gw.auth("ann")
    )
    gid = created.json()["id"]
    history = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    start = history.json()["lastSeq"]

    steady, flaky, steve_only = [await WsClient.open(gw, "ann") for _ in range(3)]
    for client, extra in ((steady, {}), (flaky, {}), (steve_only, {"vpIds": ["steve"]})):
        reply = await client.request(
            {"type": "subscribe", "groupId": gid, "lastSeq": start, **extra}
        )
        assert reply["action"] == "subscribed"
    # One tail serves the three clients.
    assert list(gw.ctx.hub.tails) == [gid] and len(gw.ctx.hub.tails[gid].subscriptions) == 3

    ack = await steady.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": "@steve @linus tell me more"}
    )
    assert ack["type"] == "ack"
    while len(flaky.envelopes()) < 6:
        await flaky.recv()
    seen = flaky.envelopes()[-1]["seq"]
    flaky.conn.transport.abort()  # dropped mid-stream, no closing handshake
    # The turns go on without it; reconnect once it has missed several envelopes.
    await steady.recv_until(lambda f: f.get("seq", 0) >= seen + 8)
    assert sum(_is_result(f) for f in steady.received) < 2, "the drop was not mid-stream"
    again = await WsClient.open(gw, "ann")
    reply = await again.request({"type": "subscribe", "groupId": gid, "lastSeq": seen})
    assert reply["action"] == "subscribed"

    assert await runtime.send(WaitIdle(gid))
    head = await (await gw.store()).head(gid)
    for client in (steady, again):
        await client.until_seq(head)
    # The VP filter keeps steve's envelopes and everything the group must see:
    # the person's message, every VP's system payloads (a turn's init, its
    # notices) and every turn's end.
    wanted = [
        e
        for e in steady.envelopes()
        if e.get("vpId") in ("steve", "system")
        or _is_result(e)
        or _is_system(e)
        or e["type"] == "group_message"
    ]
    assert (
        wanted[0]["type"] == "group_message" and wanted[0]["text"] == "@steve @linus tell me more"
    )
    await steve_only.until_seq(wanted[-1]["seq"])
    assert steve_only.envelopes() == wanted
    assert any(e.get("vpId") == "linus" and _is_result(e) for e in wanted)

    expected = list(range(start + 1, head + 1))
    assert [e["seq"] for e in steady.envelopes()] == expected
    resumed = flaky.envelopes() + again.envelopes()
    assert [e["seq"] for e in resumed] == expected  # none missing, none twice
    assert resumed == steady.envelopes()  # and the same payloads
    assert sum(_is_result(e) for e in resumed) == 2

    for client in (steady, again, steve_only):
        await client.close()
    # The tail stops once nobody watches the group.
    await _eventually(lambda: not gw.ctx.hub.tails)


async def test_a_slow_client_is_dropped_without_delaying_a_fast_one(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(client_queue_size=8)
    await gw.user("ann")
    gid = await _store_group(gw, "ann")
    fast = await WsClient.open(gw, "ann", max_size=None)
    assert (await fast.request({"type": "subscribe", "groupId": gid}))["action"] == "subscribed"
    # A client that stops reading, behind a narrow link: small socket buffers
    # at both ends (loopback buffers would otherwise swallow megabytes), and
    # a client library that stops reading its socket after one unread message.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", gw.port))
    slow = WsClient(
        await connect(
            gw.ws_url, sock=sock, additional_headers=gw.auth("ann"), max_queue=1, max_size=None
        )
    )
    gw.server_socket(sock).setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    assert (await slow.request({"type": "subscribe", "groupId": gid}))["action"] == "subscribed"

    count, size = 100, 20_000  # 2 MB: far more than the slow path buffers
    store = await gw.store()
    started = time.monotonic()
    for i in range(count):
        await store.append_event(gid, _notice(gid, i, size))
    await fast.recv_until(lambda f: f.get("seq") == count, within=20)
    elapsed = time.monotonic() - started
    assert [e["seq"] for e in fast.envelopes()] == list(range(1, count + 1))
    assert elapsed < 10, f"the fast client took {elapsed:.1f} s"
    await _eventually(lambda: len(gw.ctx.hub.tails[gid].subscriptions) == 1)

    # Reading again, the slow client finds what was sent, then the close code.
    assert await slow.closed_with() == 4409
    got = [e["seq"] for e in slow.envelopes()]
    assert got == list(range(1, len(got) + 1)) and len(got) < count
    metrics = (await gw.http.get("/metrics")).text
    assert 'yeaft_ws_closes_total{code="4409"} 1.0' in metrics
    await fast.close()


async def test_last_seq_older_than_retention_gets_a_gap_error_then_continues(
    start_gateway: StartGateway, make_runtime: MakeRuntime, store_factory: StoreFactory
) -> None:
    short = dataclasses.replace(store_factory.config, event_retention=5)
    gw = await start_gateway(make_runtime(store=short))
    await gw.user("ann")
    gid = await _store_group(gw, "ann")
    store = await gw.store()
    for i in range(12):
        await store.append_event(gid, _notice(gid, i))

    ws = await WsClient.open(gw, "ann")
    assert (await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 1}))["action"]
    gap = await ws.next()
    assert gap["type"] == "error" and gap["code"] == "gap"
    assert gap["detail"] == {
        "groupId": gid,
        "firstSeq": 8,
        "historyUrl": f"/api/groups/{gid}/messages",
    }
    await ws.recv_until(lambda f: f.get("seq") == 12)
    assert [e["seq"] for e in ws.envelopes()] == [8, 9, 10, 11, 12]
    await store.append_event(gid, _notice(gid, 12))
    live = await ws.next()
    assert live["seq"] == 13 and live["data"]["detail"] == {"i": 12}

    # Just inside retention: no gap.
    other = await WsClient.open(gw, "ann")
    await other.request({"type": "subscribe", "groupId": gid, "lastSeq": 8})
    await other.recv_until(lambda f: f.get("seq") == 13)
    assert [e["seq"] for e in other.envelopes()] == [9, 10, 11, 12, 13]
    assert not [f for f in other.received if f["type"] == "error"]
    await ws.close()
    await other.close()


async def test_subscribing_without_last_seq_is_live_only_and_resubscribing_replaces(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    gid = await _store_group(gw, "ann")
    store = await gw.store()
    await store.append_event(gid, _notice(gid, 0))
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid})
    await store.append_event(gid, _notice(gid, 1))
    assert (await ws.next())["seq"] == 2  # seq 1 was before the subscription
    # Subscribing again (here with lastSeq) replaces the subscription.
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await ws.recv_until(lambda f: f.get("seq") == 2)
    assert [e["seq"] for e in ws.envelopes()] == [2, 1, 2]
    assert len(gw.ctx.hub.tails[gid].subscriptions) == 1
    await ws.send({"type": "unsubscribe", "groupId": gid})
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert gid not in gw.ctx.hub.tails
    await ws.close()


async def test_last_seq_beyond_the_head_gets_a_conflict_error_then_continues(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    gid = await _store_group(gw, "ann")
    store = await gw.store()
    for i in range(3):
        await store.append_event(gid, _notice(gid, i))

    # A lastSeq this log never reached (a client of a store since reset).
    ahead = await WsClient.open(gw, "ann")
    reply = await ahead.request({"type": "subscribe", "groupId": gid, "lastSeq": 50})
    assert reply["action"] == "subscribed"
    error = await ahead.next()
    assert (error["type"], error["code"], error["field"]) == ("error", "conflict", "lastSeq")
    assert error["detail"] == {
        "groupId": gid,
        "lastSeq": 3,
        "historyUrl": f"/api/groups/{gid}/messages",
    }
    # It goes on after the head: the next envelope is not hidden.
    await store.append_event(gid, _notice(gid, 3))
    live = await ahead.next()
    assert live["seq"] == 4 and live["data"]["detail"] == {"i": 3}

    # lastSeq at the head, with the tail already running, is no conflict.
    level = await WsClient.open(gw, "ann")
    await level.request({"type": "subscribe", "groupId": gid, "lastSeq": 4})
    await store.append_event(gid, _notice(gid, 4))
    for client in (ahead, level):
        await client.until_seq(5)
    assert [e["seq"] for e in level.envelopes()] == [5]
    assert [f for f in level.received if f["type"] == "error"] == []
    assert [e["seq"] for e in ahead.envelopes()] == [4, 5]
    await ahead.close()
    await level.close()


class _Sink:
    """A subscriber that keeps what it is given (the Hub's side of a connection)."""

    username = "ann"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def offer(self, text: str, *, envelope: bool) -> bool:
        self.texts.append(text)
        return True

    async def put(self, text: str, *, envelope: bool) -> None:
        self.texts.append(text)

    def overflow(self) -> None:
        raise AssertionError("no overflow expected")

    def attach(self, subscription: Any) -> None:
        pass

    def detach(self, subscription: Any) -> None:
        pass


class _SlowHead:
    """An event log whose ``head`` answers only when the test lets it."""

    def __init__(self, log: Store) -> None:
        self.log = log
        self.gate = asyncio.Event()

    async def head(self, group_id: str) -> int:
        await self.gate.wait()
        return await self.log.head(group_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


async def test_subscribed_is_said_only_once_the_start_is_fixed(
    store_factory: StoreFactory,
) -> None:
    # A client told "subscribed" may act at once, through another gateway
    # say; whatever that causes must reach it. So the reply waits until the
    # tail knows where the subscription starts.
    store = store_factory()
    group = Group(id=new_id("grp"), name="stream", roster=["steve"], members=["ann"])
    await store.create_group(group)
    slow = _SlowHead(store)

    async def event_log() -> Any:
        return slow

    hub = Hub(event_log, GatewaySettings(tail_wait_s=2.0), Metrics())
    sink, said = _Sink(), asyncio.Event()
    subscribing = asyncio.create_task(hub.subscribe(sink, group.id, None, None, pinned=said.set))
    await asyncio.sleep(0)  # the tail starts and asks for the head
    assert not said.is_set()
    slow.gate.set()
    await subscribing
    assert said.is_set()
    # What the client causes after "subscribed" reaches it.
    await store.append_event(group.id, _notice(group.id, 1))
    await _eventually(lambda: len(sink.texts) == 1)
    assert '"i":1' in sink.texts[0]
    await hub.close()
