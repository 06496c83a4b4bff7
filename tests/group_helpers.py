"""Helpers for group-chat tests on a real Ray cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.vp_host import VPHost
from coordinator.runtime import Runtime
from coordinator.vps import host_names
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply
from protocol import parse_server_frame

ROSTER = ["steve", "linus", "martin"]


async def host_of(runtime: Runtime, vp_id: str) -> ActorHandle[VPHost]:
    """The running host actor of ``vp_id`` (a pooled one as the store placed it)."""
    (name,) = await host_names(runtime.config, await runtime.store(), [vp_id])
    handle: ActorHandle[VPHost] = ray.get_actor(name, namespace=runtime.config.namespace)
    return handle


async def all_events(runtime: Runtime, group_id: str) -> list[dict[str, Any]]:
    """Every envelope of a group's event log; each must be a valid server frame."""
    store = await runtime.store()
    batch = await store.read_events(group_id, 0, limit=100_000)
    for event in batch.events:
        parse_server_frame(event.text)  # raises ProtocolError naming the bad field
    return [event.envelope() for event in batch.events]


async def wait_for_event(
    runtime: Runtime, group_id: str, pred: Callable[[dict[str, Any]], bool], timeout_s: float = 30
) -> dict[str, Any]:
    """Block on the event log until an envelope matches ``pred``."""
    store = await runtime.store()
    seq = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (remaining := deadline - loop.time()) > 0:
        batch = await store.read_events(group_id, seq, wait=min(remaining, 5.0))
        for event in batch.events:
            seq = event.seq
            envelope = event.envelope()
            if pred(envelope):
                return envelope
    raise AssertionError("no matching event before the timeout")


def results(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The ``result`` payloads per VP."""
    out: dict[str, list[dict[str, Any]]] = {}
    for env in events:
        if env.get("type") == "yeaft_output" and env["data"].get("type") == "result":
            out.setdefault(env["vpId"], []).append(env["data"])
    return out


def notices(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``system`` payloads of the log but each turn's ``init``."""
    return [
        env["data"]
        for env in events
        if env.get("type") == "yeaft_output"
        and env["data"].get("type") == "system"
        and env["data"].get("subtype") != "init"
    ]


def last_is_tool_result(request: ModelRequest) -> bool:
    return bool(request.messages) and request.messages[-1].role == "tool"


def mention_the_other(request: ModelRequest) -> Reply:
    """A model that always hands the conversation to the other VP."""
    other = "linus" if request.context.speaker_id == "steve" else "steve"
    return Reply(f"@{other} what do you think?")


def forward_around(request: ModelRequest) -> Reply:
    """Forward to the next VP of the roster; after a tool result, answer plainly."""
    if last_is_tool_result(request):
        return Reply("understood, stopping here")
    me = request.context.speaker_id
    nxt = ROSTER[(ROSTER.index(me) + 1) % len(ROSTER)]
    return Reply(tool_calls=[("route_forward", {"to": nxt, "text": "over to you", "reason": "r"})])


def steve_names_linus(request: ModelRequest) -> Reply:
    """Steve hands the question to Linus by naming him in his reply; Linus answers."""
    if request.context.speaker_id == "steve":
        return Reply("over to @linus for the details")
    return Reply("linus has the details")


def steve_forwards_to_linus(request: ModelRequest) -> Reply:
    if request.context.speaker_id == "steve" and not last_is_tool_result(request):
        return Reply(tool_calls=[("route_forward", {"to": "linus", "text": "please take it"})])
    return Reply("done")


def ask_then_answer(request: ModelRequest) -> Reply:
    if last_is_tool_result(request):
        return Reply(f"you said: {request.messages[-1].content}")
    return Reply(tool_calls=[("ask_user", {"question": "which colour?", "choices": ["red"]})])


def list_tools(request: ModelRequest) -> Reply:
    """Answers with the names of the tools it was offered."""
    return Reply("tools: " + ",".join(sorted(t.name for t in request.tools)))


def count_what_i_see(request: ModelRequest) -> Reply:
    """Reports which other VPs' messages it can see, and whether any carried tool calls."""
    me = request.context.speaker_id
    others = [m for m in request.messages if m.speaker in ROSTER and m.speaker != me]
    leaked = any(m.tool_calls or m.thinking for m in others)
    text = "seen:" + ",".join(sorted(str(m.speaker) for m in others)) + f" leaked:{leaked}"
    if me == "steve" and not last_is_tool_result(request):
        return Reply(
            text, thinking="private thoughts", tool_calls=[("rethink", {"reason": "double-check"})]
        )
    return Reply(text)
