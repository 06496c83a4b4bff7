"""Approvals in real turns: a local Ray cluster, both stores, a real stdio MCP server.

The VP's (scripted offline) model calls ``fx__echo`` of the fixture server;
MCP tools ask by default, so each turn puts an ``ask_user_question`` with the
tool in the group's event log and waits for a person's choice.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from actors.turns import TurnOrigin, TurnRequest
from coordinator.commands import Answer, EditGroup, Ingest, Regenerate, WaitIdle
from coordinator.membership import GroupEdit
from coordinator.runtime import Runtime
from engine.mcp import parse_mcp_config
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from engine.tools.approval import ALLOW_ONCE, ALWAYS, CHOICES, DENY
from protocol import GroupSettingsPatch
from store.turns import TurnRecord
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, last_is_tool_result, wait_for_event

SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")


def echo_then_report(request: ModelRequest) -> Reply:
    """Calls fx__echo once, then answers with what the call gave back."""
    if last_is_tool_result(request):
        return Reply(f"the tool said: {request.messages[-1].content}")
    return Reply(tool_calls=[("fx__echo", {"text": "ping"})])


def _runtime(make_runtime: MakeRuntime) -> Runtime:
    mcp = parse_mcp_config(
        {"mcpServers": {"fx": {"command": sys.executable, "args": [SERVER, "stdio"]}}}
    )
    return make_runtime(provider_overrides={"offline": ScriptedModel(echo_then_report)}, mcp=mcp)


def _is_question(after: int) -> Any:
    return lambda e: e["type"] == "ask_user_question" and e["seq"] > after


async def _replies(rt: Runtime, gid: str) -> list[str]:
    return [m.text for m in await (await rt.store()).read_messages(gid) if m.author == "linus"]


async def _questions(rt: Runtime, gid: str) -> list[dict[str, Any]]:
    return [e for e in await all_events(rt, gid) if e["type"] == "ask_user_question"]


async def test_allow_once_then_deny(make_runtime: MakeRuntime) -> None:
    rt = _runtime(make_runtime)
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus echo something"))
    question = await wait_for_event(rt, group.id, _is_question(0))
    assert question["tool"] == {"name": "fx__echo", "arguments": '{"text": "ping"}'}
    assert question["choices"] == list(CHOICES) and question["vpId"] == "linus"
    assert await rt.send(Answer(group.id, question["requestId"], ALLOW_ONCE))
    assert await rt.send(WaitIdle(group.id))
    assert (await _replies(rt, group.id))[0].startswith("the tool said: echo from ")

    # Once was once: the next call asks again, and a denial reaches the model.
    await rt.send(Ingest(group.id, "ann", "@linus again"))
    second = await wait_for_event(rt, group.id, _is_question(question["seq"]))
    assert await rt.send(Answer(group.id, second["requestId"], DENY))
    assert await rt.send(WaitIdle(group.id))
    assert (await _replies(rt, group.id))[1] == (
        "the tool said: fx__echo was not run: a person of the group denied it"
    )
    stored = await rt.store()
    assert (await stored.get_group(group.id)).settings.tool_policies == {}  # type: ignore[union-attr]


async def test_always_is_stored_announced_and_not_asked_again(make_runtime: MakeRuntime) -> None:
    rt = _runtime(make_runtime)
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus echo something"))
    question = await wait_for_event(rt, group.id, _is_question(0))
    assert await rt.send(Answer(group.id, question["requestId"], ALWAYS))
    assert await rt.send(WaitIdle(group.id))

    stored = await (await rt.store()).get_group(group.id)
    assert stored is not None and stored.settings.tool_policies == {"fx__echo": "auto"}
    events = await all_events(rt, group.id)
    updates = [e for e in events if e["type"] == "group_update" and e["action"] == "settings"]
    assert updates and updates[-1]["group"]["settings"]["toolPolicies"] == {"fx__echo": "auto"}

    await rt.send(Ingest(group.id, "ann", "@linus once more"))
    assert await rt.send(WaitIdle(group.id))
    assert len(await _questions(rt, group.id)) == 1
    replies = await _replies(rt, group.id)
    assert len(replies) == 2 and all(r.startswith("the tool said: echo from ") for r in replies)


async def test_an_unanswered_question_expires_into_a_denial(make_runtime: MakeRuntime) -> None:
    rt = _runtime(make_runtime)
    group = await rt.create_group("team", ["linus"])
    await rt.send(
        EditGroup(
            group.id, GroupEdit(settings=GroupSettingsPatch.model_validate({"approvalTimeoutS": 1}))
        )
    )
    await rt.send(Ingest(group.id, "ann", "@linus echo something"))
    assert await rt.send(WaitIdle(group.id))
    (reply,) = await _replies(rt, group.id)
    assert reply == (
        "the tool said: fx__echo was not run: nobody approved it before the question expired"
    )
    assert len(await _questions(rt, group.id)) == 1


async def test_marks_auto_approve_and_deny_need_no_question(make_runtime: MakeRuntime) -> None:
    rt = _runtime(make_runtime)
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus echo something !approve fx__echo"))
    assert await rt.send(WaitIdle(group.id))
    await rt.send(
        EditGroup(
            group.id,
            GroupEdit(
                settings=GroupSettingsPatch.model_validate({"toolPolicies": {"fx__*": "deny"}})
            ),
        )
    )
    await rt.send(Ingest(group.id, "ann", "@linus echo !approve all"))
    assert await rt.send(WaitIdle(group.id))
    await rt.send(
        EditGroup(
            group.id,
            GroupEdit(
                settings=GroupSettingsPatch.model_validate(
                    {"toolPolicies": {}, "autoApprove": True}
                )
            ),
        )
    )
    await rt.send(Ingest(group.id, "ann", "@linus echo"))
    assert await rt.send(WaitIdle(group.id))
    first, denied, auto = await _replies(rt, group.id)
    assert first.startswith("the tool said: echo from ")
    assert "approval policy is deny" in denied
    assert auto.startswith("the tool said: echo from ")
    assert await _questions(rt, group.id) == []


def test_a_turn_record_keeps_the_approvals_of_its_origin() -> None:
    # A turn run again after a restart is rebuilt from its record: the marks go with it.
    origin = TurnOrigin("m2", "m1", ("m1",), "ann", ("fx__echo",))
    request = TurnRequest("g", "linus", TurnRequest.new_turn_id("linus"), origin)
    stored = TurnRecord.model_validate_json(request.record().static_json())
    assert TurnOrigin.of_record(stored) == origin


async def test_marks_hold_again_when_their_author_regenerates_and_for_nobody_else(
    make_runtime: MakeRuntime,
) -> None:
    rt = _runtime(make_runtime)
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus echo something !approve fx__echo"))
    assert await rt.send(WaitIdle(group.id))
    store = await rt.store()
    [first] = [m for m in await store.read_messages(group.id) if m.author == "linus"]
    await rt.send(Regenerate(group.id, first.id, "ann"))
    assert await rt.send(WaitIdle(group.id))
    assert await _questions(rt, group.id) == []

    # Someone else asking again does not borrow ann's approval: the tool asks.
    second = [m for m in await store.read_messages(group.id) if m.author == "linus"][-1]
    await rt.send(Regenerate(group.id, second.id, "bob"))
    question = await wait_for_event(rt, group.id, _is_question(0))
    assert await rt.send(Answer(group.id, question["requestId"], DENY))
    assert await rt.send(WaitIdle(group.id))
    replies = await _replies(rt, group.id)
    assert [r.startswith("the tool said: echo from ") for r in replies] == [True, True, False]
    assert "denied" in replies[2]
