"""Conversations outlive their server, on both stores, and their turns are durable turns.

A deployment's actors are killed while a conversation's VP is answering; a
second runtime on the same store (with a new gateway) plays the restarted
server. The conversation is still its owner's, listed with its title and
last message; the interrupted turn ended with one error result saying so;
and the conversation answers again.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.providers.scripted import ScriptedModel
from tests.fixtures.gateway import PASSWORD, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.test_conversations_ws import _create, is_output, reply_text, scripted
from tests.test_recovery import crash

ENGINE = {"model": "offline:default?tps=200"}


def results(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["data"] for f in frames if is_output(f, "result")]


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_conversation_survives_a_crash_and_goes_on(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    first = make_runtime(provider_overrides={"offline": ScriptedModel(scripted)}, engine=ENGINE)
    gw = await start_gateway(first)
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    cid = (await _create(ws))["conversationId"]
    await ws.send({"type": "send_message", "conversationId": cid, "text": "hi there"})
    await ws.recv_until(lambda f: is_output(f, "result"))
    await ws.send({"type": "send_message", "conversationId": cid, "text": "please ramble"})
    await ws.recv_until(lambda f: is_output(f, "assistant") and "so on" in reply_text([f]))
    await crash(first)
    await ws.close()

    second = make_runtime(
        provider_overrides={"offline": ScriptedModel(scripted)},
        engine=ENGINE,
        store=first.config.store,
    )
    report = await second.recover()
    assert report.interrupted == 1
    gw2 = await start_gateway(second)
    login = await gw2.http.post("/api/login", json={"username": "ann", "password": PASSWORD})
    gw2.tokens["ann"] = login.json()["token"]
    ws2 = await WsClient.open(gw2, "ann")

    listed = await ws2.request({"type": "list_history_sessions", "provider": "yeaft"})
    (session,) = listed["sessions"]
    assert session["conversationId"] == cid and session["title"] == "hi there"
    # The interrupted turn stored no reply: the newest message is the question.
    assert session["lastMessage"] == "please ramble" and session["lastAuthor"] == "ann"

    ready = await ws2.request({"type": "resume_conversation", "conversationId": cid})
    assert ready["type"] == "session_ready" and ready["lastSeq"] > 0
    await ws2.until_seq(ready["lastSeq"])
    ended = results(ws2.received)
    assert [r["subtype"] for r in ended] == ["success", "error_during_execution"]
    assert ended[1]["error_kind"] == "restarted"

    await ws2.send({"type": "send_message", "conversationId": cid, "text": "hi again"})
    await ws2.recv_until(lambda f: is_output(f, "result") and f["seq"] > ready["lastSeq"])
    assert results(ws2.received)[-1]["subtype"] == "success"

    # Every message's turn is a durable record, finished exactly once.
    store = await second.store()
    people = [m for m in await store.read_messages(cid) if m.role == "user"]
    assert [m.text for m in people] == ["hi there", "please ramble", "hi again"]
    for message in people:
        (turn,) = await store.turns_of(cid, message.id)
        assert turn.vp_id == "linus" and turn.finished
    await ws2.close()
