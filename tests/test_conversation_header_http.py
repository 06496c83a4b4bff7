"""What a one-to-one conversation's header offers, over HTTP: its own export,
usage and settings (``gateway.conversations_http``), on real Ray and both stores.

A conversation is a group record underneath; these routes must answer with
the conversation's own log, totals and settings, never a group's, and tell
anyone but its owner nothing (the 404 an unknown id gets).
"""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.gateway import Gateway, StartGateway, WsClient


async def _conversation(gw: Gateway, user: str, title: str | None = None) -> str:
    body: dict[str, Any] = {"vpId": "linus"}
    if title is not None:
        body["title"] = title
    made = await gw.http.post("/api/conversations", json=body, headers=gw.auth(user))
    assert made.status_code == 201, made.text
    return str(made.json()["conversationId"])


async def _say(gw: Gateway, user: str, cid: str, text: str) -> None:
    """Send ``text`` in the conversation and wait for the VP's turn to end."""
    ws = await WsClient.open(gw, user)
    await ws.send({"type": "resume_conversation", "conversationId": cid, "lastSeq": 0})
    await ws.send({"type": "send_message", "conversationId": cid, "text": text})
    result = await ws.recv_until(
        lambda f: f.get("type") == "claude_output" and f["data"]["type"] == "result"
    )
    assert result["data"]["subtype"] == "success", result
    await ws.close()


async def test_a_conversation_exports_and_counts_its_own_turns(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    ann = gw.auth("ann")
    # A group of ann's with a turn of its own: its totals must not show in the conversation's.
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=ann
    )
    gid = made.json()["id"]
    cid = await _conversation(gw, "ann", title="Cache talk")
    await _say(gw, "ann", cid, "where should the **cache** live?")

    usage = await gw.http.get(f"/api/conversations/{cid}/usage", headers=ann)
    assert usage.status_code == 200, usage.text
    totals = usage.json()
    assert totals["conversationId"] == cid and totals["turns"] == 1
    assert totals["outputTokens"] > 0
    assert totals["today"]["tokens"] == totals["inputTokens"] + totals["outputTokens"]
    group_totals = (await gw.http.get(f"/api/groups/{gid}/usage", headers=ann)).json()
    assert group_totals["turns"] == 0, "the group counted the conversation's turn"

    md = await gw.http.get(f"/api/conversations/{cid}/export", headers=ann)
    assert md.status_code == 200, md.text
    assert md.headers["content-type"].startswith("text/markdown")
    assert 'filename="Cache-talk.md"' in md.headers["content-disposition"]
    assert md.text.startswith("# Cache talk\n")
    assert "conversation of ann with @linus" in md.text
    assert "where should the **cache** live?" in md.text
    assert "### @linus · " in md.text

    exported = await gw.http.get(f"/api/conversations/{cid}/export?format=json", headers=ann)
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"].startswith("application/json")
    document = json.loads(exported.text)
    assert document["format"] == "yeaft-conversation-export" and "group" not in document
    assert document["conversation"]["conversationId"] == cid
    assert document["conversation"]["owner"] == "ann"
    assert document["conversation"]["vpId"] == "linus"
    assert [m["author"] for m in document["messages"]] == ["ann", "linus"]
    assert document["usage"]["turns"] == 1
    assert document["usage"]["outputTokens"] == totals["outputTokens"]
    bad = await gw.http.get(f"/api/conversations/{cid}/export?format=xml", headers=ann)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "format"


