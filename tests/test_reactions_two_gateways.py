"""Reactions and pins between two ``yeaft serve`` processes on one Ray cluster and one Redis.

The deployment of ``tests.test_two_gateways``: ann on gateway A, bob on
gateway B. ann asks linus; then reactions and pins made on one gateway
(over the WebSocket and over HTTP) reach the other's client live, in the
group's event log order, and a page of history read from either shows them.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.test_two_gateways import (
    Deployment,
    _is_result,
    _until_count,
    _watch,
    ann_and_bob_crew,
)
from tests.test_two_gateways import deployment as deployment

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _event(kind: str, **fields: Any) -> Any:
    return lambda f: (
        f.get("type") == kind and "seq" in f and all(f.get(k) == v for k, v in fields.items())
    )


async def test_a_reaction_and_a_pin_on_one_gateway_reach_the_other(
    deployment: Deployment,
) -> None:
    a, b = deployment.a, deployment.b
    ann_token, bob_token, gid = await ann_and_bob_crew(deployment)
    ann_auth = {"Authorization": f"Bearer {ann_token}"}
    bob_auth = {"Authorization": f"Bearer {bob_token}"}

    ann = await _watch(a, ann_token, gid)
    bob = await _watch(b, bob_token, gid)
    await ann.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus LRU?",
            "clientMessageId": "m1",
        }
    )
    await _until_count(bob, _is_result("linus"), 1)
    question = (await ann.seen(lambda f: f.get("type") == "ack"))["messageId"]
    result = next(f for f in bob.received if _is_result("linus")(f))
    reply = result["data"]["message_id"]

    # ann reacts to linus's reply over A's WebSocket: bob's WebSocket on B gets it.
    await ann.send({"type": "message_react", "groupId": gid, "messageId": reply, "emoji": "🎯"})
    live = await bob.seen(_event("message_reactions", messageId=reply, by="ann"))
    assert live["reactions"] == [{"emoji": "🎯", "users": ["ann"]}]
    # bob adds his over B's HTTP API: ann on A sees both names.
    async with httpx.AsyncClient(base_url=b.url, timeout=30) as http:
        joined = await http.post(
            f"/api/groups/{gid}/messages/{reply}/reactions", json={"emoji": "🎯"}, headers=bob_auth
        )
        assert joined.status_code == 200, joined.text
    both = await ann.seen(_event("message_reactions", messageId=reply, by="bob"))
    assert both["reactions"] == [{"emoji": "🎯", "users": ["ann", "bob"]}]

    # bob pins ann's question over B's WebSocket: ann's pinned list on A follows.
    await bob.send({"type": "message_pin", "groupId": gid, "messageId": question, "pinned": True})
    pinned = await ann.seen(_event("message_pins", messageId=question, pinned=True))
    assert [(p["messageId"], p["by"]) for p in pinned["pins"]] == [(question, "bob")]

    # Read back from the other gateway: the history page and the pinned list agree.
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
        page = (await http.get(f"/api/groups/{gid}/messages", headers=ann_auth)).json()
        pins = (await http.get(f"/api/groups/{gid}/pins", headers=ann_auth)).json()
    reactions = {m["id"]: m["reactions"] for m in page["messages"]}
    assert reactions[reply] == [{"emoji": "🎯", "users": ["ann", "bob"]}]
    assert reactions[question] == []
    assert [(p["messageId"], p["author"]) for p in pins["pins"]] == [(question, "ann")]
    # Each side saw the changes in one order, that of the group's log.
    for client in (ann, bob):
        await client.seen(_event("message_pins", messageId=question))
        kinds = [
            f["type"]
            for f in client.received
            if f.get("type") in ("message_reactions", "message_pins") and "seq" in f
        ]
        assert kinds == ["message_reactions", "message_reactions", "message_pins"]
    await ann.close()
    await bob.close()
