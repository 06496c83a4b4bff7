"""Remote A2A agents as VP tools: a real Ray runtime, a real ``a2a-sdk`` agent.

The agent is ``tests/fixtures/a2a_agent.py`` in a subprocess (it wants a
bearer token); the VP's scripted model (``tests.a2a_helpers.asks_the_agent``)
calls ``a2a__<agent>`` and answers with what the call gave back, so each
test reads the model's view in the VP's reply and the people's view in the
group's event log: the streamed ``tool_output`` payloads, the question
asked, the result.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.commands import Answer, Ingest, WaitIdle
from coordinator.runtime import Runtime
from engine.a2a import parse_a2a_config
from engine.providers.scripted import ScriptedModel
from engine.tools.approval import DENY
from tests.a2a_helpers import TOKEN, asks_the_agent, serve_agent, silent_agent
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, wait_for_event


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    with serve_agent() as url:
        yield url


def _runtime(make_runtime: MakeRuntime, agents: dict[str, Any], **limits: Any) -> Runtime:
    a2a = parse_a2a_config({"a2aAgents": agents}, **limits)
    return make_runtime(provider_overrides={"offline": ScriptedModel(asks_the_agent)}, a2a=a2a)


async def _reply(rt: Runtime, gid: str) -> str:
    replies = [m.text for m in await (await rt.store()).read_messages(gid) if m.author == "linus"]
    return replies[-1]


def _outputs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["type"] == "yeaft_output" and e["data"].get("subtype") == "tool_output"
    ]


def _blocks(events: list[dict[str, Any]], kind: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for e in events:
        if e["type"] != "yeaft_output" or e["data"].get("type") not in ("assistant", "user"):
            continue
        for block in (e["data"].get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == kind:
                out.append((e["seq"], block))
    return out


async def test_a_vp_calls_an_agent_and_its_answer_streams_as_tool_output(
    make_runtime: MakeRuntime, agent_url: str
) -> None:
    rt = _runtime(make_runtime, {"lib": {"url": agent_url, "token": TOKEN}})
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus ask:lib actor papers !approve a2a__lib"))
    assert await rt.send(WaitIdle(group.id))

    reply = await _reply(rt, group.id)
    result, _, described = reply.partition(" || description: ")
    # The model reads the whole answer; the token was sent (the agent wants it).
    assert result == "result: searching\nfound 3 papers\ndone: actor papers"
    # By the second step the card is in: the tool is described by its skills.
    assert "[A2A lib]" in described and "Librarian" in described
    assert "Search papers: Searches the archive" in described and "Cite" in described

    events = await all_events(rt, group.id)
    [(use_seq, use)] = _blocks(events, "tool_use")
    [(result_seq, done)] = _blocks(events, "tool_result")
    assert use["name"] == "a2a__lib" and use["input"] == {"message": "actor papers"}
    outputs = _outputs(events)
    # Each chunk went out as it came, under its call, before the result.
    assert [o["data"]["message"] for o in outputs] == [
        "searching\n",
        "found 3 papers\n",
        "done: actor papers\n",
    ]
    assert all(
        o["data"]["detail"] == {"tool_use_id": use["id"], "name": "a2a__lib"} for o in outputs
    )
    assert all(use_seq < o["seq"] < result_seq for o in outputs)
    assert done["tool_use_id"] == use["id"] and not done["is_error"]
    assert TOKEN not in str(events)


async def test_a_call_asks_first_and_a_denial_reaches_the_model(
    make_runtime: MakeRuntime, agent_url: str
) -> None:
    rt = _runtime(make_runtime, {"lib": {"url": agent_url, "token": TOKEN}})
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus ask:lib actor papers"))
    question = await wait_for_event(rt, group.id, lambda e: e["type"] == "ask_user_question")
    assert question["tool"] == {"name": "a2a__lib", "arguments": '{"message": "actor papers"}'}
    assert await rt.send(Answer(group.id, question["requestId"], DENY))
    assert await rt.send(WaitIdle(group.id))
    reply = await _reply(rt, group.id)
    assert reply.startswith("result: a2a__lib was not run: a person of the group denied it")
    # Nothing reached the agent, so nothing streamed.
    assert _outputs(await all_events(rt, group.id)) == []


async def test_a_failed_task_and_refused_credentials_are_readable_tool_errors(
    make_runtime: MakeRuntime, agent_url: str
) -> None:
    wrong = "wrong-token-9876543210"
    rt = _runtime(
        make_runtime,
        {"lib": {"url": agent_url, "token": TOKEN}, "stranger": {"url": agent_url, "token": wrong}},
    )
    group = await rt.create_group("team", ["linus"])
    await rt.send(Ingest(group.id, "ann", "@linus ask:lib fail !approve all"))
    assert await rt.send(WaitIdle(group.id))
    failed = await _reply(rt, group.id)
    assert failed.startswith(
        "result: A2A agent 'lib' reported the task failed: the archive is closed today"
    )

    await rt.send(Ingest(group.id, "ann", "@linus ask:stranger hello !approve all"))
    assert await rt.send(WaitIdle(group.id))
    refused = await _reply(rt, group.id)
    assert refused.startswith("result: A2A agent 'stranger' failed: HTTP Error 401")
    assert "refused its credentials" in refused

    events = await all_events(rt, group.id)
    results = [block for _, block in _blocks(events, "tool_result")]
    assert [r["is_error"] for r in results] == [True, True]
    assert wrong not in str(events) and TOKEN not in str(events)
    # Both turns ended normally: the failures were the tools', not the turns'.
    ends = [e["data"] for e in events if e["type"] == "yeaft_output"]
    assert [d["is_error"] for d in ends if d.get("type") == "result"] == [False, False]


async def test_an_agent_that_never_answers_stalls_no_turn_that_does_not_call_it(
    make_runtime: MakeRuntime,
) -> None:
    with silent_agent() as url:
        rt = _runtime(make_runtime, {"mute": {"url": url}}, card_timeout_s=2.0)
        group = await rt.create_group("team", ["linus"])
        began = time.monotonic()
        await rt.send(Ingest(group.id, "ann", "@linus just talk"))
        assert await rt.send(WaitIdle(group.id))
        quiet = time.monotonic() - began
        # Offered (its card being read in the background), and waited for by nobody.
        assert await _reply(rt, group.id) == "no call; a2a tools: a2a__mute"
        assert quiet < 1.5, quiet

        await rt.send(Ingest(group.id, "ann", "@linus ask:mute hello !approve all"))
        assert await rt.send(WaitIdle(group.id))
        reply = await _reply(rt, group.id)
    assert reply.startswith("result: A2A agent 'mute' is unavailable: its card did not come")
    assert "[A2A mute]" in reply and "unavailable now" in reply