async def test_the_owner_reads_and_changes_the_conversation_settings(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    ann = gw.auth("ann")
    cid = await _conversation(gw, "ann")
    url = f"/api/conversations/{cid}/settings"

    read = await gw.http.get(url, headers=ann)
    assert read.status_code == 200, read.text
    view = read.json()
    assert view["conversationId"] == cid and view["title"] == "Chat with Linus"
    assert view["owner"] == "ann" and view["vpId"] == "linus" and view["vpName"] == "Linus"
    assert view["model"], view
    assert view["settings"]["language"] == "en" and view["settings"]["queueMode"] == "collect"
    # Only what a conversation has: nothing about several VPs.
    assert "teamMode" not in view["settings"] and "fanoutCap" not in view["settings"]

    patch = {
        "title": "Cache talk",
        "settings": {"model": "offline:careful", "language": "zh", "queueMode": "followup"},
    }
    changed = await gw.http.patch(url, json=patch, headers=ann)
    assert changed.status_code == 200, changed.text
    after = changed.json()
    assert after["title"] == "Cache talk" and after["model"] == "offline:careful"
    assert after["settings"]["language"] == "zh"
    assert after["settings"]["queueMode"] == "followup"
    assert (await gw.http.get(url, headers=ann)).json() == after
    summary = (await gw.http.get(f"/api/conversations/{cid}", headers=ann)).json()
    assert summary["title"] == "Cache talk"
    # A client resuming it is told the model its turns now use.
    ws = await WsClient.open(gw, "ann")
    ready = await ws.request({"type": "resume_conversation", "conversationId": cid})
    assert ready["type"] == "session_ready", ready
    assert ready["model"] == ready["modelInfo"]["model"] == "offline:careful"
    await ws.close()
    # Announced in the conversation's own log, in its own words.
    page = (await gw.http.get(f"/api/conversations/{cid}/messages", headers=ann)).json()
    notices = [m["text"] for m in page["messages"] if m["role"] == "system"]
    assert any(n.startswith("ann changed the conversation settings: ") for n in notices), notices

    # A setting about several VPs, and a value out of its set: 422 naming the field.
    for settings, field in (
        ({"teamMode": True}, "settings.teamMode"),
        ({"fanoutCap": 2}, "settings.fanoutCap"),
        ({"queueMode": "sometimes"}, "settings.queueMode"),
    ):
        refused = await gw.http.patch(url, json={"settings": settings}, headers=ann)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_request" and error["field"] == field, error
    assert (await gw.http.get(url, headers=ann)).json() == after


async def test_strangers_and_unknown_ids_get_not_found(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    await gw.user("bob")
    ann, bob = gw.auth("ann"), gw.auth("bob")
    cid = await _conversation(gw, "ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=ann
    )
    gid = made.json()["id"]
    before = (await gw.http.get(f"/api/conversations/{cid}/settings", headers=ann)).json()

    async def refused(method: str, path: str, who: dict[str, str]) -> None:
        body = {"settings": {"language": "zh"}} if method == "PATCH" else None
        answer = await gw.http.request(method, path, json=body, headers=who)
        assert answer.status_code == 404, (method, path, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "not_found" and "conversation" in error["message"], error

    routes = [("GET", "export"), ("GET", "usage"), ("GET", "settings"), ("PATCH", "settings")]
    for method, tail in routes:
        # Another user's conversation: the same answer as an id never used.
        await refused(method, f"/api/conversations/{cid}/{tail}", bob)
        await refused(method, f"/api/conversations/conv_nosuch/{tail}", ann)
        # A group is not a conversation, even to its own member.
        await refused(method, f"/api/conversations/{gid}/{tail}", ann)
    assert (await gw.http.get(f"/api/conversations/{cid}/settings", headers=ann)).json() == before


async def test_a_conversations_messages_have_no_edit_resend_or_versions(
    start_gateway: StartGateway,
) -> None:
    """Edits are a group's (docs/web-ui.md): in a conversation a 404, nothing changed."""
    gw = await start_gateway()
    await gw.user("ann")
    ann = gw.auth("ann")
    cid = await _conversation(gw, "ann")
    await _say(gw, "ann", cid, "LRU or LFU?")
    page = (await gw.http.get(f"/api/conversations/{cid}/messages", headers=ann)).json()
    mine = next(m for m in page["messages"] if m["author"] == "ann")
    reply = next(m for m in page["messages"] if m["role"] == "assistant")
    base = f"/api/groups/{cid}/messages"
    refused = [
        await gw.http.patch(f"{base}/{mine['id']}", json={"text": "LFU?"}, headers=ann),
        await gw.http.patch(
            f"{base}/{mine['id']}", json={"text": "LFU?", "resend": True}, headers=ann
        ),
        await gw.http.post(f"{base}/{mine['id']}/resend", headers=ann),
        await gw.http.get(f"{base}/{mine['id']}/versions", headers=ann),
        await gw.http.put(f"{base}/{reply['id']}/versions/chosen", headers=ann),
    ]
    for answer in refused:
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == "not_found", answer.text
    after = (await gw.http.get(f"/api/conversations/{cid}/messages", headers=ann)).json()
    assert after["messages"] == page["messages"]
