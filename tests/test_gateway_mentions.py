"""People's @mentions over HTTP and the WebSocket, on real Ray and both stores.

``GET /api/inbox`` counts mentions per group, ``GET /api/mentions`` lists
them, and ``inbox_summary`` frames reach every connection of a person when
a message lands in any of their groups (not only one they watch) and when
their read mark moves on another device (``gateway.inbox_push``).
"""

from __future__ import annotations

from typing import Any

from coordinator.commands import WaitIdle
from protocol import parse_server_frame
from protocol.inbox import InboxSummary
from tests.fixtures.gateway import Gateway, WsClient
from tests.fixtures.gateway import StartGateway as StartGateway


async def _group(gw: Gateway, owner: str, name: str, *members: str) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": name, "roster": ["steve", "linus"]}, headers=gw.auth(owner)
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    for user in members:
        added = await gw.http.post(
            f"/api/groups/{gid}/members", json={"username": user}, headers=gw.auth(owner)
        )
        assert added.status_code == 200, added.text
    return gid


def _summary(gid: str, **fields: Any) -> Any:
    return lambda f: (
        f.get("type") == "inbox_summary"
        and f.get("groupId") == gid
        and all(f.get(k) == v for k, v in fields.items())
    )


async def test_a_mention_is_counted_listed_and_pushed(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    for name in ("ann", "bob"):
        await gw.user(name)
    await gw.ctx.inbox.started()
    crew = await _group(gw, "ann", "crew", "bob")
    quiet = await _group(gw, "ann", "quiet", "bob")
    ann = await WsClient.open(gw, "ann")
    phone, laptop = await WsClient.open(gw, "bob"), await WsClient.open(gw, "bob")

    # ann mentions bob in crew: bob watches nothing, yet both his devices are told.
    ack = await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": crew,
            "text": "@bob look here",
            "clientMessageId": "c1",
        }
    )
    assert ack["type"] == "ack", ack
    mid = ack["messageId"]
    for device in (phone, laptop):
        pushed = await device.seen(_summary(crew, unread=1, mentions=1))
        assert isinstance(parse_server_frame(pushed), InboxSummary)
        assert pushed["mention"] == {
            "groupId": crew,
            "messageId": mid,
            "author": "ann",
            "excerpt": "@bob look here",
            "ts": pushed["mention"]["ts"],
        }
        assert pushed["lastMessage"]["messageId"] == mid
    # ann's own summary moves too (her last message), with nothing unread.
    mine = await ann.seen(_summary(crew))
    assert (mine["unread"], mine["mentions"]) == (0, 0) and "mention" not in mine

    # No VP took a turn: beside the notices, the group log holds ann's message alone.
    assert await gw.runtime.send(WaitIdle(crew))
    page = (await gw.http.get(f"/api/groups/{crew}/messages", headers=gw.auth("bob"))).json()
    said = [(m["author"], m["people"]) for m in page["messages"] if m["role"] != "system"]
    assert said == [("ann", ["bob"])]

    inbox = (await gw.http.get("/api/inbox", headers=gw.auth("bob"))).json()["groups"]
    by_id = {g["groupId"]: g for g in inbox}
    assert (by_id[crew]["unread"], by_id[crew]["mentions"]) == (1, 1)
    assert by_id[quiet] == {"groupId": quiet, "unread": 0, "mentions": 0, "lastMessage": None}
    listed = (await gw.http.get("/api/mentions", headers=gw.auth("bob"))).json()["mentions"]
    assert [(m["groupId"], m["groupName"], m["messageId"], m["author"]) for m in listed] == [
        (crew, "crew", mid, "ann")
    ]
    assert listed[0]["excerpt"] == "@bob look here"
    assert (await gw.http.get("/api/mentions", headers=gw.auth("ann"))).json() == {"mentions": []}
    too_many = await gw.http.get("/api/mentions?limit=1000", headers=gw.auth("bob"))
    assert too_many.status_code == 422

    # bob reads crew on his phone: his laptop's count clears without asking.
    read = await gw.http.post(
        f"/api/groups/{crew}/read", json={"messageId": mid}, headers=gw.auth("bob")
    )
    assert read.json()["mentions"] == 0
    cleared = await laptop.recv_until(_summary(crew, unread=0, mentions=0))
    assert "mention" not in cleared

    # A plain message in another group: unread, no mention.
    ack = await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": quiet,
            "text": "@linus hi",
            "clientMessageId": "c2",
        }
    )
    assert ack["type"] == "ack", ack
    plain = await laptop.recv_until(_summary(quiet, mentions=0))
    assert plain["unread"] >= 1 and "mention" not in plain
    assert await gw.runtime.send(WaitIdle(quiet))
    for client in (ann, phone, laptop):
        await client.close()
