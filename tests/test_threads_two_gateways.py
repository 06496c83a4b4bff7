"""Threads between two ``yeaft serve`` processes on one Ray cluster and one Redis.

The deployment of ``tests.test_two_gateways``: ann on gateway A, bob on
gateway B. ann asks linus on the main timeline; bob opens a thread under
her message on B and asks steve there; ann, on A, sees bob's reply and
every frame of steve's turn with the thread's id, live. ann answers in the
thread over A's HTTP API and bob sees it; both gateways read the same
thread back, and a page of history from either sums it up under its root.
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


def _in_thread(root: str) -> Any:
    return lambda f: "seq" in f and f.get("threadId") == root


async def test_a_thread_on_one_gateway_is_live_on_the_other(deployment: Deployment) -> None:
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
    root = (await ann.seen(lambda f: f.get("type") == "ack"))["messageId"]

    # bob, on B, asks steve in a thread under ann's message.
    ack = await bob.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@steve is ARC better here?",
            "threadId": root,
            "clientMessageId": "t1",
        }
    )
    assert ack["type"] == "ack", ack
    for client in (ann, bob):
        await _until_count(client, _is_result("steve"), 1)
        said = await client.seen(
            lambda f: f.get("type") == "group_message" and f["messageId"] == ack["messageId"]
        )
        assert said["threadId"] == root and said["author"] == "bob"
        result = next(f for f in client.received if _is_result("steve")(f))
        assert result["threadId"] == root
        turn = [f for f in client.received if f.get("turnId") == result["turnId"]]
        assert all(f.get("threadId") == root for f in turn), turn
    answer = next(f for f in ann.received if _is_result("steve")(f))["data"]["message_id"]

    # ann answers in the thread over A's HTTP API; bob sees it live on B.
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
        posted = await http.post(
            f"/api/groups/{gid}/threads/{root}/messages",
            json={"text": "thanks, steve", "clientMessageId": "t2"},
            headers=ann_auth,
        )
        assert posted.status_code == 200, posted.text
    thanks = await bob.seen(
        lambda f: f.get("type") == "group_message" and f.get("clientMessageId") == "t2"
    )
    assert thanks["threadId"] == root and thanks["author"] == "ann"

    # Both gateways read the same thread, and sum it up under its root.
    expected = [ack["messageId"], answer, posted.json()["messageId"]]
    for gw, auth in ((a, bob_auth), (b, ann_auth)):
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as http:
            thread = (await http.get(f"/api/groups/{gid}/threads/{root}", headers=auth)).json()
            assert [m["id"] for m in thread["messages"]] == expected
            assert thread["summary"]["participants"] == ["bob", "steve", "ann"]
            page = (await http.get(f"/api/groups/{gid}/messages", headers=auth)).json()
            summary = next(m for m in page["messages"] if m["id"] == root)["thread"]
            assert summary["count"] == 3 and summary["lastId"] == expected[-1]
    opened = await ann.request({"type": "thread_open", "groupId": gid, "threadId": root})
    assert [m["id"] for m in opened["messages"]] == expected
    # Nothing of the thread's turn reached the main timeline's frames without its id.
    for client in (ann, bob):
        steve_frames = [f for f in client.received if f.get("vpId") == "steve" and "seq" in f]
        assert steve_frames and all(_in_thread(root)(f) for f in steve_frames)
    await ann.conn.close()
    await bob.conn.close()
