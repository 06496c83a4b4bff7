"""A person's message is part of the live stream, over real WebSockets, on both stores.

Two people in one group, one of them with two connections and the other
with a second one filtered to a VP that is not addressed: every connection
gets the message as one ``group_message`` frame with its seq, before
anything of the turns that answer it, and a resent ``clientMessageId`` adds
no second frame.
"""

from __future__ import annotations

from typing import Any

from coordinator.commands import WaitIdle
from tests.fixtures.gateway import Gateway, StartGateway, WsClient


def _is_message(cmid: str) -> Any:
    return lambda f: f.get("type") == "group_message" and f.get("clientMessageId") == cmid


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


async def _shared_group(gw: Gateway) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": "pair", "roster": ["linus", "steve"]}, headers=gw.auth("ann")
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    joined = await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    assert joined.status_code == 200, joined.text
    return gid


async def _watch(gw: Gateway, user: str, gid: str, **extra: Any) -> WsClient:
    client = await WsClient.open(gw, user)
    reply = await client.request({"type": "subscribe", "groupId": gid, **extra})
    assert reply["action"] == "subscribed"
    return client


async def test_every_member_sees_a_message_live_once_and_before_its_replies(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    gid = await _shared_group(gw)
    sender = await _watch(gw, "ann", gid)
    other_tab = await _watch(gw, "ann", gid)
    bob = await _watch(gw, "bob", gid)
    bob_steve_only = await _watch(gw, "bob", gid, vpIds=["steve"])

    chat = {"type": "yeaft_session_chat", "groupId": gid, "text": "@linus ready?"}
    ack = await sender.request({**chat, "clientMessageId": "c-1"})
    assert ack["type"] == "ack" and not ack["duplicate"]

    said = await bob.seen(_is_message("c-1"))
    assert isinstance(said["seq"], int) and said["seq"] > 0
    assert (said["messageId"], said["groupId"], said["author"], said["role"]) == (
        ack["messageId"],
        gid,
        "ann",
        "user",
    )
    assert (said["text"], said["mentions"]) == ("@linus ready?", ["linus"])
    # The sender's own connections get it too, the same frame (same seq).
    for client in (sender, other_tab, bob_steve_only):
        assert (await client.seen(_is_message("c-1")))["seq"] == said["seq"]

    # Nothing of linus's answer comes before the message it answers.
    await bob.seen(lambda f: _is_result(f) and f["vpId"] == "linus")
    linus = [e for e in bob.envelopes() if e.get("vpId") == "linus"]
    assert linus and all(e["seq"] > said["seq"] for e in linus)
    assert bob.envelopes().index(said) < bob.envelopes().index(linus[0])
    assert {e["triggerId"] for e in linus if e["type"] == "agent_status"} == {ack["messageId"]}
    assert linus[-1]["data"]["message_id"]  # the stored reply, for a client to thread

    # Resent (a reconnect, say): acked again as a duplicate, shown no second time.
    again = await sender.request({**chat, "clientMessageId": "c-1"})
    assert again["duplicate"] and again["messageId"] == ack["messageId"]
    await sender.request({**chat, "text": "@steve and you?", "clientMessageId": "c-2"})
    for client in (sender, other_tab, bob, bob_steve_only):
        await client.seen(_is_message("c-2"))
        shown = [f for f in client.envelopes() if f["type"] == "group_message"]
        assert [f["clientMessageId"] for f in shown] == ["c-1", "c-2"]
    assert await gw.runtime.send(WaitIdle(gid))
    for client in (sender, other_tab, bob, bob_steve_only):
        await client.close()


async def test_a_reload_replays_no_message_the_history_already_has(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    gid = await _shared_group(gw)
    ann = await _watch(gw, "ann", gid)
    await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus hi",
            "clientMessageId": "c-1",
        }
    )
    assert await gw.runtime.send(WaitIdle(gid))
    # Bob opens the group: the history, then the stream after its lastSeq.
    page = (await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("bob"))).json()
    assert [(m["author"], m["meta"].get("clientMessageId")) for m in page["messages"]] == [
        ("system", None),  # "ann added bob to the group"
        ("ann", "c-1"),
        ("linus", None),
    ]
    bob = await _watch(gw, "bob", gid, lastSeq=page["lastSeq"])
    await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus more",
            "clientMessageId": "c-2",
        }
    )
    said = await bob.seen(_is_message("c-2"))
    assert [f["type"] for f in bob.envelopes()] == ["group_message"]
    assert said["seq"] == page["lastSeq"] + 1
    assert await gw.runtime.send(WaitIdle(gid))
    await ann.close()
    await bob.close()
