"""A group's turn at its limits, on real Ray and the real OpenAI SDK against the fake server.

A conversation that overflows while its compaction's summary call fails ends
in a readable error that says what to do; a tool budget spent without an
answer ends ``error_max_turns``; every turn opens with ``system`` ``init``;
the compaction's failure is a ``system`` ``error`` inside the turn.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from coordinator.commands import Ingest, WaitIdle
from coordinator.runtime import Runtime
from tests.fixtures.llm_server import FakeLLM, Reply, ScriptedToolCall
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, results


def _engine(fake: FakeLLM, **kw: Any) -> dict[str, Any]:
    return {
        "model": "openai:primary",
        "openai_api_key": SecretStr("sk-test"),
        "openai_base_url": fake.openai_base_url,
        "max_retries": 1,
        "retry_base_delay": 0.01,
        "retry_max_delay": 0.05,
        "retry_jitter": 0.0,
        **kw,
    }


async def _ask(rt: Runtime, group_id: str, text: str, cmid: str) -> None:
    await rt.send(Ingest(group_id, "ann", text, client_message_id=cmid))
    assert await rt.send(WaitIdle(group_id, 60)), "a turn hung"


def _system(events: list[dict[str, Any]], subtype: str) -> list[dict[str, Any]]:
    return [
        env
        for env in events
        if env.get("type") == "yeaft_output"
        and env["data"].get("type") == "system"
        and env["data"].get("subtype") == subtype
    ]


async def test_an_overflow_whose_summary_fails_ends_in_a_readable_error(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    rt = make_runtime(engine=_engine(fake_llm))
    group = await rt.create_group("solo", ["steve"], members=["ann"])
    fake_llm.text("first answer")
    await _ask(rt, group.id, "@steve first question", "c1")
    fake_llm.text("second answer")
    await _ask(rt, group.id, "@steve second question", "c2")

    # The third turn overflows; both tries of the summary call fail; the
    # model still finds the prompt too long after that.
    fake_llm.context_overflow()
    fake_llm.push(Reply(status=500, error_message="summary exploded"))
    fake_llm.push(Reply(status=500, error_message="summary exploded"))
    fake_llm.default = Reply(status=400, context_overflow=True)
    await _ask(rt, group.id, "@steve third question", "c3")

    events = await all_events(rt, group.id)
    last = results(events)["steve"][-1]
    assert last["is_error"] and last["error_kind"] == "context_overflow", last
    assert "All models failed" not in last["error"]
    assert "summary exploded" not in last["error"]
    assert "summarising older turns failed (server_error)" in last["error"]
    assert "Start a new conversation" in last["error"]
    [failed] = [e for e in _system(events, "error") if e["turnId"] == _turn_of(events, last)]
    assert failed["data"]["detail"]["stage"] == "compaction"
    # No loop: the overflow and two summary tries; with no large tool result
    # to shorten, nothing else could make room, so the model is not asked again.
    assert len(fake_llm.requests) == 2 + 3


def _turn_of(events: list[dict[str, Any]], result: dict[str, Any]) -> str:
    for env in events:
        if env.get("type") == "yeaft_output" and env["data"] is result:
            return str(env["turnId"])
    raise AssertionError("result not found")


async def test_a_spent_tool_budget_without_an_answer_is_error_max_turns_and_turns_open_with_init(
    make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    rt = make_runtime(engine=_engine(fake_llm, max_tool_iterations=1))
    group = await rt.create_group("solo", ["steve"], members=["ann"])
    fake_llm.tool_calls(ScriptedToolCall("rethink", {"reason": "look again"}))
    fake_llm.text("")  # the final, tool-less call says nothing

    await _ask(rt, group.id, "@steve dig into this", "c1")

    events = await all_events(rt, group.id)
    [result] = results(events)["steve"]
    assert result["subtype"] == "error_max_turns" and result["is_error"], result
    assert result["error_kind"] == "max_turns"
    assert "tool budget" in result["error"]
    [init] = _system(events, "init")
    assert init["vpId"] == "steve"
    assert init["data"]["model"] == "openai:primary"
    assert "rethink" in init["data"]["tools"]
    assert init["data"]["session_id"]
    turn_frames = [e for e in events if e.get("turnId") == init["turnId"]]
    outputs = [e for e in turn_frames if e.get("type") == "yeaft_output"]
    assert outputs[0] is init  # the first output of the turn
