"""Edit, resend and reply versions between two ``yeaft serve`` processes on one Ray and Redis.

The deployment of ``tests.test_two_gateways``: ann on gateway A, bob on
gateway B. ann asks linus; an edit while linus answers is refused (turn
running); the wrong edits change nothing; ann's edit with resend on A
reaches bob on B live, linus answers the new text, and the old and new
replies are versions of one reply that either gateway lists; bob picks the
first version on B and ann sees it on A; both exports carry the versions,
and the audit log has each step.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from protocol import MAX_TEXT_LENGTH
from store.audit import AuditAction, AuditQuery
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


def _refusal(reply: httpx.Response, status: int, reason: str | None = None) -> None:
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    if reason is not None:
        assert error["detail"]["reason"] == reason, error


async def test_an_edit_and_resend_on_one_gateway_reach_the_other_as_versions(
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
    question = (await ann.seen(lambda f: f.get("type") == "ack"))["messageId"]
    # linus is still answering: the edit is refused and names him.
    running = await ann.request(
        {"type": "message_edit", "groupId": gid, "messageId": question, "text": "LFU?"}
    )
    assert running["type"] == "error" and running["code"] == "conflict", running
    assert running["detail"] == {"reason": "turn_running", "vps": ["linus"]}
    await _until_count(bob, _is_result("linus"), 1)
    first = next(f for f in bob.received if _is_result("linus")(f))["data"]["message_id"]

    async with (
        httpx.AsyncClient(base_url=b.url, timeout=30) as http_b,
        httpx.AsyncClient(base_url=a.url, timeout=30) as http_a,
    ):
        url = f"/api/groups/{gid}/messages/{question}"
        # Refused, and nothing changes: someone else's message, a VP's, bad text.
        _refusal(
            await http_b.patch(url, json={"text": "mine now"}, headers=bob_auth), 403, "not_author"
        )
        vp_url = f"/api/groups/{gid}/messages/{first}"
        _refusal(
            await http_a.patch(vp_url, json={"text": "better"}, headers=ann_auth), 403, "not_author"
        )
        _refusal(await http_a.patch(url, json={"text": ""}, headers=ann_auth), 422)
        _refusal(
            await http_a.patch(url, json={"text": "   \n"}, headers=ann_auth), 422, "invalid_text"
        )
        too_long = "x" * (MAX_TEXT_LENGTH + 1)
        _refusal(await http_a.patch(url, json={"text": too_long}, headers=ann_auth), 422)
        _refusal(await http_b.post(f"{url}/resend", headers=bob_auth), 403, "not_author")
        # A deleted message; one no VP answered.
        typo = await ann.request(
            {
                "type": "yeaft_session_chat",
                "groupId": gid,
                "text": "@nobody hi",
                "clientMessageId": "m2",
            }
        )
        gone = f"/api/groups/{gid}/messages/{typo['messageId']}"
        _refusal(await http_a.post(f"{gone}/resend", headers=ann_auth), 409, "nothing_to_resend")
        assert (await http_a.delete(gone, headers=ann_auth)).status_code == 200
        _refusal(
            await http_a.patch(gone, json={"text": "@linus hi"}, headers=ann_auth), 409, "deleted"
        )
        page = (await http_b.get(f"/api/groups/{gid}/messages", headers=bob_auth)).json()
        asked = next(m for m in page["messages"] if m["id"] == question)
        assert asked["text"] == "@linus LRU?" and "versions" not in asked["meta"]

        # ann edits and resends over A's WebSocket.
        edited = await ann.request(
            {
                "type": "message_edit",
                "groupId": gid,
                "messageId": question,
                "text": "@linus LFU instead?",
                "resend": True,
                "requestId": "e1",
            }
        )
        assert edited["type"] == "message_edited" and edited["version"] == 2, edited
        resent = await ann.seen(lambda f: f.get("type") == "message_resent")
        assert [t["vpId"] for t in resent["turns"]] == ["linus"]
        assert resent["turns"][0]["replaces"] == first and resent["requestId"] == "e1"
        # bob on B sees the new version, the old reply superseded, and the new answer.
        live = await bob.seen(_event("message_edited", messageId=question))
        assert (live["text"], live["version"], live["by"]) == ("@linus LFU instead?", 2, "ann")
        superseded = await bob.seen(_event("message_changed", messageId=first, change="superseded"))
        assert superseded["turnId"] == resent["turns"][0]["turnId"]
        await _until_count(bob, _is_result("linus"), 2)
        second = [f for f in bob.received if _is_result("linus")(f)][-1]["data"]["message_id"]

        # Either gateway lists the versions of both.
        texts = (await http_b.get(f"{url}/versions", headers=bob_auth)).json()
        assert texts["kind"] == "edits" and texts["current"] == 2
        assert [v["text"] for v in texts["versions"]] == ["@linus LRU?", "@linus LFU instead?"]
        replies = (await http_a.get(f"{vp_url}/versions", headers=ann_auth)).json()
        assert replies["kind"] == "reply" and replies["rootId"] == first
        assert [v["messageId"] for v in replies["versions"]] == [first, second]
        assert replies["chosen"] == second

        # bob shows the first version on B; ann on A is told.
        chosen = await http_b.put(f"{vp_url}/versions/chosen", headers=bob_auth)
        assert chosen.status_code == 200, chosen.text
        told = await ann.seen(_event("reply_versions", rootId=first))
        assert (told["chosen"], told["by"]) == (first, "bob")
        replies = (await http_a.get(f"{vp_url}/versions", headers=ann_auth)).json()
        assert replies["chosen"] == first
        _refusal(
            await http_a.put(
                f"/api/groups/{gid}/messages/{question}/versions/chosen", headers=ann_auth
            ),
            409,
            "not_a_version",
        )

        # Both exports carry the versions.
        exported = json.loads(
            (await http_b.get(f"/api/groups/{gid}/export?format=json", headers=bob_auth)).text
        )
        by_id = {m["id"]: m for m in exported["messages"]}
        assert by_id[question]["edits"]["earlier"][0]["text"] == "@linus LRU?"
        assert by_id[first]["replyVersion"] == {
            "rootId": first,
            "version": 1,
            "of": 2,
            "shown": True,
        }
        assert by_id[second]["replyVersion"]["shown"] is False
        markdown = (await http_a.get(f"/api/groups/{gid}/export", headers=ann_auth)).text
        assert "version 1 of 2, shown" in markdown and "version 2 of 2, not shown" in markdown
        assert "> @linus LRU?" in markdown and "edited " in markdown

    store = deployment.store_config.open_store()
    try:
        page = await store.read_audit(AuditQuery(target=gid))
    finally:
        await store.close()
    done = [(e.action, e.actor) for e in page.entries]
    assert (AuditAction.MESSAGE_EDITED, "ann") in done
    assert (AuditAction.MESSAGE_RESENT, "ann") not in done  # the edit's entry says resend
    assert (AuditAction.REPLY_VERSION_CHOSEN, "bob") in done
    entry = next(e for e in page.entries if e.action is AuditAction.MESSAGE_EDITED)
    assert entry.detail == {"messageId": question, "version": 2, "resend": True}
    await ann.close()
    await bob.close()
