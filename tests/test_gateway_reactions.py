"""Reactions and pins through the gateway, on real Ray and both stores.

Two gateway apps on one store stand for two gateway processes (nothing
shared but the store): ann reacts and pins on the first over the
WebSocket, bob sees it live on the second, and the other way round; a
page of history and the pinned list show the same after the fact. The
HTTP routes do the same, and every bad input gets a typed refusal that
changes nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.auth import issue_token
from store.base import GroupMessage
from tests.fixtures.gateway import Gateway, StartGateway, WsClient


async def _group(gw: Gateway, owner: str, *members: str) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": "crew", "roster": ["linus"]}, headers=gw.auth(owner)
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    for member in members:
        added = await gw.http.post(
            f"/api/groups/{gid}/members", json={"username": member}, headers=gw.auth(owner)
        )
        assert added.status_code == 200, added.text
    return gid


async def _said(gw: Gateway, gid: str, author: str, role: str, text: str) -> str:
    """A message stored in the group's log, as a person's chat or a VP's reply stores it."""
    store = await gw.store()
    message, _ = await store.append_message(gid, GroupMessage(author=author, role=role, text=text))
    return message.id


async def _watch(gw: Gateway, user: str, gid: str) -> WsClient:
    client = await WsClient.open(gw, user)
    reply = await client.request({"type": "subscribe", "groupId": gid})
    assert reply["action"] == "subscribed", reply
    return client


def _event(kind: str, **fields: Any) -> Any:
    return lambda f: (
        f["type"] == kind and "seq" in f and all(f.get(k) == v for k, v in fields.items())
    )


async def test_reactions_and_pins_reach_every_member_on_both_gateways(
    start_gateway: StartGateway,
) -> None:
    first = await start_gateway()
    second = await start_gateway(first.runtime)
    for name in ("ann", "bob", "cat"):
        await first.user(name)
    second.tokens = {name: issue_token(second.settings, name) for name in ("ann", "bob")}
    gid = await _group(first, "ann", "bob")
    question = await _said(first, gid, "ann", "user", "which cache?")
    reply = await _said(first, gid, "linus", "assistant", "an LRU one")
    ann = await _watch(first, "ann", gid)
    bob = await _watch(second, "bob", gid)

    # ann reacts to linus's reply on the first gateway; bob on the second sees it.
    answer = await ann.request(
        {
            "type": "message_react",
            "groupId": gid,
            "messageId": reply,
            "emoji": "👍",
            "requestId": "r1",
        }
    )
    assert answer["type"] == "message_reactions" and answer["requestId"] == "r1"
    assert answer["reactions"] == [{"emoji": "👍", "users": ["ann"]}] and answer["on"] is True
    live = await bob.seen(_event("message_reactions", messageId=reply))
    assert live["reactions"] == [{"emoji": "👍", "users": ["ann"]}]
    assert live["by"] == "ann" and live["emoji"] == "👍" and "requestId" not in live

    # bob adds his to the same emoji and another on ann's question; ann sees both.
    await bob.request({"type": "message_react", "groupId": gid, "messageId": reply, "emoji": "👍"})
    await bob.request(
        {"type": "message_react", "groupId": gid, "messageId": question, "emoji": "🤔"}
    )
    both = await ann.seen(_event("message_reactions", messageId=reply, by="bob"))
    assert both["reactions"] == [{"emoji": "👍", "users": ["ann", "bob"]}]
    await ann.seen(_event("message_reactions", messageId=question, by="bob"))
    # ann's toggle takes only hers off.
    off = await ann.request(
        {"type": "message_react", "groupId": gid, "messageId": reply, "emoji": "👍"}
    )
    assert off["on"] is False and off["reactions"] == [{"emoji": "👍", "users": ["bob"]}]
    await bob.seen(_event("message_reactions", messageId=reply, by="ann", on=False))

    # bob pins the reply on the second gateway; ann sees the group's pinned list.
    pinned = await bob.request(
        {"type": "message_pin", "groupId": gid, "messageId": reply, "pinned": True}
    )
    assert [p["messageId"] for p in pinned["pins"]] == [reply]
    seen = await ann.seen(_event("message_pins", messageId=reply, pinned=True))
    assert seen["pins"][0]["by"] == "bob"

    # After the fact: the history page carries the reactions, the pinned list the pin.
    page = await second.http.get(f"/api/groups/{gid}/messages", headers=second.auth("ann"))
    views = {m["id"]: m["reactions"] for m in page.json()["messages"]}
    assert views[question] == [{"emoji": "🤔", "users": ["bob"]}]
    assert views[reply] == [{"emoji": "👍", "users": ["bob"]}]
    # The others (the notice that bob joined) have none.
    assert {str(r) for k, r in views.items() if k not in (question, reply)} == {"[]"}
    pins = (await first.http.get(f"/api/groups/{gid}/pins", headers=first.auth("bob"))).json()
    assert [(p["messageId"], p["by"], p["author"], p["text"]) for p in pins["pins"]] == [
        (reply, "bob", "linus", "an LRU one")
    ]

    # Refusals are typed and change nothing.
    head = await (await first.store()).head(gid)
    unknown = await ann.request(
        {"type": "message_react", "groupId": gid, "messageId": "msg_nope", "emoji": "👍"}
    )
    assert unknown["code"] == "not_found" and unknown["field"] == "messageId"
    bad = await ann.request(
        {"type": "message_react", "groupId": gid, "messageId": reply, "emoji": "lol"}
    )
    assert bad["code"] == "invalid_frame" and bad["field"] == "emoji"
    cat = await WsClient.open(first, "cat")
    stranger = await cat.request(
        {"type": "message_pin", "groupId": gid, "messageId": reply, "pinned": True}
    )
    assert stranger["code"] == "not_found"
    assert await (await first.store()).head(gid) == head
    for client in (ann, bob, cat):
        await client.close()


