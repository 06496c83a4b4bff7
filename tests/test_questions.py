"""Questions a VP asks with the ``ask_user`` tool: several choices at once, and answers checked.

The rules first (the tool's arguments, which answers fit a question, how a
terminal reads a typed answer), then the whole path on real Ray: a scripted
VP asks a multi-select question over a real WebSocket, a wrong answer is a
typed error that leaves the question open, the list comes back to the VP as
its tool's result; and the same through the terminal client.
"""

from __future__ import annotations

import asyncio
import io
import json
import queue

import pytest

from actors.questions import Form, check_answer
from actors.vp_commands import AnswerVerdict
from engine.messages import ToolCall
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from engine.tools.builtin import builtin_tools
from engine.tools.registry import ToolContext, ToolRegistry
from gateway.chat_client import ChatClient
from gateway.chat_screen import question_line, typed_answer
from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result
from tests.test_cli_server import eventually

COLOURS = ["red", "green", "blue"]


# -- the rules -------------------------------------------------------------------
async def test_the_tool_takes_multiselect_and_allowother_and_needs_choices_for_several() -> None:
    asked: list[tuple[str, list[str] | None, dict[str, bool]]] = []

    async def ask(question: str, choices: list[str] | None, **form: bool) -> list[str]:
        asked.append((question, choices, form))
        return ["red", "blue, dark"]

    reg = ToolRegistry(builtin_tools())
    schema = next(s for s in reg.specs(ToolContext("c")) if s.name == "ask_user").parameters
    assert schema["properties"]["multiSelect"]["type"] == "boolean"
    assert schema["properties"]["allowOther"]["type"] == "boolean"
    ctx = ToolContext("c", ask_user=ask)
    args = {"question": "which?", "choices": COLOURS, "multiSelect": True, "allowOther": True}
    out = await reg.execute(ToolCall(id="1", name="ask_user", arguments=args), ctx)
    # The list goes back as JSON: a choice with a comma in it stays one choice.
    assert not out.is_error and json.loads(out.content) == ["red", "blue, dark"]
    assert asked == [("which?", COLOURS, {"multi_select": True, "allow_other": True})]
    bare = {"question": "which?", "multiSelect": True}
    refused = await reg.execute(ToolCall(id="2", name="ask_user", arguments=bare), ctx)
    assert refused.is_error and "multiSelect needs choices" in refused.content


@pytest.mark.parametrize(
    ("form", "answer", "verdict"),
    [
        (Form(), "anything at all", AnswerVerdict.TAKEN),
        (Form(), "  ", AnswerVerdict.EMPTY),
        (Form(tuple(COLOURS)), "green", AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS)), " Green ", AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS)), "purple", AnswerVerdict.NOT_A_CHOICE),
        (Form(tuple(COLOURS)), ("red", "blue"), AnswerVerdict.ONE_ONLY),
        (Form(tuple(COLOURS)), ("red",), AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS), allow_other=True), "purple", AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS), multi_select=True), ("red", "blue"), AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS), multi_select=True), "red", AnswerVerdict.TAKEN),
        (Form(tuple(COLOURS), multi_select=True), (), AnswerVerdict.EMPTY),
        (Form(tuple(COLOURS), multi_select=True), ("red", "teal"), AnswerVerdict.NOT_A_CHOICE),
        (Form(tuple(COLOURS), True, True), ("red", "teal"), AnswerVerdict.TAKEN),
    ],
)
def test_an_answer_fits_its_question_or_is_refused_saying_why(
    form: Form, answer: str | tuple[str, ...], verdict: AnswerVerdict
) -> None:
    receipt = check_answer(form, answer)
    assert receipt.verdict is verdict and bool(receipt) is (verdict is AnswerVerdict.TAKEN)
    if verdict is AnswerVerdict.NOT_A_CHOICE:
        assert "is not a choice" in receipt.reason and "red, green, blue" in receipt.reason


def test_a_terminal_answer_takes_numbers_for_choices() -> None:
    assert typed_answer(" 2", COLOURS, multi_select=False) == "green"
    assert typed_answer("blue", COLOURS, multi_select=False) == "blue"
    assert typed_answer("1, 3", COLOURS, multi_select=True) == ["red", "blue"]
    assert typed_answer("1,teal,", COLOURS, multi_select=True) == ["red", "teal"]
    assert typed_answer("9", COLOURS, multi_select=False) == "9"  # no such choice: as typed
    line = question_line(
        {"vpId": "linus", "prompt": "Which?", "choices": COLOURS, "multiSelect": True}
    )
    assert line == "? linus asks: Which?  1) red  2) green  3) blue — pick one or more: /answer 1,3"


