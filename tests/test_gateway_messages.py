"""Search, export, deletion, regenerate, read marks and usage over HTTP and the
WebSocket, on real Ray and both stores (``messages_api``)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from coordinator.commands import WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result


def tells_if_it_saw_the_secret(request: ModelRequest) -> Reply:
    """Says whether the word "swordfish" is anywhere in what the model was given."""
    seen = any("swordfish" in (m.content or "") for m in request.messages)
    return Reply("I saw the secret" if seen else "nothing secret here")


async def _group(gw: Gateway, user: str, name: str = "team", **body: Any) -> str:
    reply = await gw.http.post(
        "/api/groups",
        json={"name": name, "roster": ["steve", "linus"], **body},
        headers=gw.auth(user),
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


async def _join(gw: Gateway, owner: str, gid: str, user: str) -> None:
    reply = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": user}, headers=gw.auth(owner)
    )
    assert reply.status_code == 200, reply.text


async def _ask(ws: WsClient, gw: Gateway, gid: str, text: str, cmid: str) -> str:
    """Send a chat message, wait until every turn it started is over; its message id."""
    ack = await ws.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": text, "clientMessageId": cmid}
    )
    assert ack["type"] == "ack", ack
    assert await gw.runtime.send(WaitIdle(gid))
    return str(ack["messageId"])


def _result(frame: dict[str, Any], turn_id: str | None = None) -> bool:
    is_result = frame.get("type") == "yeaft_output" and frame["data"]["type"] == "result"
    return is_result and (turn_id is None or frame["turnId"] == turn_id)


async def test_search_and_export_see_only_the_users_groups(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    gid = await _group(gw, "ann", name="Cache design")
    bob_gid = await _group(gw, "bob", name="bob alone")
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    asked = await _ask(ws, gw, gid, "@linus how should we cache **sessions**?", "m1")
    bob_ws = await WsClient.open(gw, "bob")
    await _ask(bob_ws, gw, bob_gid, "@steve cache sessions secretly", "b1")

    found = (await gw.http.get("/api/search", params={"q": "CACH sess"}, headers=ann)).json()
    # The offline model's reply may echo the words; bob's group never shows.
    assert {h["groupId"] for h in found["hits"]} == {gid}
    hit = next(h for h in found["hits"] if h["messageId"] == asked)
    assert hit["groupName"] == "Cache design" and hit["author"] == "ann"
    assert hit["threadId"] is None  # on the main timeline
    assert "cache" in hit["snippet"]
    bob_found = (await gw.http.get("/api/search", params={"q": "secretly"}, headers=ann)).json()
    assert bob_found["hits"] == []
    assert (await gw.http.get("/api/search", headers=ann)).status_code == 422
    async with httpx.AsyncClient(base_url=gw.base_url) as anonymous:
        assert (await anonymous.get("/api/search", params={"q": "x"})).status_code == 401

    md = await gw.http.get(f"/api/groups/{gid}/export", headers=ann)
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert 'filename="Cache-design.md"' in md.headers["content-disposition"]
    assert md.text.startswith("# Cache design\n")
    assert "@linus how should we cache **sessions**?" in md.text
    assert "### @linus · " in md.text and " out)" in md.text

    exported = await gw.http.get(f"/api/groups/{gid}/export?format=json", headers=ann)
    assert exported.status_code == 200
    document = json.loads(exported.text)
    assert document["group"]["id"] == gid and document["format"] == "yeaft-group-export"
    authors = [m["author"] for m in document["messages"]]
    assert authors == ["ann", "linus"]
    reply = document["messages"][1]
    assert reply["meta"]["usage"]["output_tokens"] > 0 and "costUsd" in reply["meta"]
    assert document["usage"]["turns"] == 1
    assert document["usage"]["outputTokens"] == reply["meta"]["usage"]["output_tokens"]

    # Members only: bob gets the same 404 as for a group that does not exist.
    for path in (f"/api/groups/{gid}/export", f"/api/groups/{gid}/export?format=json"):
        refused = await gw.http.get(path, headers=bob)
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert (
        await gw.http.get(f"/api/groups/{gid}/export?format=xml", headers=ann)
    ).status_code == 422

    usage = (await gw.http.get(f"/api/groups/{gid}/usage", headers=ann)).json()
    assert usage["turns"] == 1 and usage["outputTokens"] > 0
    # Today's spend against the group's budget (no limit set: 0).
    today = usage["today"]
    assert today["tokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert today["reservedTokens"] == 0 and today["maxTokens"] == 0
    assert (await gw.http.get(f"/api/groups/{gid}/usage", headers=bob)).status_code == 404
    limits = (await gw.http.get("/api/limits", headers=ann)).json()
    assert limits["frameMaxBytes"] == gw.settings.frame_max_bytes
    await ws.close()
    await bob_ws.close()


async def test_only_the_author_deletes_and_every_client_hears_it(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    provider = ScriptedModel(tells_if_it_saw_the_secret)
    gw = await start_gateway(make_runtime(provider_overrides={"offline": provider}))
    await gw.user("ann")
    await gw.user("bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    gid = await _group(gw, "ann", defaultVpId="linus", settings={"broadcastWhenUnmentioned": False})
    await _join(gw, "ann", gid, "bob")
    ws_ann = await WsClient.open(gw, "ann")
    ws_bob = await WsClient.open(gw, "bob")
    await ws_ann.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await ws_bob.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    mid = await _ask(ws_ann, gw, gid, "@linus the launch code is swordfish", "m1")
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=ann)).json()
    reply_id = next(m["id"] for m in page["messages"] if m["author"] == "linus")

    assert (
        await gw.http.delete(f"/api/groups/{gid}/messages/{mid}", headers=bob)
    ).status_code == 403
    vp_reply = await gw.http.delete(f"/api/groups/{gid}/messages/{reply_id}", headers=ann)
    assert vp_reply.status_code == 403
    missing = await gw.http.delete(f"/api/groups/{gid}/messages/msg_nope", headers=ann)
    assert missing.status_code == 404

    gone = await gw.http.delete(f"/api/groups/{gid}/messages/{mid}", headers=ann)
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    for ws in (ws_ann, ws_bob):
        frame = await ws.recv_until(lambda f: f.get("type") == "message_changed")
        assert frame["messageId"] == mid and frame["change"] == "deleted" and frame["by"] == "ann"
        assert frame["seq"] > 0
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=bob)).json()
    tomb = next(m for m in page["messages"] if m["id"] == mid)
    assert tomb["text"] == "" and tomb["meta"]["deleted"] is True
    # (The offline model's reply may echo the words: it is not what was deleted.)
    found = (await gw.http.get("/api/search", params={"q": "swordfish"}, headers=ann)).json()
    assert mid not in [h["messageId"] for h in found["hits"]]
    exported = (await gw.http.get(f"/api/groups/{gid}/export?format=json", headers=ann)).json()
    assert mid not in [m["id"] for m in exported["messages"]]
    markdown = (await gw.http.get(f"/api/groups/{gid}/export", headers=ann)).text
    assert "### ann · " not in markdown
    # Linus saw it when it was asked; in his next turn it is gone from his context.
    await _ask(ws_ann, gw, gid, "@linus anything secret so far?", "m2")
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=ann)).json()
    replies = [m["text"] for m in page["messages"] if m["author"] == "linus"]
    assert replies == ["I saw the secret", "nothing secret here"]
    # A client that reconnects from before the deletion learns it from the log too.
    late = await WsClient.open(gw, "bob")
    await late.send({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    frame = await late.recv_until(lambda f: f.get("type") == "message_changed")
    assert frame["messageId"] == mid
    for ws in (ws_ann, ws_bob, late):
        await ws.close()


async def test_regenerate_runs_a_new_turn_and_supersedes_the_old_reply(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("eve")
    ann = gw.auth("ann")
    gid = await _group(gw, "ann")
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    asked = await _ask(ws, gw, gid, "@linus review this plan", "m1")
    first = await ws.recv_until(_result)
    old_id = first["data"]["message_id"]

    path = f"/api/groups/{gid}/messages/{old_id}/regenerate"
    assert (await gw.http.post(path, headers=gw.auth("eve"))).status_code == 404
    started = await gw.http.post(path, headers=ann)
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["vpId"] == "linus" and body["triggerId"] == asked
    assert body["turnId"] != first["turnId"]
    changed = await ws.recv_until(lambda f: f.get("type") == "message_changed")
    assert changed["change"] == "superseded" and changed["messageId"] == old_id
    assert changed["turnId"] == body["turnId"]
    status = await ws.recv_until(
        lambda f: f.get("type") == "agent_status" and f.get("turnId") == body["turnId"]
    )
    assert status["triggerId"] == asked
    second = await ws.recv_until(lambda f: _result(f, body["turnId"]))
    new_id = second["data"]["message_id"]
    assert new_id and new_id != old_id
    assert await gw.runtime.send(WaitIdle(gid))

    store = await gw.store()
    old = await store.get_message(gid, old_id)
    new = await store.get_message(gid, new_id)
    assert old is not None and old.meta["supersededBy"] == body["turnId"]
    assert new is not None and new.meta["regenerates"] == old_id
    assert new.meta["causedBy"] == [asked] and new.author == "linus"
    # Only the latest reply of a VP can be regenerated; a person's message never.
    again = await gw.http.post(path, headers=ann)
    assert again.status_code == 409 and "latest" in again.json()["error"]["message"]
    person = await gw.http.post(f"/api/groups/{gid}/messages/{asked}/regenerate", headers=ann)
    assert person.status_code == 404
    usage = (await gw.http.get(f"/api/groups/{gid}/usage", headers=ann)).json()
    assert usage["turns"] == 2
    await ws.close()


async def test_unread_counts_follow_the_server_side_read_mark(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    gid = await _group(gw, "ann")
    quiet = await _group(gw, "ann", name="quiet")
    await _join(gw, "ann", gid, "bob")
    ws_bob = await WsClient.open(gw, "bob")
    mid = await _ask(ws_bob, gw, gid, "@linus hello from bob", "b1")

    inbox = (await gw.http.get("/api/inbox", headers=ann)).json()["groups"]
    by_id = {g["groupId"]: g for g in inbox}
    assert set(by_id) == {gid, quiet}
    assert by_id[gid]["unread"] == 2  # bob's message and linus's reply
    assert by_id[gid]["lastMessage"]["author"] == "linus"
    assert by_id[quiet] == {"groupId": quiet, "unread": 0, "mentions": 0, "lastMessage": None}
    # Bob wrote one of the two himself: only linus's reply is unread for him.
    assert (await gw.http.get("/api/inbox", headers=bob)).json()["groups"][0]["unread"] == 1

    read = await gw.http.post(f"/api/groups/{gid}/read", json={"messageId": mid}, headers=ann)
    assert read.status_code == 200 and read.json()["unread"] == 1
    last = by_id[gid]["lastMessage"]["messageId"]
    read = await gw.http.post(f"/api/groups/{gid}/read", json={"messageId": last}, headers=ann)
    assert read.json()["unread"] == 0
    # Another device of ann's sees the same count.
    assert (await gw.http.get("/api/inbox", headers=ann)).json()["groups"][0]["unread"] == 0
    bad = await gw.http.post(f"/api/groups/{gid}/read", json={"messageId": "msg_x"}, headers=ann)
    assert bad.status_code == 404
    foreign = await gw.http.post(f"/api/groups/{quiet}/read", json={"messageId": mid}, headers=bob)
    assert foreign.status_code == 404
    await ws_bob.close()


def asks_when_told(request: ModelRequest) -> Reply:
    """Asks the person a question (holding its turn open) when told to ask; else answers."""
    said = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    if "please ask" in said and not last_is_tool_result(request):
        return Reply(tool_calls=[("ask_user", {"question": "which colour?", "choices": ["red"]})])
    return Reply("a plain answer")


async def _answered_then_asking(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> tuple[Gateway, str, WsClient, dict[str, Any], dict[str, Any]]:
    """Ann's group where Linus answered "hello" and then waits on a question (its turn open).

    Returns the gateway, the group, Ann's subscribed socket, the first
    answer's result and the question.
    """
    gw = await start_gateway(
        make_runtime(provider_overrides={"offline": ScriptedModel(asks_when_told)})
    )
    await gw.user("ann")
    gid = await _group(gw, "ann")
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await _ask(ws, gw, gid, "@linus hello", "m1")
    first = await ws.recv_until(_result)
    await ws.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus please ask",
            "clientMessageId": "m2",
        }
    )
    question = await ws.recv_until(lambda f: f.get("type") == "ask_user_question")
    return gw, gid, ws, first, question


async def test_regenerate_waits_until_the_vp_is_not_answering(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw, gid, ws, first, question = await _answered_then_asking(start_gateway, make_runtime)
    ann = gw.auth("ann")
    old_id = first["data"]["message_id"]
    path = f"/api/groups/{gid}/messages/{old_id}/regenerate"
    busy = await gw.http.post(path, headers=ann)
    assert busy.status_code == 409 and "still answering" in busy.json()["error"]["message"]
    await ws.send(
        {
            "type": "ask_user_answer",
            "groupId": gid,
            "requestId": question["requestId"],
            "answer": "red",
        }
    )
    assert await gw.runtime.send(WaitIdle(gid))
    # Now the newest reply is the one that answered the question; the old one is not.
    assert (await gw.http.post(path, headers=ann)).status_code == 409
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=ann)).json()
    newest = [m for m in page["messages"] if m["author"] == "linus"][-1]
    again = f"/api/groups/{gid}/messages/{newest['id']}/regenerate"
    started = await gw.http.post(again, headers=ann)
    assert started.status_code == 202, started.text
    turn_id = started.json()["turnId"]
    # Rewound to before "please ask", Linus asks again rather than carrying on.
    asked_again = await ws.recv_until(
        lambda f: f.get("type") == "ask_user_question" and f.get("turnId") == turn_id
    )
    await ws.send(
        {
            "type": "ask_user_answer",
            "groupId": gid,
            "requestId": asked_again["requestId"],
            "answer": "red",
        }
    )
    await ws.recv_until(lambda f: _result(f, turn_id))
    await ws.close()


async def test_regenerate_after_stop_all_answers_again(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    """Stop all ends what runs; a person's Regenerate afterwards is a new ask, not refused."""
    gw, gid, ws, _, _ = await _answered_then_asking(start_gateway, make_runtime)
    ann = gw.auth("ann")
    # Linus's second turn waits on a question; Stop all (the group's cancel) ends it.
    await ws.send({"type": "cancel_execution", "groupId": gid})
    stopped = await ws.recv_until(_result)
    assert stopped["data"]["subtype"] != "success", stopped
    assert await gw.runtime.send(WaitIdle(gid))
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=ann)).json()
    newest = [m for m in page["messages"] if m["author"] == "linus"][-1]
    started = await gw.http.post(
        f"/api/groups/{gid}/messages/{newest['id']}/regenerate", headers=ann
    )
    assert started.status_code == 202, started.text
    again = await ws.recv_until(lambda f: _result(f, started.json()["turnId"]))
    assert again["data"]["subtype"] == "success", again
    await ws.close()