async def test_reactions_and_pins_over_http(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    for name in ("ann", "bob", "cat"):
        await gw.user(name)
    gid = await _group(gw, "ann", "bob")
    msg = await _said(gw, gid, "bob", "user", "ship it?")
    base = f"/api/groups/{gid}/messages/{msg}/reactions"

    added = await gw.http.post(base, json={"emoji": "🚀"}, headers=gw.auth("ann"))
    assert added.status_code == 200, added.text
    assert added.json()["reactions"] == [{"emoji": "🚀", "users": ["ann"]}]
    kept = await gw.http.post(base, json={"emoji": "🚀", "on": True}, headers=gw.auth("ann"))
    assert kept.json()["on"] is True and kept.json()["reactions"][0]["users"] == ["ann"]
    await gw.http.post(base, json={"emoji": "🚀"}, headers=gw.auth("bob"))
    removed = await gw.http.delete(f"{base}/{quote('🚀')}", headers=gw.auth("ann"))
    assert removed.status_code == 200 and removed.json()["on"] is False
    listed = await gw.http.get(base, headers=gw.auth("bob"))
    assert listed.json()["reactions"] == [{"emoji": "🚀", "users": ["bob"]}]

    pinned = await gw.http.put(f"/api/groups/{gid}/pins/{msg}", headers=gw.auth("bob"))
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    again = await gw.http.put(f"/api/groups/{gid}/pins/{msg}", headers=gw.auth("ann"))
    assert [p["by"] for p in again.json()["pins"]] == ["bob"]
    pins = await gw.http.get(f"/api/groups/{gid}/pins", headers=gw.auth("ann"))
    assert [p["messageId"] for p in pins.json()["pins"]] == [msg]
    # Both exports carry them.
    exported = (
        await gw.http.get(f"/api/groups/{gid}/export?format=json", headers=gw.auth("ann"))
    ).json()
    shipped = next(m for m in exported["messages"] if m["id"] == msg)
    assert shipped["reactions"] == [{"emoji": "🚀", "users": ["bob"]}]
    assert [(p["messageId"], p["by"]) for p in exported["pins"]] == [(msg, "bob")]
    md = (await gw.http.get(f"/api/groups/{gid}/export", headers=gw.auth("ann"))).text
    assert "📌 pinned" in md and "Reactions: 🚀 bob" in md
    unpinned = await gw.http.delete(f"/api/groups/{gid}/pins/{msg}", headers=gw.auth("ann"))
    assert unpinned.json()["pins"] == []

    # Refusals: a bad emoji (body or path), an unknown message, a stranger, a deleted message.
    bad = await gw.http.post(base, json={"emoji": "<b>"}, headers=gw.auth("ann"))
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "emoji"
    bad_path = await gw.http.delete(f"{base}/ok", headers=gw.auth("ann"))
    assert bad_path.status_code == 422 and bad_path.json()["error"]["field"] == "emoji"
    unknown = await gw.http.post(
        f"/api/groups/{gid}/messages/msg_nope/reactions",
        json={"emoji": "👍"},
        headers=gw.auth("ann"),
    )
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "messageId"
    stranger = await gw.http.post(base, json={"emoji": "👍"}, headers=gw.auth("cat"))
    assert stranger.status_code == 404
    assert (await gw.http.get(f"/api/groups/{gid}/pins", headers=gw.auth("cat"))).status_code == 404
    gone = await gw.http.delete(f"/api/groups/{gid}/messages/{msg}", headers=gw.auth("bob"))
    assert gone.status_code == 200
    late = await gw.http.post(base, json={"emoji": "👍"}, headers=gw.auth("ann"))
    assert late.status_code == 404


async def test_past_the_limits_a_reaction_or_a_pin_is_a_conflict(
    start_gateway: StartGateway,
) -> None:
    from protocol.reactions import MAX_PINS, MAX_REACTION_KINDS

    gw = await start_gateway()
    await gw.user("ann")
    gid = await _group(gw, "ann")
    msg = await _said(gw, gid, "ann", "user", "vote")
    store = await gw.store()
    for i in range(MAX_REACTION_KINDS):
        await store.react(gid, msg, chr(0x1F600 + i), "ann", on=True, ts=1.0)
    over = await gw.http.post(
        f"/api/groups/{gid}/messages/{msg}/reactions",
        json={"emoji": "🦄"},
        headers=gw.auth("ann"),
    )
    assert over.status_code == 409
    assert over.json()["error"]["detail"] == {
        "reason": "too_many_reactions",
        "limit": MAX_REACTION_KINDS,
    }
    for i in range(MAX_PINS):
        await store.pin(gid, f"msg_{i}", "ann", pinned=True, ts=1.0)
    full = await gw.http.put(f"/api/groups/{gid}/pins/{msg}", headers=gw.auth("ann"))
    assert full.status_code == 409 and full.json()["error"]["detail"]["reason"] == "too_many_pins"
