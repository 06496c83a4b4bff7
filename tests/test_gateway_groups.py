"""Groups through the gateway on real Ray, against both stores: management,
isolation between users, and chat acks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import ray

from coordinator.commands import WaitIdle
from coordinator.vps import host_names
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from store import new_id
from store.base import Group
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ask_then_answer


async def _group(gw: Gateway, user: str, **body: Any) -> dict[str, Any]:
    reply = await gw.http.post(
        "/api/groups",
        json={"name": "team", "roster": ["steve", "linus"], **body},
        headers=gw.auth(user),
    )
    assert reply.status_code == 201, reply.text
    group: dict[str, Any] = reply.json()
    return group


async def test_group_management_over_http(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    group = await _group(gw, "ann", defaultVpId="linus", settings={"fanoutCap": 4})
    gid = group["id"]
    assert group["members"] == ["ann"] and group["roster"] == ["steve", "linus"]
    assert group["defaultVpId"] == "linus" and group["settings"]["fanoutCap"] == 4
    assert [g["id"] for g in (await gw.http.get("/api/groups", headers=ann)).json()["groups"]] == [
        gid
    ]
    renamed = await gw.http.patch(f"/api/groups/{gid}", json={"name": "core"}, headers=ann)
    assert renamed.json()["name"] == "core"
    added = await gw.http.post(f"/api/groups/{gid}/vps", json={"vpId": "martin"}, headers=ann)
    assert added.json()["roster"] == ["steve", "linus", "martin"]
    removed = await gw.http.delete(f"/api/groups/{gid}/vps/steve", headers=ann)
    assert removed.json()["roster"] == ["linus", "martin"]
    cleared = await gw.http.put(f"/api/groups/{gid}/default-vp", json={"vpId": None}, headers=ann)
    assert cleared.json()["defaultVpId"] is None

    refused = [
        (
            await gw.http.post(
                "/api/groups", json={"name": "x", "roster": ["nobody"]}, headers=ann
            ),
            "unknown_vp",
        ),
        (
            await gw.http.post(f"/api/groups/{gid}/vps", json={"vpId": "ghost"}, headers=ann),
            "unknown_vp",
        ),
        (
            await gw.http.put(f"/api/groups/{gid}/default-vp", json={"vpId": "steve"}, headers=ann),
            "default_not_in_roster",
        ),
    ]
    for reply, reason in refused:
        assert reply.status_code == 422, reply.text
        assert reply.json()["error"]["detail"]["reason"] == reason
    too_wide = await gw.http.post(
        "/api/groups", json={"name": "x", "roster": [], "settings": {"fanoutCap": 99}}, headers=ann
    )
    assert too_wide.status_code == 422 and too_wide.json()["error"]["field"] == "settings.fanoutCap"
    model = await gw.http.post(
        "/api/groups", json={"name": "x", "roster": [], "settings": {"model": "x"}}, headers=ann
    )
    assert model.status_code == 422 and model.json()["error"]["code"] == "invalid_request"

    # Members: bob joins, sees the group, leaves; the last member cannot leave.
    missing = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "zed"}, headers=ann
    )
    assert missing.status_code == 404
    joined = await gw.http.post(f"/api/groups/{gid}/members", json={"username": "bob"}, headers=ann)
    assert joined.json()["members"] == ["ann", "bob"]
    assert (await gw.http.get(f"/api/groups/{gid}", headers=bob)).status_code == 200
    left = await gw.http.delete(f"/api/groups/{gid}/members/bob", headers=bob)
    assert left.json()["members"] == ["ann"]
    assert (await gw.http.get(f"/api/groups/{gid}", headers=bob)).status_code == 404
    last = await gw.http.delete(f"/api/groups/{gid}/members/ann", headers=ann)
    assert last.status_code == 409 and last.json()["error"]["code"] == "conflict"

    assert (await gw.http.delete(f"/api/groups/{gid}", headers=ann)).status_code == 204
    assert (await gw.http.get(f"/api/groups/{gid}", headers=ann)).status_code == 404
    assert (await gw.http.get("/api/groups", headers=ann)).json() == {"groups": []}


async def test_users_cannot_see_subscribe_read_or_send_to_others_groups(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    gid = (await _group(gw, "ann"))["id"]
    bob = gw.auth("bob")
    assert (await gw.http.get("/api/groups", headers=bob)).json() == {"groups": []}
    for method, path, body in [
        ("GET", f"/api/groups/{gid}", None),
        ("GET", f"/api/groups/{gid}/messages", None),
        ("PATCH", f"/api/groups/{gid}", {"name": "mine"}),
        ("DELETE", f"/api/groups/{gid}", None),
        ("POST", f"/api/groups/{gid}/vps", {"vpId": "martin"}),
        ("DELETE", f"/api/groups/{gid}/vps/steve", None),
        ("PUT", f"/api/groups/{gid}/default-vp", {"vpId": None}),
        ("POST", f"/api/groups/{gid}/members", {"username": "bob"}),
        ("DELETE", f"/api/groups/{gid}/members/ann", None),
    ]:
        reply = await gw.http.request(method, path, json=body, headers=bob)
        assert reply.status_code == 404, (method, path, reply.text)
        # The same answer as for a group that does not exist at all.
        assert reply.json() == {"error": {"code": "not_found", "message": "group not found"}}

    ws = await WsClient.open(gw, "bob")
    frames: list[dict[str, Any]] = [
        {"type": "subscribe", "groupId": gid, "lastSeq": 0},
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus hi",
            "clientMessageId": "b1",
        },
        {"type": "cancel_execution", "groupId": gid},
        {"type": "ask_user_answer", "groupId": gid, "requestId": "ask_x", "answer": "yes"},
        {"type": "rename_group", "groupId": gid, "name": "mine"},
        {"type": "add_vp", "groupId": gid, "vpId": "martin"},
        {"type": "remove_vp", "groupId": gid, "vpId": "steve"},
        {"type": "set_default_vp", "groupId": gid, "vpId": None},
        {"type": "delete_group", "groupId": gid},
    ]
    for frame in frames:
        reply = await ws.request(frame)
        assert reply["type"] == "error" and reply["code"] == "not_found", (frame, reply)
    listed = await ws.request({"type": "list_groups"})
    assert listed["action"] == "list" and listed["groups"] == []
    await ws.close()

    store = await gw.store()
    group = await store.get_group(gid)
    assert group is not None and group.name == "team" and group.roster == ["steve", "linus"]
    assert await store.read_messages(gid) == []  # bob's message was never stored
    assert (await store.read_events(gid, 0)).events == []


async def test_chat_is_acked_after_storage_and_resends_are_harmless(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    gid = (await _group(gw, "ann"))["id"]
    history = (await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))).json()
    assert history["messages"] == [] and history["lastSeq"] == 0

    ws = await WsClient.open(gw, "ann")
    subscribed = await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    assert subscribed["action"] == "subscribed" and subscribed["group"]["id"] == gid
    chat = {
        "type": "yeaft_session_chat",
        "groupId": gid,
        "text": "@linus hi",
        "clientMessageId": "m1",
    }
    ack = await ws.request(chat)
    assert ack["type"] == "ack" and ack["clientMessageId"] == "m1" and ack["groupId"] == gid
    store = await gw.store()
    # Stored by the time the ack arrived.
    stored = await store.get_message(gid, ack["messageId"])
    assert stored is not None and stored.text == "@linus hi" and stored.author == "ann"
    again = await ws.request({**chat, "type": "unify_group_chat"})
    assert again["messageId"] == ack["messageId"] and again["duplicate"] is True

    result = await ws.recv_until(
        lambda f: f.get("type") == "yeaft_output" and f["data"]["type"] == "result"
    )
    assert result["vpId"] == "linus" and result["seq"] > 0
    assert await gw.runtime.send(WaitIdle(gid))
    head = (await store.read_events(gid, 0, limit=1000)).last_seq
    await ws.until_seq(head)
    assert [e["seq"] for e in ws.envelopes()] == list(range(1, head + 1))
    log = await store.read_messages(gid)
    assert [(m.author, m.meta.get("clientMessageId")) for m in log] == [
        ("ann", "m1"),
        ("linus", None),
    ]
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))).json()
    assert [m["author"] for m in page["messages"]] == ["ann", "linus"]
    assert page["lastSeq"] >= result["seq"]
    older = await gw.http.get(
        f"/api/groups/{gid}/messages?before={log[1].id}&limit=5", headers=gw.auth("ann")
    )
    assert [m["id"] for m in older.json()["messages"]] == [log[0].id]

    metrics = (await gw.http.get("/metrics")).text
    assert "yeaft_ws_connections 1.0" in metrics
    assert 'yeaft_turns_total{subtype="success"} 1.0' in metrics
    assert "yeaft_turn_duration_seconds_count 1.0" in metrics
    sent = [line for line in metrics.splitlines() if line.startswith("yeaft_envelopes_sent_total")]
    assert sent and float(sent[0].split()[1]) == len(ws.envelopes())
    await ws.send("{oops")
    assert (await ws.next())["code"] == "bad_json"
    metrics = (await gw.http.get("/metrics")).text
    assert 'yeaft_error_frames_total{code="bad_json"} 1.0' in metrics
    await ws.close()


async def test_group_management_over_the_websocket(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    ws = await WsClient.open(gw, "ann")
    created = await ws.request(
        {
            "type": "create_group",
            "name": "ws team",
            "roster": ["steve"],
            "settings": {"maxChainDepth": 3},
            "requestId": "r1",
        }
    )
    assert created["action"] == "created" and created["requestId"] == "r1"
    gid = created["group"]["id"]
    assert created["group"]["members"] == ["ann"]
    assert created["group"]["settings"]["maxChainDepth"] == 3
    steps: list[tuple[dict[str, Any], str]] = [
        ({"type": "rename_group", "groupId": gid, "name": "renamed"}, "renamed"),
        ({"type": "add_vp", "groupId": gid, "vpId": "linus"}, "roster"),
        ({"type": "remove_vp", "groupId": gid, "vpId": "steve"}, "roster"),
        ({"type": "set_default_vp", "groupId": gid, "vpId": None}, "default_vp"),
    ]
    for frame, action in steps:
        reply = await ws.request(frame)
        assert reply["type"] == "group_update" and reply["action"] == action, reply
    assert reply["group"]["name"] == "renamed" and reply["group"]["roster"] == ["linus"]
    bad = await ws.request(
        {"type": "create_group", "name": "x", "roster": ["nobody"], "requestId": "r2"}
    )
    assert bad["code"] == "invalid_frame" and bad["requestId"] == "r2"
    assert bad["detail"] == {"reason": "unknown_vp"}
    too_wide = await ws.request(
        {
            "type": "create_group",
            "name": "x",
            "roster": [],
            "settings": {"fanoutCap": 99},
            "requestId": "r3",
        }
    )
    assert too_wide["code"] == "invalid_frame" and too_wide["requestId"] == "r3"
    assert too_wide["field"] == "settings.fanoutCap"
    listed = await ws.request({"type": "list_groups"})
    assert [g["id"] for g in listed["groups"]] == [gid]

    # A member who is removed loses the live subscription at once.
    await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    bob = await WsClient.open(gw, "bob")
    # Bob's connection may first be told he was added (``group_update added``,
    # sent whenever the gateway reads the invitation from the directory log).
    await bob.send({"type": "subscribe", "groupId": gid})
    subscribed = await bob.recv_until(lambda f: f.get("action") == "subscribed")
    assert subscribed["type"] == "group_update" and subscribed["group"]["id"] == gid
    assert (await ws.request({"type": "subscribe", "groupId": gid}))["action"] == "subscribed"
    await gw.http.delete(f"/api/groups/{gid}/members/bob", headers=gw.auth("ann"))
    revoked = await bob.recv_until(lambda f: f["type"] == "removed")
    assert revoked["groupId"] == gid and revoked["reason"] == "removed"
    assert gid not in _subscriptions(gw, "bob")

    deleted = await ws.request({"type": "delete_group", "groupId": gid})
    assert deleted["action"] == "deleted" and deleted["group"] == {"id": gid}
    assert gid not in gw.ctx.hub.tails
    await bob.close()
    await ws.close()


def _subscriptions(gw: Gateway, username: str) -> set[str]:
    tails = gw.ctx.hub.tails.values()
    return {t.group_id for t in tails for s in t.subscriptions if s.sink.username == username}


def steve_asks_linus_rambles(request: ModelRequest) -> Reply:
    """steve asks the user a question; linus talks for long enough to be cancelled."""
    if request.context.speaker_id == "steve":
        return ask_then_answer(request)
    return Reply("and so on " * 100)


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_questions_are_answered_and_turns_cancelled_over_the_websocket(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(steve_asks_linus_rambles)},
        engine={"model": "offline:default?tps=50"},
    )
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = (await _group(gw, "ann"))["id"]
    ws = await WsClient.open(gw, "ann")
    # Watching linus only: the question (from steve) still comes through.
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0, "vpIds": ["linus"]})
    await ws.request({"type": "yeaft_session_chat", "groupId": gid, "text": "@steve @linus go"})
    question = await ws.recv_until(lambda f: f.get("type") == "ask_user_question")
    assert question["vpId"] == "steve" and question["prompt"] == "which colour?"
    await ws.recv_until(lambda f: f.get("vpId") == "linus" and f["type"] == "yeaft_output")
    await ws.send({"type": "cancel_execution", "groupId": gid, "vpId": "linus"})
    cancelled = await ws.recv_until(lambda f: _is_result(f) and f["vpId"] == "linus")
    assert cancelled["data"]["stop_reason"] == "aborted"

    answer = {"type": "ask_user_answer", "groupId": gid, "requestId": question["requestId"]}
    assert not any(_is_result(f) and f["vpId"] == "steve" for f in ws.received)
    await ws.send({**answer, "answer": ["red"]})
    await ws.recv_until(lambda f: _is_result(f) and f["vpId"] == "steve")
    again = await ws.request({**answer, "answer": "blue"})  # already answered
    assert again["code"] == "not_found" and again["field"] == "requestId"
    assert await runtime.send(WaitIdle(gid))
    log = await (await gw.store()).read_messages(gid)
    assert [m.text for m in log if m.author == "steve"] == ["you said: red"]
    await ws.close()


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


@pytest.mark.own_processes  # it watches processes start
async def test_opening_a_group_starts_its_vps(start_gateway: StartGateway) -> None:
    """A group made before this process started (no actor of its roster runs yet):
    the first client that subscribes starts them, ahead of its first message."""
    gw = await start_gateway()
    await gw.user("ann")
    group = Group(id=new_id("grp"), name="old", roster=["dieter", "kent"], members=["ann"])
    await (await gw.store()).create_group(group)
    config = gw.runtime.config
    names = await host_names(config, await gw.store(), group.roster)

    def running() -> list[str]:
        found = []
        for name in names:
            try:
                ray.get_actor(name, namespace=config.namespace)
            except ValueError:
                continue
            found.append(name)
        return found

    assert running() == []
    ws = await WsClient.open(gw, "ann")
    assert (await ws.request({"type": "subscribe", "groupId": group.id}))["action"] == "subscribed"
    # Polling: nothing tells a client that an actor was created.
    async with asyncio.timeout(30):
        while running() != names:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    await ws.close()
