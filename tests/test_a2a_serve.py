"""Groups and VPs as A2A agents (``/a2a``), driven by the ``a2a-sdk``'s own client
against a real gateway whose VPs answer from a scripted offline model."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway import disabling
from gateway.a2a_tasks import TaskRef, TaskTracker
from protocol import MAX_TEXT_LENGTH
from tests.doc_examples import python_example, run_example
from tests.fixtures.gateway import Gateway, StartGateway
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import (
    ROSTER,
    ask_then_answer,
    last_is_tool_result,
    steve_forwards_to_linus,
    steve_names_linus,
)
from tests.test_team_mode import team_model

RPC_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def scripted(request: ModelRequest) -> Reply:
    """Each VP answers with its own name; linus asks a question when asked for a colour;
    martin never answers."""
    me = request.context.speaker_id
    if me == "martin":
        return Reply(hang_after=0)
    last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    if me == "linus" and ("colour" in str(last_user.content if last_user else "")):
        return ask_then_answer(request)
    if last_is_tool_result(request):
        return ask_then_answer(request)
    return Reply(f"this is {me} speaking")


async def _gateway(
    start_gateway: StartGateway, make_runtime: MakeRuntime, **overrides: Any
) -> Gateway:
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(scripted)},
        engine={"model": "offline:default?tps=500"},
    )
    gw = await start_gateway(runtime, **overrides)
    for name in ("ann", "bob"):
        await gw.user(name)
    return gw


@contextlib.asynccontextmanager
async def a2a_client(
    gw: Gateway, user: str, path: str, *, streaming: bool = True
) -> AsyncIterator[tuple[Client, AgentCard]]:
    """The SDK's client for the agent at ``path``, its card read with the person's token."""
    headers = {**gw.auth(user), "A2A-Version": "1.0"}
    http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=120.0))
    async with http:
        card = await A2ACardResolver(http, f"{gw.base_url}{path}").get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=streaming)
        async with ClientFactory(config).create(card) as client:
            yield client, card


def _message(text: str, **fields: Any) -> SendMessageRequest:
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], **fields
    )
    return SendMessageRequest(message=message)


async def _all(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


def _texts(events: list[StreamResponse]) -> dict[str, str]:
    """Each artifact's text, by artifact name (the VP), as the chunks built it."""
    out: dict[str, str] = {}
    for event in events:
        if event.HasField("artifact_update"):
            update = event.artifact_update
            name = update.artifact.name
            chunk = "".join(p.text for p in update.artifact.parts)
            out[name] = (out.get(name, "") if update.append else "") + chunk
    return out


def _replies(task: Task) -> dict[str, str]:
    return {a.name: "".join(p.text for p in a.parts) for a in task.artifacts}


def _last_state(events: list[StreamResponse]) -> TaskState:
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    return states[-1]


