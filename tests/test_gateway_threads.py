"""Threads through the gateway, on real Ray and both stores (``gateway.threads``).

ann asks linus on the main timeline, then bob asks him a side question in a
thread under ann's message. The scripted model says which marked words it
was given, so the test reads what each turn saw: in the thread, the root
and the thread, not the main timeline's later chatter; on the main
timeline, never the thread. Every frame of the thread's turn carries its
``threadId``; the thread reads back over the WebSocket and HTTP, a page of
history sums it up under its root, and exports keep it. Bad input gets a
typed refusal and stores nothing.
"""

from __future__ import annotations

from typing import Any

from coordinator.commands import WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from protocol.common import MAX_TEXT_LENGTH
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime

MARKS = ("ROOT", "LATER", "SIDE", "MAINQ", "FOLLOW")


def tells_what_it_saw(request: ModelRequest) -> Reply:
    """Names each marked word in what others said to the model, and counts its own replies."""
    given = " ".join(m.content or "" for m in request.messages if m.role == "user")
    own = [m for m in request.messages if m.role == "assistant" and m.content]
    after = f" after {len(own)}" if own else ""
    return Reply("saw " + " ".join(w for w in MARKS if w in given) + after)


async def _crew(gw: Gateway) -> str:
    made = await gw.http.post(
        "/api/groups",
        json={
            "name": "crew",
            "roster": ["linus", "steve"],
            "settings": {"broadcastWhenUnmentioned": False},
        },
        headers=gw.auth("ann"),
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    added = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    assert added.status_code == 200, added.text
    return gid


async def _say(ws: WsClient, gw: Gateway, gid: str, text: str, cmid: str, **extra: Any) -> str:
    ack = await ws.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": text, "clientMessageId": cmid}
        | extra
    )
    assert ack["type"] == "ack", ack
    assert await gw.runtime.send(WaitIdle(gid))
    return str(ack["messageId"])


async def _page(gw: Gateway, gid: str, user: str = "ann") -> list[dict[str, Any]]:
    page = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth(user))
    assert page.status_code == 200, page.text
    return list(page.json()["messages"])


def _texts(messages: list[dict[str, Any]], author: str) -> list[str]:
    return [m["text"] for m in messages if m["author"] == author]


