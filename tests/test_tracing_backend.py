"""One person's message is one trace across processes, read back from a real trace backend.

The gateway (this process), the coordinator shard and the VP hosts (Ray
actor processes) each send their spans over OTLP/HTTP to Arize Phoenix
(``tests/fixtures/phoenix.py``); the test reads them back through
Phoenix's REST API and checks the trace's shape: the parent links that
cross each process, and the GenAI attributes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from coordinator.commands import TeamIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from telemetry.config import TracingConfig
from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.phoenix import Phoenix
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER, last_is_tool_result
from tests.test_team_mode import team_model

# Slow: the session's first trace test starts Phoenix (10-20 s). Processes of
# their own: the session's shared ones never record spans.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.own_processes,
    pytest.mark.parametrize("store_factory", ["embedded"], indirect=True),
]


def steve_thinks_linus_answers(request: ModelRequest) -> Reply:
    """steve calls a tool, then answers; linus answers at once."""
    if request.context.speaker_id == "steve" and not last_is_tool_result(request):
        return Reply(tool_calls=[("rethink", {"reason": "check the plan"})])
    return Reply(f"{request.context.speaker_id} says ok")


def _flat(attributes: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Phoenix may answer dotted attribute names as nested objects: one flat dict."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


async def _spans_when(
    phoenix: Phoenix, project: str, names: set[str], within: float = 60.0
) -> list[dict[str, Any]]:
    """The project's spans once every name in ``names`` is among them."""
    deadline = time.monotonic() + within
    while True:
        spans = await asyncio.to_thread(phoenix.spans, project)
        if names <= {s["name"] for s in spans}:
            return spans
        if time.monotonic() > deadline:
            raise AssertionError(f"spans seen: {sorted(s['name'] for s in spans)}")
        # Spans leave each process in batches (0.1 s here); Phoenix is asked again.
        await asyncio.sleep(0.2)


async def test_a_message_to_two_vps_is_one_trace_across_every_process(
    start_gateway: StartGateway, make_runtime: MakeRuntime, phoenix: Phoenix
) -> None:
    project = f"yeaft-test-{uuid.uuid4().hex[:8]}"
    tracing_config = TracingConfig(
        endpoint=phoenix.otlp_endpoint,
        service_name="yeaft",
        resource={"openinference.project.name": project},
        export_delay_s=0.1,
    )
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(steve_thinks_linus_answers)},
        tracing=tracing_config,
    )
    gw = await start_gateway(runtime)
    await gw.user("ann")
    made = await gw.http.post(
        "/api/groups",
        json={"name": "team", "roster": ["steve", "linus"]},
        headers=gw.auth("ann"),
    )
    gid = made.json()["id"]
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await ws.request({"type": "yeaft_session_chat", "groupId": gid, "text": "@steve @linus plan"})
    ended: set[str] = set()
    while ended != {"steve", "linus"}:
        frame = await ws.recv_until(
            lambda f: f.get("type") == "yeaft_output" and f["data"].get("type") == "result"
        )
        ended.add(frame["vpId"])
    await ws.close()

    wanted = {
        "receive_message",
        "ingest",
        "invoke_agent steve",
        "invoke_agent linus",
        "execute_tool rethink",
    }
    spans = await _spans_when(phoenix, project, wanted)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [received] = by_name["receive_message"]
    trace_id = received["context"]["trace_id"]
    # One trace: every span of the message is in it.
    assert {s["context"]["trace_id"] for s in spans} == {trace_id}
    ids = {s["context"]["span_id"]: s for s in spans}

    def parent(span: dict[str, Any]) -> dict[str, Any]:
        return ids[span["parent_id"]]

    assert received["parent_id"] is None
    [ingest] = by_name["ingest"]
    assert parent(ingest) is received
    route = next(e for e in ingest["events"] if e["name"] == "route")
    assert sorted(_flat(route["attributes"])["yeaft.targets"]) == ["linus", "steve"]
    guards = [_flat(e["attributes"]) for e in ingest["events"] if e["name"] == "loop_guard"]
    assert {g["yeaft.vp.id"] for g in guards} == {"steve", "linus"}
    assert all(g["yeaft.admitted"] for g in guards)

    for vp in ("steve", "linus"):
        [turn] = by_name[f"invoke_agent {vp}"]
        assert parent(turn) is ingest
        attrs = _flat(turn["attributes"])
        assert attrs["gen_ai.operation.name"] == "invoke_agent"
        assert attrs["gen_ai.agent.id"] == vp and attrs["gen_ai.conversation.id"] == gid
        chats = [s for s in spans if s["name"].startswith("chat ") and parent(s) is turn]
        assert chats, f"no chat span under {vp}'s turn"
        chat = _flat(chats[-1]["attributes"])
        assert chat["gen_ai.operation.name"] == "chat"
        assert chat["gen_ai.provider.name"] == "offline"
        assert chat["gen_ai.usage.output_tokens"] > 0
        assert chat["yeaft.attempt"] == 1 and chat["yeaft.fallback"] == 0
    [tool] = by_name["execute_tool rethink"]
    assert parent(tool)["name"] == "invoke_agent steve"
    assert _flat(tool["attributes"])["gen_ai.tool.name"] == "rethink"
    # No message text without the setting that allows it.
    assert "yeaft.message.text" not in _flat(received["attributes"])


async def test_a_team_task_traces_each_node_as_a_child_span(
    start_gateway: StartGateway, make_runtime: MakeRuntime, phoenix: Phoenix
) -> None:
    project = f"yeaft-test-{uuid.uuid4().hex[:8]}"
    runtime = make_runtime(
        provider_overrides={"offline": ScriptedModel(team_model)},
        tracing=TracingConfig(
            endpoint=phoenix.otlp_endpoint,
            resource={"openinference.project.name": project},
            export_delay_s=0.1,
        ),
    )
    gw = await start_gateway(runtime)
    await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "launch", "roster": ROSTER}, headers=gw.auth("ann")
    )
    gid = made.json()["id"]
    ws = await WsClient.open(gw, "ann")
    ack = await ws.request({"type": "yeaft_session_chat", "groupId": gid, "text": "/task plan"})
    assert ack["type"] == "ack", ack
    await gw.runtime.send(TeamIdle(gid))
    await ws.close()
    nodes = {"team_node market", "team_node tech", "team_node message", "team_node synthesis"}
    spans = await _spans_when(phoenix, project, {"team_task", *nodes})
    ids = {s["context"]["span_id"]: s for s in spans}
    [task] = [s for s in spans if s["name"] == "team_task"]
    [received] = [s for s in spans if s["name"] == "receive_message"]
    assert {s["context"]["trace_id"] for s in spans} == {received["context"]["trace_id"]}
    for node in (s for s in spans if s["name"] in nodes):
        assert ids[node["parent_id"]] is task
        [turn] = [s for s in spans if s["parent_id"] == node["context"]["span_id"]]
        assert turn["name"].startswith("invoke_agent ")
        assert _flat(turn["attributes"])["yeaft.team.node"] == node["name"].split()[1]