@pytest.mark.parametrize("store_factory", ["embedded", "redis"], indirect=True)
async def test_a_group_streams_each_vps_reply_and_its_task_is_read_again(
    start_gateway: StartGateway, make_runtime: MakeRuntime, redis_server_url: str | None
) -> None:
    secret = uuid.uuid4().hex * 2
    gw = await _gateway(start_gateway, make_runtime, jwt_secret=secret)
    gid = await gw.group("ann")
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (client, card):
        assert card.name == "team" and card.capabilities.streaming
        assert [s.id for s in card.skills] == ["steve", "linus", "martin"]
        assert card.skills[0].name.startswith("Steve (")
        assert card.supported_interfaces[0].url == f"{gw.base_url}/a2a/groups/{gid}"
        (scheme,) = card.security_schemes.values()
        assert scheme.http_auth_security_scheme.scheme == "Bearer"

        events = await _all(client, _message("@steve @linus how is it going?"))
    first = events[0]
    assert first.HasField("task") and first.task.status.state == TaskState.TASK_STATE_WORKING
    task_id = first.task.id
    assert first.task.context_id == gid
    assert _texts(events) == {
        "steve": "this is steve speaking",
        "linus": "this is linus speaking",
    }
    # Streamed as it was written: more than one chunk per reply, the last one marked.
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) > 4
    assert sum(c.last_chunk for c in chunks) == 2
    assert _last_state(events) == TaskState.TASK_STATE_COMPLETED

    # Another connection (a reconnect) reads the task from the store.
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (again, _):
        task = await again.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _replies(task) == {"steve": "this is steve speaking", "linus": "this is linus speaking"}
    assert [m.parts[0].text for m in task.history] == ["@steve @linus how is it going?"]
    stored = {m.id: m for m in await (await gw.store()).read_messages(gid)}
    for artifact in task.artifacts:
        reply = stored[MessageToDict(artifact.metadata)["messageId"]]
        assert reply.author == artifact.name

    if redis_server_url is not None:
        # A second gateway on the same store and secret answers for the same task.
        other = await start_gateway(gw.runtime, jwt_secret=secret)
        other.tokens.update(gw.tokens)
        async with a2a_client(other, "ann", f"/a2a/groups/{gid}") as (elsewhere, _):
            there = await elsewhere.get_task(GetTaskRequest(id=task_id))
        assert _replies(there) == _replies(task)


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_vp_agent_addresses_its_vp_and_a_question_is_input_required(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    path = f"/a2a/groups/{gid}/vps/linus"
    async with a2a_client(gw, "ann", path, streaming=False) as (client, card):
        assert card.name == "Linus" and [s.id for s in card.skills] == ["linus"]
        (answer,) = await _all(client, _message("hello, no mention here"))
    task = answer.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _replies(task) == {"linus": "this is linus speaking"}

    # A question to the person: input-required; a message to the task answers it.
    async with a2a_client(gw, "ann", path) as (client, _):
        asked = await _all(client, _message("which colour?"))
        assert _last_state(asked) == TaskState.TASK_STATE_INPUT_REQUIRED
        status = asked[-1].status_update.status
        assert status.message.parts[0].text == "which colour?"
        question = MessageToDict(status.message.parts[1].data)["questions"][0]
        assert question["choices"] == ["red"] and question["vpId"] == "linus"
        task_id = asked[0].task.id
        seen = await client.get_task(GetTaskRequest(id=task_id))
        assert seen.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        resumed = await _all(client, _message("red", task_id=task_id))
    assert resumed[0].task.id == task_id
    assert _last_state(resumed) == TaskState.TASK_STATE_COMPLETED
    assert _texts(resumed)["linus"].endswith("you said: red")
    async with a2a_client(gw, "ann", path) as (client, _):
        done = await client.get_task(GetTaskRequest(id=task_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert _replies(done)["linus"].endswith("you said: red")
        # An ended task takes no answer.
        with pytest.raises(Exception, match="has ended"):
            await _all(client, _message("blue", task_id=task_id))


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_cancel_stops_the_task_and_a_finished_one_is_not_cancelable(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}", streaming=False) as (client, _):
        request = _message("@martin are you there?")
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        (sent,) = await _all(client, request)
        assert sent.task.status.state == TaskState.TASK_STATE_WORKING
        task_id = sent.task.id

    # Subscribed from another connection, the stream ends when the task is cancelled.
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (watcher, _):
        watched = asyncio.ensure_future(
            _collect(watcher.subscribe(SubscribeToTaskRequest(id=task_id)))
        )
        async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (client, _):
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task_id))
            read = await client.get_task(GetTaskRequest(id=task_id))
            assert read.status.state == TaskState.TASK_STATE_CANCELED
        seen = await asyncio.wait_for(watched, 30)
    assert seen[0].task.id == task_id
    assert _last_state(seen) == TaskState.TASK_STATE_CANCELED


async def _collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_stranger_gets_nothing_and_bad_tokens_are_refused(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    shared = await gw.group("ann", name="shared")
    added = await gw.http.post(
        f"/api/groups/{shared}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    assert added.status_code < 300, added.text
    async with a2a_client(gw, "ann", f"/a2a/groups/{shared}") as (client, _):
        events = await _all(client, _message("@steve hi"))
        # A message for a person, not a VP: a task with nothing to wait for.
        (told,) = await _all(client, _message("@bob have a look"))
    task_id = events[0].task.id
    assert told.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "no VP was addressed" in told.task.status.message.parts[0].text
    assert not told.task.artifacts

    listed = await gw.http.get("/a2a/groups", headers=gw.auth("bob"))
    assert [g["id"] for g in listed.json()["groups"]] == [shared]
    mine = (await gw.http.get("/a2a/groups", headers=gw.auth("ann"))).json()["groups"]
    entry = next(g for g in mine if g["id"] == gid)
    assert entry["card"] == f"{gw.base_url}/a2a/groups/{gid}/.well-known/agent-card.json"
    assert [v["id"] for v in entry["vps"]] == ["steve", "linus", "martin"]

    body = _rpc("SendMessage", {"message": _wire_message("@steve hello")})
    for path in (f"/a2a/groups/{gid}", f"/a2a/groups/{gid}/vps/steve", "/a2a/groups/grp_nope"):
        card = await gw.http.get(f"{path}/.well-known/agent-card.json", headers=gw.auth("bob"))
        assert card.status_code == 404 and gid not in card.text
        call = await gw.http.post(path, json=body, headers={**RPC_HEADERS, **gw.auth("bob")})
        assert call.status_code == 404, call.text
    # A VP not on the roster is as unknown as a group.
    odd = await gw.http.get(
        f"/a2a/groups/{gid}/vps/ada/.well-known/agent-card.json", headers=gw.auth("ann")
    )
    assert odd.status_code == 404
    # In a group they share, bob cannot read or cancel ann's task.
    async with a2a_client(gw, "bob", f"/a2a/groups/{shared}") as (client, _):
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
    assert await (await gw.store()).read_messages(gid) == []

    # No token, a wrong one, a disabled account: 401 before A2A, and the client fails.
    await disabling.disable(await gw.store(), "bob", None, cli=True)
    for headers, reason in [
        ({}, "missing"),
        ({"Authorization": "Bearer not-a-token"}, "invalid"),
        (gw.auth("bob"), "account_disabled"),
    ]:
        for method, path in [
            ("GET", f"/a2a/groups/{shared}/.well-known/agent-card.json"),
            ("POST", f"/a2a/groups/{shared}"),
            ("GET", "/a2a/groups"),
        ]:
            reply = await gw.http.request(
                method, path, json=body, headers={**RPC_HEADERS, **headers}
            )
            assert reply.status_code == 401, (path, reply.text)
            assert reply.json()["error"]["detail"]["reason"] == reason
            assert reply.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(A2AClientError):
        async with a2a_client(gw, "bob", f"/a2a/groups/{shared}"):
            pass


def _wire_message(text: str, **more: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}], **more}


def _rpc(method: str, params: Any, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_bad_input_gets_the_protocols_own_errors(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    url = f"/a2a/groups/{gid}"
    ann = {**RPC_HEADERS, **gw.auth("ann")}

    async def error(content: str | bytes, headers: dict[str, str] = ann) -> dict[str, Any]:
        reply = await gw.http.post(url, content=content, headers=headers)
        assert reply.status_code == 200, reply.text
        found: dict[str, Any] = reply.json()["error"]
        return found

    def body(method: str, params: Any) -> str:
        import json

        return json.dumps(_rpc(method, params))

    message = {"message": _wire_message("@steve hi")}
    assert (await error('{"jsonrpc": "2.0", "id": 1, "method": '))["code"] == -32700
    assert (await error('{"hello": "world"}'))["code"] == -32600
    assert (await error("[]"))["code"] == -32600
    assert (await error(body("NoSuchMethod", {})))["code"] == -32601
    assert (await error(body("SendMessage", {"message": "not a message"})))["code"] == -32602
    no_version = {k: v for k, v in ann.items() if k != "A2A-Version"}
    assert (await error(body("SendMessage", message), no_version))["code"] == -32009
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": "' + b"x" * (3 << 20)
    too_large = await error(huge)
    assert too_large["code"] == -32600 and "too large" in too_large["message"]
    oversized = {"message": _wire_message("@steve " + "x" * MAX_TEXT_LENGTH)}
    too_long = await error(body("SendMessage", oversized))
    assert too_long["code"] == -32602 and "longer than" in too_long["message"]
    empty = await error(body("SendMessage", {"message": _wire_message("   ")}))
    assert empty["code"] == -32602
    a_file = {"message": {**_wire_message("x"), "parts": [{"url": "https://example.com/a.png"}]}}
    assert (await error(body("SendMessage", a_file)))["code"] == -32005
    other_context = {"message": _wire_message("@steve hi", contextId="somewhere-else")}
    assert (await error(body("SendMessage", other_context)))["code"] == -32602
    for task_id in ("msg_nope-3", "not a task", "msg_x-99999999999999999999"):
        assert (await error(body("GetTask", {"id": task_id})))["code"] == -32001
        assert (await error(body("CancelTask", {"id": task_id})))["code"] == -32001
    answer = {"message": _wire_message("red", taskId="msg_nope-1")}
    assert (await error(body("SendMessage", answer)))["code"] == -32001
    assert (await error(body("ListTasks", {})))["code"] == -32004
    push = {"taskId": "t", "url": "https://example.com/hook"}
    assert (await error(body("CreateTaskPushNotificationConfig", push)))["code"] == -32003
    # A streaming call refused up front is a JSON-RPC error too, never a 500.
    streamed = await gw.http.post(url, content=body("SendStreamingMessage", oversized), headers=ann)
    assert streamed.status_code == 200 and "longer than" in streamed.text
    # Other methods on the agent's URL: 405.
    assert (await gw.http.get(url, headers=ann)).status_code == 405
    # None of it reached the group.
    assert await (await gw.store()).read_messages(gid) == []


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_the_documented_python_example_runs(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    gid = await gw.group("ann")
    code = python_example("Groups and VPs as A2A agents", 'BASE = "http://127.0.0.1:8765"')
    env = {"YEAFT_TOKEN": gw.tokens["ann"], "YEAFT_GROUP": gid}
    printed = await run_example(code, gw.base_url, env)
    assert "steve: this is steve speaking" in printed
    assert "linus: this is linus speaking" in printed
    assert "TASK_STATE_COMPLETED" in printed


def _out(turn: str, vp: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "yeaft_output", "groupId": "g", "vpId": vp, "turnId": turn, "data": data}


def _said(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": list(blocks)}}


def _end(error: str | None = None, stop: str = "end_turn") -> dict[str, Any]:
    return {
        "type": "result",
        "is_error": error is not None,
        "error": error,
        "stop_reason": stop,
        "message_id": None if error else "msg_r",
    }


def test_task_ids_name_the_message_and_the_log_position() -> None:
    ref = TaskRef("grp_1", "msg_abc", 41)
    assert ref.id == "msg_abc-41"
    assert TaskRef.parse("grp_1", ref.id) == ref
    for bad in ("msg_abc", "msg_abc-", "-4", "msg abc-4", "msg_abc-4x", "msg_abc-" + "9" * 19):
        assert TaskRef.parse("grp_1", bad) is None, bad


def test_the_tracker_streams_chunks_tool_calls_and_ends_failed_or_canceled() -> None:
    tracker = TaskTracker(TaskRef("g", "msg_1", 0), [("steve", "t1"), ("linus", "t2")])
    assert tracker.state == TaskState.TASK_STATE_WORKING
    first = tracker.feed(_out("t1", "steve", _said({"type": "text", "text": "he"})))
    more = tracker.feed(_out("t1", "steve", _said({"type": "text", "text": "llo"})))
    assert [(e.append, e.last_chunk) for e in first + more] == [(False, False), (True, False)]
    (call,) = tracker.feed(_out("t1", "steve", _said({"type": "tool_use", "id": "c", "name": "x"})))
    assert call.status.message.parts[0].text == "steve calls x"
    # Another turn's envelopes are not the task's.
    assert tracker.feed(_out("t9", "martin", _said({"type": "text", "text": "no"}))) == []
    ended = tracker.feed(_out("t1", "steve", _end("model failed")))
    assert ended[0].last_chunk and not tracker.done
    last = tracker.feed(_out("t2", "linus", _end("model failed")))
    assert last[-1].status.state == TaskState.TASK_STATE_FAILED
    assert "steve: model failed" in last[-1].status.message.parts[0].text
    task = tracker.task()
    assert {a.name: "".join(p.text for p in a.parts) for a in task.artifacts} == {
        "steve": "hello",
        "linus": "",
    }
    # A stopped turn makes the task canceled.
    stopped = TaskTracker(TaskRef("g", "msg_2", 0), [("steve", "t3")])
    stopped.feed(_out("t3", "steve", _end("aborted", stop="aborted")))
    assert stopped.state == TaskState.TASK_STATE_CANCELED
    # A turn the records call finished, its end no longer in the log.
    old = TaskTracker(TaskRef("g", "msg_3", 0), [("steve", "t4")])
    old.end_from_records({"t4": True})
    assert old.state == TaskState.TASK_STATE_COMPLETED and old.incomplete


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_team_task_is_followed_through_its_cards_and_runs(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await gw.group("ann", ROSTER, "launch")
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (client, _):
        events = await _all(client, _message("/task plan the launch"))
    task_id = events[0].task.id
    cards = [
        MessageToDict(e.status_update.status.message.parts[1].data)["task"]
        for e in events
        if e.HasField("status_update")
        and len(e.status_update.status.message.parts) > 1
        and "task" in MessageToDict(e.status_update.status.message.parts[1].data)
    ]
    assert cards and cards[-1]["attempts"][-1]["finishedAt"] is not None
    runs = cards[-1]["attempts"][-1]["runs"]
    # Every run is an artifact named by its VP; the synthesis is among them.
    texts = _texts(events)
    assert set(texts) == {r["vp"] for r in runs}
    assert any(t.startswith("SYNTH") for t in texts.values())
    assert _last_state(events) == TaskState.TASK_STATE_COMPLETED

    # Read again from the store: the same runs, the same end.
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (again, _):
        task = await again.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert {a.artifact_id for a in task.artifacts} == {r["turnId"] for r in runs}


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_hand_off_is_part_of_the_task(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(steve_names_linus)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await gw.group("ann")
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (client, _):
        events = await _all(client, _message("@steve who knows?"))
        task_id = events[0].task.id
        assert _texts(events) == {
            "steve": "over to @linus for the details",
            "linus": "linus has the details",
        }
        assert _last_state(events) == TaskState.TASK_STATE_COMPLETED
        task = await client.get_task(GetTaskRequest(id=task_id))
    assert _replies(task) == _texts(events)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_route_forward_is_part_of_the_task(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(steve_forwards_to_linus)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await gw.group("ann")
    async with a2a_client(gw, "ann", f"/a2a/groups/{gid}") as (client, _):
        events = await _all(client, _message("@steve please pass this on"))
    # Steve's turn ends with the hand-off; Linus's answer is part of the same task.
    assert _texts(events) == {"steve": "", "linus": "done"}
    assert _last_state(events) == TaskState.TASK_STATE_COMPLETED