# -- over a real WebSocket, on real Ray ------------------------------------------
def asks_for_colours(request: ModelRequest) -> Reply:
    """Asks which colours (several) when told "colours", which one when told "one"."""
    if last_is_tool_result(request):
        return Reply(f"You picked {request.messages[-1].content}.")
    said = next(m.content for m in reversed(request.messages) if m.role == "user")
    several = "colours" in str(said)
    question = {"question": "Which colours?", "choices": COLOURS, "multiSelect": several}
    return Reply(tool_calls=[("ask_user", question)])


async def _group(start_gateway: StartGateway, make_runtime: MakeRuntime) -> tuple[str, WsClient]:
    gw = await start_gateway(
        make_runtime(provider_overrides={"offline": ScriptedModel(asks_for_colours)})
    )
    await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "paint", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    gid = str(made.json()["id"])
    ws = await WsClient.open(gw, "ann")
    assert (await ws.request({"type": "subscribe", "groupId": gid}))["action"] == "subscribed"
    return gid, ws


def _reply(frame: dict[str, object]) -> bool:
    data = frame.get("data")
    return (
        frame.get("type") == "yeaft_output"
        and isinstance(data, dict)
        and (data.get("type") == "result")
    )


async def test_a_multi_select_question_is_answered_with_a_list_and_checked(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gid, ws = await _group(start_gateway, make_runtime)
    await ws.send({"type": "yeaft_session_chat", "groupId": gid, "text": "@linus colours?"})
    question = await ws.seen(lambda f: f["type"] == "ask_user_question")
    assert question["multiSelect"] is True and question["choices"] == COLOURS
    assert question["allowOther"] is False and question["vpId"] == "linus"
    answer = {"type": "ask_user_answer", "groupId": gid, "requestId": question["requestId"]}

    # What is not a choice is refused, naming the field and the choices; the question stays.
    wrong = await ws.request({**answer, "answer": ["red", "purple"]})
    assert wrong["type"] == "error" and wrong["code"] == "invalid_frame"
    assert wrong["field"] == "answer" and wrong["requestId"] == question["requestId"]
    assert wrong["detail"] == {"reason": "not_a_choice", "choices": COLOURS}
    assert "'purple' is not a choice" in wrong["message"]
    empty = await ws.request({**answer, "answer": []})
    assert empty["code"] == "invalid_frame" and empty["detail"]["reason"] == "empty"

    await ws.send({**answer, "answer": ["red", "blue"]})
    result = await ws.seen(_reply)
    stored = await ws.seen(lambda f: f["type"] == "yeaft_output" and f["data"]["type"] == "user")
    assert json.loads(stored["data"]["message"]["content"][0]["content"]) == ["red", "blue"]
    assert not result["data"]["is_error"]
    # Answered: the same question takes no second answer.
    again = await ws.request({**answer, "answer": ["green"]})
    assert again["code"] == "not_found" and again["field"] == "requestId"
    await ws.close()


async def test_a_single_choice_question_takes_one_of_its_choices(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gid, ws = await _group(start_gateway, make_runtime)
    await ws.send({"type": "yeaft_session_chat", "groupId": gid, "text": "@linus one?"})
    question = await ws.seen(lambda f: f["type"] == "ask_user_question")
    assert question["multiSelect"] is False
    answer = {"type": "ask_user_answer", "groupId": gid, "requestId": question["requestId"]}
    two = await ws.request({**answer, "answer": ["red", "blue"]})
    assert two["code"] == "invalid_frame" and two["detail"]["reason"] == "one_only"
    other = await ws.request({**answer, "answer": "purple"})
    assert other["detail"]["reason"] == "not_a_choice"
    await ws.send({**answer, "answer": "Green"})
    stored = await ws.seen(lambda f: f["type"] == "yeaft_output" and f["data"]["type"] == "user")
    # The choice in its own spelling reaches the VP.
    assert stored["data"]["message"]["content"][0]["content"] == "green"
    await ws.close()


async def test_the_terminal_client_answers_a_multi_select_question_by_numbers(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await start_gateway(
        make_runtime(provider_overrides={"offline": ScriptedModel(asks_for_colours)})
    )
    token = await gw.user("ann")
    await gw.http.post(
        "/api/groups", json={"name": "paint", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "paint", out=out, prompt=True)
    task = asyncio.create_task(client.run(read_line=lines.get))
    await eventually(lambda: "paint> " in out.getvalue())
    lines.put("@linus colours?\n")
    await eventually(lambda: "pick one or more: /answer 1,3" in out.getvalue())
    assert "1) red  2) green  3) blue" in out.getvalue()
    # A stray answer is refused by the server; the question is still there to answer.
    lines.put("/answer 1, purple\n")
    await eventually(lambda: "'purple' is not a choice" in out.getvalue())
    lines.put("/answer 1,3\n")
    await eventually(lambda: 'You picked ["red", "blue"].' in out.getvalue())
    lines.put("/quit\n")
    assert await asyncio.wait_for(task, 20) == 0
