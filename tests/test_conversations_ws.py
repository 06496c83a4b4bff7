"""One-to-one conversations (the seed's chat mode) over a real WebSocket.

Every client frame here carries only the seed's field names: the server
finds the conversation, its VP and the question itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ask_then_answer, last_is_tool_result

pytestmark = pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)


def scripted(request: ModelRequest) -> Reply:
    """Asks when told to ask, talks until cancelled when told to ramble, else greets."""
    last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    said = str(last_user.content) if last_user is not None else ""
    if "ask" in said or last_is_tool_result(request):
        return ask_then_answer(request)
    if "ramble" in said:
        return Reply("and so on " * 50, hang_after=3)
    return Reply("hello from the VP")


def is_output(frame: dict[str, Any], data_type: str | None = None) -> bool:
    return frame.get("type") == "claude_output" and (
        data_type is None or frame["data"]["type"] == data_type
    )


def reply_text(frames: list[dict[str, Any]], turn_id: str | None = None) -> str:
    """The assistant text streamed in ``frames`` (of one turn, when given)."""
    return "".join(
        block.get("text", "")
        for f in frames
        if is_output(f, "assistant") and (turn_id is None or f["turnId"] == turn_id)
        for block in f["data"]["message"]["content"]
        if block["type"] == "text"
    )


async def _gateway(start_gateway: StartGateway, make_runtime: MakeRuntime) -> Gateway:
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(scripted)},
        engine={"model": "offline:default?tps=200"},
    )
    gw = await start_gateway(runtime)
    await gw.user("ann")
    await gw.user("bob")
    return gw


async def _create(ws: WsClient, vp: str = "linus", work_dir: str = "proj") -> dict[str, Any]:
    ready = await ws.request(
        {
            "type": "create_conversation",
            "provider": "yeaft",
            "workDir": work_dir,
            "options": {"vpId": vp},
        }
    )
    assert ready["type"] == "session_ready", ready
    return ready


async def test_the_whole_lifecycle_with_only_the_seeds_fields(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ws = await WsClient.open(gw, "ann")

    # create_conversation -> session_ready
    ready = await _create(ws)
    cid = ready["conversationId"]
    assert ready["sessionId"] == cid
    assert ready["capabilities"]["streaming"] and ready["capabilities"]["workDir"] == "proj"
    assert ready["modelInfo"]["vpId"] == "linus" and ready["modelInfo"]["model"]
    assert (gw.settings.data_dir / "workspaces" / "proj").is_dir()

    # send_message -> claude_output stream ending in a result
    await ws.send({"type": "send_message", "conversationId": cid, "text": "hi there"})
    result = await ws.recv_until(lambda f: is_output(f, "result"))
    assert result["conversationId"] == cid and not result["data"]["is_error"]
    assert reply_text(ws.received) == "hello from the VP"
    assert not any(f["type"] == "yeaft_output" for f in ws.received)
    ack = next(f for f in ws.received if f["type"] == "ack")
    assert ack["groupId"] == cid

    # list_history_sessions: newest first, with title, last message and time
    await _create(ws, vp="steve")
    listed = await ws.request({"type": "list_history_sessions", "provider": "yeaft"})
    assert listed["type"] == "history_sessions"
    sessions = listed["sessions"]
    assert [s["vpId"] for s in sessions] == ["steve", "linus"]
    first = sessions[1]
    assert first["conversationId"] == cid and first["title"] == "hi there"
    assert first["lastMessage"] == "hello from the VP" and first["lastAuthor"] == "linus"
    assert first["lastActivity"] >= first["createdAt"]
    in_proj = await ws.request(
        {"type": "list_history_sessions", "provider": "yeaft", "workDir": "proj"}
    )
    assert len(in_proj["sessions"]) == 2

    # resume_conversation on another connection replays the history, then streams
    other = await WsClient.open(gw, "ann")
    resumed = await other.request(
        {"type": "resume_conversation", "conversationId": cid, "sessionId": cid}
    )
    assert resumed["type"] == "session_ready" and resumed["conversationId"] == cid
    await other.recv_until(lambda f: is_output(f, "result"))
    mine = [f for f in other.received if f["type"] == "group_message"]
    assert [m["text"] for m in mine] == ["hi there"]
    assert reply_text(other.received) == "hello from the VP"

    # cancel_execution with only conversationId, mid-turn
    await ws.send({"type": "send_message", "conversationId": cid, "text": "please ramble"})
    started = await ws.recv_until(lambda f: is_output(f, "assistant"))
    await ws.send({"type": "cancel_execution", "conversationId": cid})
    stopped = await ws.recv_until(
        lambda f: is_output(f, "result") and f["turnId"] == started["turnId"]
    )
    assert stopped["data"]["stop_reason"] == "aborted"
    # the other connection watching it saw the same turn end
    await other.recv_until(lambda f: is_output(f, "result") and f["turnId"] == started["turnId"])

    # ask_user_answer with only requestId
    await ws.send({"type": "send_message", "conversationId": cid, "text": "ask me"})
    question = await ws.recv_until(lambda f: f.get("type") == "ask_user_question")
    assert question["conversationId"] == cid and question["prompt"] == "which colour?"
    await ws.send({"type": "ask_user_answer", "requestId": question["requestId"], "answer": "red"})
    turn = question["turnId"]
    done = await ws.recv_until(lambda f: is_output(f, "result") and f["turnId"] == turn)
    assert not done["data"]["is_error"]
    assert reply_text(ws.received, question["turnId"]) == "you said: red"
    again = await ws.request(
        {"type": "ask_user_answer", "requestId": question["requestId"], "answer": "blue"}
    )
    assert again["code"] == "not_found" and again["field"] == "requestId"

    # delete_conversation -> gone for every frame that names it
    deleted = await ws.request({"type": "delete_conversation", "conversationId": cid})
    assert deleted == {"type": "conversation_deleted", "conversationId": cid}
    await other.recv_until(lambda f: f.get("type") == "conversation_deleted")
    for frame in (
        {"type": "resume_conversation", "conversationId": cid},
        {"type": "send_message", "conversationId": cid, "text": "still there?"},
        {"type": "delete_conversation", "conversationId": cid},
        {"type": "cancel_execution", "conversationId": cid},
    ):
        reply = await ws.request(frame)
        assert reply["type"] == "error" and reply["code"] == "not_found", (frame, reply)
    listed = await ws.request({"type": "list_history_sessions", "provider": "yeaft"})
    assert [s["vpId"] for s in listed["sessions"]] == ["steve"]
    await ws.close()
    await other.close()


async def test_a_conversation_is_private_to_its_owner(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann = await WsClient.open(gw, "ann")
    cid = (await _create(ann))["conversationId"]
    await ann.send({"type": "send_message", "conversationId": cid, "text": "a secret"})
    await ann.recv_until(lambda f: is_output(f, "result"))

    bob = await WsClient.open(gw, "bob")
    for frame in (
        {"type": "resume_conversation", "conversationId": cid},
        {"type": "send_message", "conversationId": cid, "text": "let me in"},
        {"type": "cancel_execution", "conversationId": cid},
        {"type": "ask_user_answer", "conversationId": cid, "requestId": "ask_x", "answer": "x"},
        {"type": "delete_conversation", "conversationId": cid},
        {"type": "subscribe", "groupId": cid, "lastSeq": 0},
        {"type": "yeaft_session_chat", "groupId": cid, "text": "hi"},
    ):
        reply = await bob.request(frame)
        assert reply["type"] == "error" and reply["code"] == "not_found", (frame, reply)
    assert (await bob.request({"type": "list_history_sessions"}))["sessions"] == []
    assert not any(f.get("type") == "claude_output" for f in bob.received)
    for path in (f"/api/conversations/{cid}", f"/api/conversations/{cid}/messages"):
        assert (await gw.http.get(path, headers=gw.auth("bob"))).status_code == 404
    gone = await gw.http.delete(f"/api/conversations/{cid}", headers=gw.auth("bob"))
    assert gone.status_code == 404

    # Nor is it a group, even to its owner: the group API does not show it.
    groups = (await gw.http.get("/api/groups", headers=gw.auth("ann"))).json()["groups"]
    assert groups == []
    assert (await gw.http.get(f"/api/groups/{cid}", headers=gw.auth("ann"))).status_code == 404
    listed = (await ann.request({"type": "list_groups"}))["groups"]
    assert listed == []

    # Its owner's HTTP view matches the WebSocket's.
    mine = (await gw.http.get("/api/conversations", headers=gw.auth("ann"))).json()
    assert [c["conversationId"] for c in mine["conversations"]] == [cid]
    page = (await gw.http.get(f"/api/conversations/{cid}/messages", headers=gw.auth("ann"))).json()
    assert [m["text"] for m in page["messages"]] == ["a secret", "hello from the VP"]
    assert page["lastSeq"] > 0
    await ann.close()
    await bob.close()


async def test_list_folders_lists_workspaces_and_refuses_paths(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann = await WsClient.open(gw, "ann")
    await _create(ann, work_dir="alpha")
    await _create(ann, work_dir="alpha")
    await _create(ann, work_dir="beta")
    for bad in ("../escape", "a/b", "..", ".hidden", "a\\b"):
        reply = await ann.request(
            {"type": "create_conversation", "provider": "yeaft", "workDir": bad}
        )
        assert reply["code"] == "invalid_frame" and reply["field"] == "workDir", (bad, reply)
    other = await ann.request({"type": "create_conversation", "provider": "claude"})
    assert other["code"] == "invalid_frame" and other["field"] == "provider"
    unknown = await ann.request(
        {"type": "create_conversation", "provider": "yeaft", "options": {"vpId": "nobody"}}
    )
    assert unknown["code"] == "not_found"
    assert not (gw.settings.data_dir / "escape").exists()

    folders = await ann.request({"type": "list_folders", "provider": "yeaft"})
    assert folders["type"] == "folders_list"
    counts = {f["name"]: f["conversations"] for f in folders["folders"]}
    assert counts == {"alpha": 2, "beta": 1}

    # Without options the conversation is with the default VP in the default workspace.
    ready = await ann.request({"type": "create_conversation", "provider": "yeaft"})
    assert ready["modelInfo"]["vpId"] == "omni" and ready["capabilities"]["workDir"] == "default"

    bob = await WsClient.open(gw, "bob")
    theirs = await bob.request({"type": "list_folders", "provider": "yeaft"})
    assert {f["name"]: f["conversations"] for f in theirs["folders"]} == {
        "alpha": 0,
        "beta": 0,
        "default": 0,
    }
    workspaces = (await gw.http.get("/api/workspaces", headers=gw.auth("ann"))).json()
    assert [w["name"] for w in workspaces["workspaces"]] == ["alpha", "beta", "default"]
    await ann.close()
    await bob.close()


async def test_group_cancel_and_answers_need_no_group_id(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    """In a group too, the seed's fields are enough: conversationId is the group's id."""
    gw = await _gateway(start_gateway, make_runtime)
    created = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["steve"]}, headers=gw.auth("ann")
    )
    gid = created.json()["id"]
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await ws.send({"type": "yeaft_session_chat", "groupId": gid, "text": "ask me"})
    question = await ws.recv_until(lambda f: f.get("type") == "ask_user_question")
    # bob is not in the group: the question is not his to answer
    bob = await WsClient.open(gw, "bob")
    refused = await bob.request(
        {"type": "ask_user_answer", "requestId": question["requestId"], "answer": "x"}
    )
    assert refused["code"] == "not_found" and refused["field"] == "requestId"
    await ws.send({"type": "ask_user_answer", "requestId": question["requestId"], "answer": "red"})
    await ws.recv_until(
        lambda f: (
            f.get("type") == "yeaft_output"
            and f["data"]["type"] == "result"
            and f["turnId"] == question["turnId"]
        )
    )

    await ws.send({"type": "yeaft_session_chat", "groupId": gid, "text": "ramble on"})
    started = await ws.recv_until(
        lambda f: f.get("type") == "yeaft_output" and f["data"]["type"] == "assistant"
    )
    await ws.send({"type": "cancel_execution", "conversationId": started["conversationId"]})
    stopped = await ws.recv_until(
        lambda f: (
            f.get("type") == "yeaft_output"
            and f["data"]["type"] == "result"
            and f["turnId"] == started["turnId"]
        )
    )
    assert stopped["data"]["stop_reason"] == "aborted"
    await ws.close()
    await bob.close()