async def test_a_thread_keeps_its_replies_and_its_vps_context_apart(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    provider = ScriptedModel(tells_what_it_saw)
    gw = await start_gateway(make_runtime(provider_overrides={"offline": provider}))
    for name in ("ann", "bob", "cat"):
        await gw.user(name)
    gid = await _crew(gw)
    ann = await WsClient.open(gw, "ann")
    bob = await WsClient.open(gw, "bob")
    for ws in (ann, bob):
        await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})

    root = await _say(ann, gw, gid, "@linus ROOT which cache?", "m1")
    await _say(ann, gw, gid, "@steve LATER chatter", "m2")
    # bob asks linus in a thread under ann's message.
    side = await _say(bob, gw, gid, "@linus SIDE is LRU enough?", "t1", threadId=root)
    said = await ann.seen(lambda f: f.get("type") == "group_message" and f["messageId"] == side)
    assert said["threadId"] == root and said["author"] == "bob"
    result = await ann.seen(
        lambda f: (
            f.get("type") == "yeaft_output"
            and f["data"].get("type") == "result"
            and f.get("seq", 0) > said["seq"]
        )
    )
    assert result["vpId"] == "linus" and result["threadId"] == root
    turn = [f for f in ann.received if f.get("turnId") == result["turnId"]]
    # Every frame of the thread's turn says so: a client puts them all in the thread.
    assert {f["type"] for f in turn} >= {"yeaft_output", "agent_status"}
    assert all(f.get("threadId") == root for f in turn), turn
    answer = result["data"]["message_id"]

    # In the thread linus saw the root and the side question, not the later chatter.
    opened = await bob.request(
        {"type": "thread_open", "groupId": gid, "threadId": root, "requestId": "o1"}
    )
    assert opened["type"] == "thread_messages" and opened["requestId"] == "o1"
    assert opened["root"]["id"] == root and opened["lastSeq"] > 0
    assert [(m["author"], m["text"]) for m in opened["messages"]] == [
        ("bob", "@linus SIDE is LRU enough?"),
        ("linus", "saw ROOT SIDE"),
    ]
    assert opened["messages"][1]["id"] == answer
    assert opened["messages"][1]["meta"]["threadId"] == root
    assert opened["summary"]["count"] == 2 and opened["summary"]["participants"] == ["bob", "linus"]

    # The main timeline's next turn never sees the thread.
    await _say(ann, gw, gid, "@linus MAINQ and now?", "m3")
    page = await _page(gw, gid, "bob")
    main = [m for m in page if "threadId" not in m["meta"]]
    assert _texts(main, "linus") == ["saw ROOT", "saw ROOT LATER MAINQ after 1"]
    assert _texts(main, "steve") == ["saw ROOT LATER"]
    summary = next(m for m in page if m["id"] == root)["thread"]
    assert summary["count"] == 2 and summary["lastId"] == answer
    assert summary["participants"] == ["bob", "linus"]
    assert all("thread" not in m for m in page if m["id"] != root)
    # The history is the main timeline: a thread's replies are read with the thread.
    assert all("threadId" not in m["meta"] for m in page)
    everything = await gw.http.get(
        f"/api/groups/{gid}/messages?includeThreads=true", headers=gw.auth("bob")
    )
    assert [m["id"] for m in everything.json()["messages"] if m["meta"].get("threadId")] == [
        side,
        answer,
    ]
    # A page of two skips the thread's replies between them, and says more are older.
    small = await gw.http.get(f"/api/groups/{gid}/messages?limit=2", headers=gw.auth("bob"))
    assert [m["id"] for m in small.json()["messages"]] == [m["id"] for m in page][-2:]
    assert small.json()["hasMore"] is True
    older = small.json()["messages"][0]["id"]
    rest = await gw.http.get(
        f"/api/groups/{gid}/messages?limit=50&before={older}", headers=gw.auth("bob")
    )
    ids = [m["id"] for m in rest.json()["messages"]] + [m["id"] for m in small.json()["messages"]]
    assert ids == [m["id"] for m in page] and rest.json()["hasMore"] is False

    # A second turn in the thread, asked over HTTP, sees its own earlier answer.
    posted = await gw.http.post(
        f"/api/groups/{gid}/threads/{root}/messages",
        json={"text": "@linus FOLLOW and then?", "clientMessageId": "t2"},
        headers=gw.auth("ann"),
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["threadId"] == root and not posted.json()["duplicate"]
    assert await gw.runtime.send(WaitIdle(gid))
    thread = await gw.http.get(f"/api/groups/{gid}/threads/{root}", headers=gw.auth("bob"))
    assert thread.status_code == 200, thread.text
    body = thread.json()
    assert [m["text"] for m in body["messages"]][2:] == [
        "@linus FOLLOW and then?",
        "saw ROOT SIDE FOLLOW after 1",
    ]
    assert body["summary"]["count"] == 4 and body["summary"]["participants"] == [
        "bob",
        "linus",
        "ann",
    ]

    # Exports keep the thread: marked in JSON, under its root in Markdown.
    exported = (
        await gw.http.get(f"/api/groups/{gid}/export?format=json", headers=gw.auth("ann"))
    ).json()
    by_id = {m["id"]: m for m in exported["messages"]}
    assert by_id[side]["threadId"] == root and by_id[root]["thread"]["count"] == 4
    markdown = (await gw.http.get(f"/api/groups/{gid}/export", headers=gw.auth("ann"))).text
    root_at = markdown.index("ROOT which cache?")
    thread_at = markdown.index("**Thread** (4 replies)")
    assert root_at < thread_at < markdown.index("#### bob") < markdown.index("LATER chatter")
    for ws in (ann, bob):
        await ws.close()


async def test_bad_thread_input_is_refused_and_stores_nothing(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    for name in ("ann", "bob", "cat"):
        await gw.user(name)
    gid = await _crew(gw)
    ann = await WsClient.open(gw, "ann")
    await ann.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    root = await _say(ann, gw, gid, "a root nobody answers", "m1")
    reply = await _say(ann, gw, gid, "a reply", "t1", threadId=root)
    doomed = await _say(ann, gw, gid, "soon deleted", "m2")
    deleted = await gw.http.delete(f"/api/groups/{gid}/messages/{doomed}", headers=gw.auth("ann"))
    assert deleted.status_code == 200
    other = await gw.http.post(
        "/api/groups", json={"name": "cat's", "roster": ["linus"]}, headers=gw.auth("cat")
    )
    cats = str(other.json()["id"])
    cat_root = await _say(await _subscribed(gw, "cat", cats), gw, cats, "cat's secret", "c1")
    before = await _page(gw, gid)

    def chat(thread: str, text: str = "hello", cmid: str = "bad") -> dict[str, Any]:
        return {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": text,
            "threadId": thread,
            "clientMessageId": cmid,
        }

    cases = [
        (chat(reply), "conflict", "threadId", "nested"),
        (chat(doomed), "conflict", "threadId", "root_deleted"),
        (chat("msg_nothing"), "not_found", "threadId", None),
        # A message of a group ann is not in is one she cannot see: not there.
        (chat(cat_root), "not_found", "threadId", None),
        (chat(root, "x" * (MAX_TEXT_LENGTH + 1)), "invalid_frame", "text", None),
    ]
    for frame, code, field, reason in cases:
        refused = await ann.request(frame)
        assert refused["type"] == "error" and refused["code"] == code, refused
        assert refused.get("field") == field, refused
        if reason is not None:
            assert refused["detail"]["reason"] == reason, refused
    opened = await ann.request({"type": "thread_open", "groupId": gid, "threadId": cat_root})
    assert opened["type"] == "error" and opened["code"] == "not_found"

    # The same over HTTP.
    for thread, status, code in (
        (reply, 409, "conflict"),
        (doomed, 409, "conflict"),
        ("msg_nothing", 404, "not_found"),
        (cat_root, 404, "not_found"),
    ):
        posted = await gw.http.post(
            f"/api/groups/{gid}/threads/{thread}/messages",
            json={"text": "hello"},
            headers=gw.auth("ann"),
        )
        assert posted.status_code == status and posted.json()["error"]["code"] == code
    too_long = await gw.http.post(
        f"/api/groups/{gid}/threads/{root}/messages",
        json={"text": "x" * (MAX_TEXT_LENGTH + 1)},
        headers=gw.auth("ann"),
    )
    assert too_long.status_code == 422, too_long.text
    outsider = await gw.http.get(f"/api/groups/{gid}/threads/{root}", headers=gw.auth("cat"))
    assert outsider.status_code == 404
    nested = await gw.http.get(f"/api/groups/{gid}/threads/{reply}", headers=gw.auth("ann"))
    assert nested.status_code == 404
    # Nothing was stored.
    assert await _page(gw, gid) == before
    thread = (await gw.http.get(f"/api/groups/{gid}/threads/{root}", headers=gw.auth("ann"))).json()
    # The reply, and the default VP's answer to it, in the thread; nothing else.
    assert [m["author"] for m in thread["messages"]] == ["ann", "linus"]
    assert thread["messages"][0]["id"] == reply and thread["summary"]["count"] == 2
    await ann.close()


async def _subscribed(gw: Gateway, user: str, gid: str) -> WsClient:
    ws = await WsClient.open(gw, user)
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    return ws
