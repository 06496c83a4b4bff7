"""Mentions and unread counts pushed between two ``yeaft serve`` processes on one Redis.

The deployment of ``tests.test_two_gateways``: ann on gateway A, bob on
gateway B, watching another group than the one ann writes in. ann mentions
bob; bob's socket on B gets the pushed summary with his mention count, then
the unread count of a plain message, and a read mark he moves through A
clears the count on B (the store's activity log, tailed by each gateway).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from protocol import parse_server_frame
from protocol.inbox import InboxSummary
from tests.test_two_gateways import ROSTER, Deployment, _watch, ann_and_bob_crew
from tests.test_two_gateways import deployment as deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _summary(gid: str, **fields: Any) -> Any:
    return lambda f: (
        f.get("type") == "inbox_summary"
        and f.get("groupId") == gid
        and all(f.get(k) == v for k, v in fields.items())
    )


async def test_a_mention_on_one_gateway_is_pushed_to_the_other(deployment: Deployment) -> None:
    a, b = deployment.a, deployment.b
    ann_token, bob_token, crew = await ann_and_bob_crew(deployment)
    bob_auth = {"Authorization": f"Bearer {bob_token}"}
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        own = await http.post(
            "/api/groups", json={"name": "solo", "roster": ROSTER}, headers=bob_auth
        )
        solo = str(own.json()["id"])

    ann = await _watch(a, ann_token, crew)
    bob = await _watch(b, bob_token, solo)  # bob has another group open
    ack = await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": crew,
            "text": "@bob can you check?",
            "clientMessageId": "m1",
        }
    )
    assert ack["type"] == "ack", ack
    pushed = await bob.seen(_summary(crew, unread=1, mentions=1))
    assert isinstance(parse_server_frame(pushed), InboxSummary)
    assert pushed["mention"]["messageId"] == ack["messageId"]
    assert pushed["mention"]["author"] == "ann"
    assert pushed["mention"]["excerpt"] == "@bob can you check?"
    # Bob watched none of crew's log: the push came through the activity log alone.
    assert not any(f.get("groupId") == crew and "seq" in f for f in bob.received)

    # A plain message (to no VP: it names ann's own name only) counts as unread, not a mention.
    ack2 = await ann.request(
        {
            "type": "yeaft_session_chat",
            "groupId": crew,
            "text": "@ann note to self",
            "clientMessageId": "m2",
        }
    )
    assert ack2["type"] == "ack", ack2
    more = await bob.recv_until(_summary(crew, unread=2, mentions=1))
    assert "mention" not in more and more["lastMessage"]["messageId"] == ack2["messageId"]

    # bob reads crew on another device, through gateway A: B's socket follows.
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
        read = await http.post(
            f"/api/groups/{crew}/read", json={"messageId": ack2["messageId"]}, headers=bob_auth
        )
        assert read.status_code == 200 and read.json()["unread"] == 0
    await bob.recv_until(_summary(crew, unread=0, mentions=0))
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        listed = (await http.get("/api/mentions", headers=bob_auth)).json()["mentions"]
    assert [(m["groupId"], m["messageId"]) for m in listed] == [(crew, ack["messageId"])]
    await ann.close()
    await bob.close()
