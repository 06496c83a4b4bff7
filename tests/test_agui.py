"""The AG-UI endpoint (``gateway.agui``): the translation of a group's envelopes,
refusals of bad input, and whole runs read by the official ``@ag-ui/client``
under Node.js (tests/agui, installed by ``make test``), which verifies the
order of every event it parses: two VPs, one thinking and calling a tool; a
question as an interrupt, resumed; a team task as state snapshots; a quiet
run kept alive by SSE comments."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from gateway.agui import parse_run
from gateway.agui_events import ASK_USER_EVENT, RunTranslator, parse_interrupt_id
from gateway.errors import GatewayError
from gateway.run_stream import KEEP_ALIVE, ROUTING_WAIT_S, keep_alive
from tests.fixtures.gateway import StartGateway
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER, ask_then_answer, last_is_tool_result, steve_names_linus
from tests.test_team_mode import team_model

CLIENT = Path(__file__).parent / "agui"


def _out(turn: str, vp: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "yeaft_output", "groupId": "g", "vpId": vp, "turnId": turn, "data": data}


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"role": "assistant", "content": list(blocks)}}


def _result(message_id: str | None = "msg_1", is_error: bool = False) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "error_during_execution" if is_error else "success",
        "is_error": is_error,
        "message_id": message_id,
        "error": "model failed" if is_error else None,
    }


def _wire(events: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(e.model_dump_json(by_alias=True)) for e in events]


def test_a_turn_becomes_a_step_with_reasoning_a_tool_call_and_two_text_messages() -> None:
    run = RunTranslator({"steve": "turn_s"})
    envelopes = [
        _out("turn_s", "steve", {"type": "system", "subtype": "init"}),
        _out("turn_s", "steve", _assistant({"type": "thinking", "thinking": "hmm"})),
        _out("turn_s", "steve", _assistant({"type": "text", "text": "let me "})),
        _out("turn_s", "steve", _assistant({"type": "text", "text": "check"})),
        _out(
            "turn_s",
            "steve",
            _assistant({"type": "tool_use", "id": "call_1", "name": "rethink", "input": {"a": 1}}),
        ),
        _out(
            "turn_s",
            "steve",
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "ok"}],
                },
            },
        ),
        _out("turn_s", "steve", _assistant({"type": "text", "text": "done"})),
        # Another turn of the group (someone else's message) is not this run's.
        _out("turn_other", "linus", _assistant({"type": "text", "text": "elsewhere"})),
        _out("turn_s", "steve", _result("msg_9")),
        # Nothing after the end of the turn.
        _out("turn_s", "steve", _assistant({"type": "text", "text": "late"})),
    ]
    events = _wire([e for env in envelopes for e in run.feed(env)])
    assert [e["type"] for e in events] == [
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
    ]
    assert events[0]["stepName"] == "steve" and events[-1]["stepName"] == "steve"
    starts = [e for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert [(s["messageId"], s["name"], s["role"]) for s in starts] == [
        ("turn_s", "steve", "assistant"),
        ("turn_s.2", "steve", "assistant"),
    ]
    call = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert call == {
        "type": "TOOL_CALL_START",
        "toolCallId": "call_1",
        "toolCallName": "rethink",
        "parentMessageId": "turn_s",
    }
    assert next(e for e in events if e["type"] == "TOOL_CALL_ARGS")["delta"] == '{"a": 1}'
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"], result["role"]) == ("call_1", "ok", "tool")
    assert run.done
    assert run.outcomes() == [
        {
            "vpId": "steve",
            "turnId": "turn_s",
            "messageId": "msg_9",
            "isError": False,
            "subtype": "success",
        }
    ]


def test_the_run_is_done_only_when_every_turn_ended_and_open_messages_are_closed() -> None:
    run = RunTranslator({"steve": "t1", "linus": "t2"})
    assert not run.done
    first = _wire(run.feed(_out("t1", "steve", _assistant({"type": "text", "text": "hi"}))))
    second = _wire(run.feed(_out("t2", "linus", _assistant({"type": "thinking", "thinking": "?"}))))
    assert [e["type"] for e in first] == [
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    assert second[0] == {"type": "STEP_STARTED", "stepName": "linus"}
    # A turn that fails while its reasoning is open still closes it.
    failed = _wire(run.feed(_out("t2", "linus", _result(None, is_error=True))))
    assert [e["type"] for e in failed] == [
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "STEP_FINISHED",
    ]
    assert not run.done
    question = {
        "type": "ask_user_question",
        "requestId": "ask_1",
        "prompt": "allow?",
        "groupId": "g",
        "vpId": "steve",
        "turnId": "t1",
    }
    asked = _wire(run.feed(question))
    assert asked == [
        {
            "type": "CUSTOM",
            "name": ASK_USER_EVENT,
            "value": {"requestId": "ask_1", "vpId": "steve", "turnId": "t1", "prompt": "allow?"},
        }
    ]
    ended = _wire(run.feed(_out("t1", "steve", _result())))
    assert [e["type"] for e in ended] == ["TEXT_MESSAGE_END", "STEP_FINISHED"]
    assert run.done
    assert run.outcomes()[1]["isError"] is True and run.outcomes()[1]["error"] == "model failed"


def test_a_run_whose_turns_all_wait_on_questions_ends_in_interrupts() -> None:
    run = RunTranslator({"steve": "t:steve", "linus": "t:linus"})
    asks = [
        {
            "type": "ask_user_question",
            "requestId": f"ask_{vp}",
            "prompt": "go on?",
            "choices": ["yes", "no"],
            "vpId": vp,
            "turnId": f"t:{vp}",
            **({"tool": {"name": "fx__rm", "arguments": "{}"}} if vp == "linus" else {}),
        }
        for vp in ("steve", "linus")
    ]
    run.feed(_out("t:steve", "steve", _assistant({"type": "text", "text": "hm"})))
    run.feed(asks[0])
    assert run.blocked is False  # linus has not even started
    run.feed(
        _out("t:linus", "linus", _assistant({"type": "tool_use", "id": "c1", "name": "fx__rm"}))
    )
    run.feed(asks[1])
    assert run.blocked is True
    closing = _wire(run.suspend())
    assert [e["type"] for e in closing] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "STEP_FINISHED"]
    steve, linus = _wire(run.interrupts())
    assert steve["reason"] == "input_required" and "toolCallId" not in steve
    assert (linus["reason"], linus["toolCallId"]) == ("tool_approval", "c1")
    assert steve["responseSchema"]["properties"]["answer"] == {"enum": ["yes", "no"]}
    assert parse_interrupt_id(linus["id"]) == ("ask_linus", "linus", "t:linus")
    assert parse_interrupt_id("nodots") is None and parse_interrupt_id("a.b.") is None
    # Output after a question (someone answered it elsewhere) means the turn runs again.
    run.feed(_out("t:steve", "steve", _assistant({"type": "text", "text": "ok"})))
    assert run.blocked is False
    # A resumed run names its messages apart from the first run's.
    again = RunTranslator({"steve": "t:steve"}, resumed_by="run2")
    started = _wire(again.feed(_out("t:steve", "steve", _assistant({"type": "text", "text": "x"}))))
    assert started[1]["messageId"] == "t:steve.run2"


def test_a_team_run_follows_the_turns_its_task_names_even_when_they_spoke_first() -> None:
    run = RunTranslator({}, task_message="msg_p")
    assert not run.done  # no card yet
    early = _out("n1:steve", "steve", _assistant({"type": "text", "text": "early"}))
    assert run.feed(early) == []
    task = {
        "id": "task_1",
        "status": "running",
        "attempts": [
            {
                "messageId": "msg_p",
                "finishedAt": None,
                "runs": [{"turnId": "n1:steve", "vp": "steve"}],
            }
        ],
    }
    other = {**task, "id": "task_2", "attempts": [{**task["attempts"][0], "messageId": "msg_x"}]}
    assert run.feed({"type": "task_changed", "groupId": "g", "task": other}) == []
    shown = _wire(run.feed({"type": "task_changed", "groupId": "g", "task": task}))
    assert [e["type"] for e in shown] == [
        "STATE_SNAPSHOT",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    assert shown[0]["snapshot"] == {"tasks": {"task_1": task}} and shown[3]["delta"] == "early"
    run.feed(_out("n1:steve", "steve", _result()))
    assert not run.done  # the attempt goes on (a synthesis may follow)
    over = {**task, "attempts": [{**task["attempts"][0], "finishedAt": 2.0}]}
    run.feed({"type": "task_changed", "groupId": "g", "task": over})
    assert run.done


def _body(**fields: Any) -> bytes:
    base: dict[str, Any] = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "m1", "role": "user", "content": "@linus hi"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    base.update(fields)
    return json.dumps(base).encode()


def test_parse_run_takes_the_last_user_message_and_refuses_bad_input() -> None:
    messages = [
        {"id": "m1", "role": "user", "content": "first"},
        {"id": "m2", "role": "assistant", "content": "an answer"},
        {"id": "m3", "role": "user", "content": [{"type": "text", "text": "@steve second"}]},
        {"id": "m4", "role": "assistant", "content": "trailing"},
    ]
    run, text = parse_run(_body(messages=messages), 10_000)
    assert text == "@steve second" and run.thread_id == "t"

    def refused(raw: bytes, limit: int = 1_000_000) -> GatewayError:
        with pytest.raises(GatewayError) as caught:
            parse_run(raw, limit)
        return caught.value

    assert refused(b"{not json").status == 400
    assert refused(b"[1, 2]").status == 422
    missing = refused(json.dumps({"runId": "r", "messages": []}).encode())
    assert missing.status == 422 and missing.field == "threadId"
    bad_message = refused(_body(messages=[{"id": "m1", "role": "user"}]))
    assert bad_message.status == 422 and (bad_message.field or "").startswith("messages")
    no_user = refused(_body(messages=[{"id": "m1", "role": "assistant", "content": "x"}]))
    assert no_user.status == 422 and no_user.field == "messages"
    empty = refused(_body(messages=[{"id": "m1", "role": "user", "content": "  "}]))
    assert empty.field == "messages"
    too_long = refused(_body(messages=[{"id": "m1", "role": "user", "content": "x" * 100_001}]))
    assert too_long.status == 422 and too_long.detail == {"limit": 100_000}
    assert refused(_body(), limit=50).status == 413


def _scripted(request: ModelRequest) -> Reply:
    """Steve thinks, calls a tool, then answers; Linus answers at once."""
    if request.context.speaker_id == "steve":
        if last_is_tool_result(request):
            return Reply("steve checked it")
        return Reply(
            "steve looks", thinking="let me think", tool_calls=[("rethink", {"reason": "x"})]
        )
    last_user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    if "colour" in str(last_user.content if last_user else "") or last_is_tool_result(request):
        return ask_then_answer(request)
    return Reply("hello from linus")


async def _client(url: str, token: str, text: str, run_id: str, *more: str) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None or not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail("the AG-UI test needs Node.js and `npm ci --prefix tests/agui` (make test)")
    proc = await asyncio.create_subprocess_exec(
        node,
        str(CLIENT / "run.mjs"),
        f"--url={url}",
        f"--token={token}",
        f"--text={text}",
        f"--run={run_id}",
        *more,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (lines[-3:], err.decode()[-2000:])
    return lines


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_run_read_by_the_official_client_and_bad_requests(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(_scripted)},
        engine={"model": "offline:default?tps=500"},
    )
    gw = await start_gateway(runtime)
    await gw.user("ann")
    await gw.user("sam")
    gid = await gw.group("ann", ["steve", "linus"], "team")
    url = f"{gw.base_url}/api/groups/{gid}/agui"

    lines = await _client(url, gw.tokens["ann"], "@steve @linus how is it going?", "run-1")
    events, done = lines[:-1], lines[-1]
    assert done["done"] is True
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert {e["stepName"] for e in events if e["type"] == "STEP_STARTED"} == {"steve", "linus"}
    assert {e["stepName"] for e in events if e["type"] == "STEP_FINISHED"} == {"steve", "linus"}
    # Each VP's text messages, named by the VP; Steve's second follows his tool call.
    names = {e["messageId"]: e["name"] for e in events if e["type"] == "TEXT_MESSAGE_START"}
    text = {m: "" for m in names}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            text[e["messageId"]] += e["delta"]
    by_vp = {vp: [text[m] for m in names if names[m] == vp] for vp in ("steve", "linus")}
    assert by_vp == {"steve": ["steve looks", "steve checked it"], "linus": ["hello from linus"]}
    calls = [e for e in events if e["type"].startswith("TOOL_CALL_")]
    assert [c["type"] for c in calls] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert calls[0]["toolCallName"] == "rethink" and names[calls[0]["parentMessageId"]] == "steve"
    assert "REASONING_MESSAGE_CONTENT" in kinds
    finished = events[-1]["result"]
    assert finished["groupId"] == gid and finished["duplicate"] is False
    assert [(t["vpId"], t["isError"]) for t in finished["turns"]] == [
        ("steve", False),
        ("linus", False),
    ]
    # The client built the messages from the events: each VP's reply, the tool's result.
    built = {m.get("name"): m for m in done["newMessages"] if m["role"] == "assistant"}
    assert "hello from linus" in built["linus"]["content"]
    assert any(m["role"] == "tool" for m in done["newMessages"])
    # The message is in the group like any other, stored once.
    history = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    said = [m for m in history.json()["messages"] if m["role"] == "user"]
    assert [m["text"] for m in said] == ["@steve @linus how is it going?"]

    # A question to the people ends the run with an interrupt; resuming it answers
    # the question, and the turn goes on in the resumed run.
    asked = await _client(url, gw.tokens["ann"], "@linus which colour?", "run-2", "--answer=red")
    at = next(i for i, line in enumerate(asked) if "interrupts" in line)
    first, second, done = asked[:at], asked[at + 1 : -1], asked[-1]
    assert first[-1]["type"] == "RUN_FINISHED" and first[-1]["outcome"]["type"] == "interrupt"
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required" and interrupt["message"] == "which colour?"
    assert interrupt["responseSchema"]["properties"]["answer"] == {"enum": ["red"]}
    assert interrupt["toolCallId"] == next(
        e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START"
    )
    assert any(e["type"] == "CUSTOM" and e["name"] == ASK_USER_EVENT for e in first)
    assert second[0]["type"] == "RUN_STARTED"
    assert second[-1]["type"] == "RUN_FINISHED" and "outcome" not in second[-1]
    assert second[-1]["result"]["turns"][0]["vpId"] == "linus"
    assert any(e["type"] == "TOOL_CALL_RESULT" and e["content"] == "red" for e in second)
    resumed = "".join(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert resumed == "you said: red"
    assert done["pending"] == []
    wrong = _body(resume=[{"interruptId": "not-ours", "status": "resolved", "payload": "red"}])
    refused_resume = await gw.http.post(url, content=wrong, headers=gw.auth("ann"))
    assert refused_resume.status_code == 422
    assert refused_resume.json()["error"]["field"] == "resume.0.interruptId"
    stale = _body(resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": "red"}])
    gone = await gw.http.post(url, content=stale, headers=gw.auth("ann"))
    assert gone.status_code == 404 and gone.json()["error"]["field"] == "requestId"

    # Refusals come before the stream, as JSON errors.
    ann = {**gw.auth("ann"), "Content-Type": "application/json"}
    body = _body(messages=[{"id": "m", "role": "user", "content": "@linus hi"}])
    stranger = await gw.http.post(url, content=body, headers=gw.auth("sam"))
    assert stranger.status_code == 404
    assert stranger.json() == {"error": {"code": "not_found", "message": "group not found"}}
    unknown = await gw.http.post("/api/groups/grp_nope/agui", content=body, headers=ann)
    assert unknown.status_code == 404
    async with httpx.AsyncClient() as nobody:
        assert (await nobody.post(url, content=body)).status_code == 401
    assert (await gw.http.post(url, content=b"{oops", headers=ann)).status_code == 400
    no_user = _body(messages=[{"id": "m", "role": "assistant", "content": "x"}])
    refused = await gw.http.post(url, content=no_user, headers=ann)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "messages"
    huge = await gw.http.post(url, content=b" " * (gw.settings.frame_max_bytes + 1), headers=ann)
    assert huge.status_code == 413


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_team_task_streams_its_cards_as_state_and_its_runs_as_steps(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await gw.group("ann", ROSTER, "launch")
    url = f"{gw.base_url}/api/groups/{gid}/agui"
    lines = await _client(url, gw.tokens["ann"], "/task plan the launch", "run-team")
    events, done = lines[:-1], lines[-1]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    snapshots = [e["snapshot"]["tasks"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots, [e["type"] for e in events]
    (task,) = snapshots[-1].values()
    assert task["attempts"][-1]["finishedAt"] is not None
    runs = task["attempts"][-1]["runs"]
    stepped = {e["stepName"].split()[0] for e in events if e["type"] == "STEP_FINISHED"}
    assert stepped == {r["vp"] for r in runs}
    finished = {t["turnId"] for t in events[-1]["result"]["turns"]}
    assert finished == {r["turnId"] for r in runs}
    assert any(e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "rethink" for e in events)
    assert done["done"] is True


async def test_keep_alive_comments_fill_only_the_silences() -> None:
    """A quiet source gets a comment per silent interval; chunks pass through in order."""
    gate = asyncio.Event()

    async def source() -> AsyncIterator[str]:
        yield "data: 1\n\n"
        await gate.wait()
        yield "data: 2\n\n"

    seen: list[str] = []
    stream = keep_alive(source(), 0.01)
    async for chunk in stream:
        seen.append(chunk)
        if seen.count(KEEP_ALIVE) == 3:
            gate.set()
    assert seen[0] == "data: 1\n\n" and seen[-1] == "data: 2\n\n"
    assert seen[1:-1] == [KEEP_ALIVE] * 3


def _slow_linus(request: ModelRequest) -> Reply:
    return Reply("after a long think", delay=0.8)


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_quiet_run_is_kept_alive_and_the_official_client_reads_it(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(_slow_linus)})
    gw = await start_gateway(runtime, sse_keep_alive_s=0.1)
    await gw.user("ann")
    gid = await gw.group("ann", ["linus"], "team")
    url = f"{gw.base_url}/api/groups/{gid}/agui"
    ann = {**gw.auth("ann"), "Content-Type": "application/json"}
    async with gw.http.stream("POST", url, content=_body(runId="quiet-1"), headers=ann) as raw:
        body = "".join([chunk async for chunk in raw.aiter_text()])
    assert body.count(KEEP_ALIVE) >= 3, body[:500]
    assert body.index("RUN_STARTED") < body.index(KEEP_ALIVE) < body.index("RUN_FINISHED")
    # The official client skips the comments and verifies the run as usual.
    lines = await _client(url, gw.tokens["ann"], "@linus still there?", "quiet-2")
    text = "".join(e["delta"] for e in lines[:-1] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "after a long think" and lines[-1]["done"] is True


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_a_hand_off_joins_the_run_and_a_refused_one_ends_it(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(steve_names_linus)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    gid = await gw.group("ann", ["steve", "linus"], "team")
    url = f"{gw.base_url}/api/groups/{gid}/agui"

    lines = await _client(url, gw.tokens["ann"], "@steve who knows?", "hand-1")
    events = lines[:-1]
    steps = [e["stepName"] for e in events if e["type"] == "STEP_FINISHED"]
    assert steps == ["steve", "linus"]
    names = {e["messageId"]: e["name"] for e in events if e["type"] == "TEXT_MESSAGE_START"}
    said = {name: "" for name in names.values()}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            said[names[e["messageId"]]] += e["delta"]
    assert said == {"steve": "over to @linus for the details", "linus": "linus has the details"}
    assert [t["vpId"] for t in events[-1]["result"]["turns"]] == ["steve", "linus"]

    # Replies may not dispatch in this group: the run ends with Steve's turn, without a wait.
    off = await gw.http.patch(
        f"/api/groups/{gid}/settings",
        json={"settings": {"vpMentionsDispatch": False}},
        headers=gw.auth("ann"),
    )
    assert off.status_code == 200, off.text
    started = asyncio.get_running_loop().time()
    lines = await _client(url, gw.tokens["ann"], "@steve who knows now?", "hand-2")
    assert asyncio.get_running_loop().time() - started < ROUTING_WAIT_S / 2
    assert [t["vpId"] for t in lines[-2]["result"]["turns"]] == ["steve"]
