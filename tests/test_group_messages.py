"""Messages in the event log: every member sees a message before the replies to it.

End to end on a real local Ray cluster, against both stores: a person's
message and a ``route_forward`` hand-off each become one ``group_message``
frame ahead of the turns they cause; every turn's statuses name the message
it answers (``triggerId``) and its result the reply it stored.
"""

from __future__ import annotations

from typing import Any

from coordinator.commands import Ingest, WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import all_events, steve_forwards_to_linus


def steve_mentions_linus(request: ModelRequest) -> Reply:
    """Steve hands over by naming Linus in his reply; Linus answers plainly."""
    if request.context.speaker_id == "steve":
        return Reply("@linus over to you")
    return Reply("done")


def _index(events: list[dict[str, Any]], pred: Any) -> int:
    return next(i for i, e in enumerate(events) if pred(e))


def _turn_of(events: list[dict[str, Any]], vp: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("vpId") == vp]


def _result(events: list[dict[str, Any]], vp: str) -> dict[str, Any]:
    (result,) = [
        e["data"]
        for e in _turn_of(events, vp)
        if e["type"] == "yeaft_output" and e["data"]["type"] == "result"
    ]
    return result


async def test_a_persons_message_comes_first_and_once(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ["steve", "linus"], members=["ann", "bob"])
    first = await rt.send(Ingest(group.id, "ann", "@linus ready?", client_message_id="c-1"))
    again = await rt.send(Ingest(group.id, "ann", "@linus ready?", client_message_id="c-1"))
    assert again.duplicate
    assert await rt.send(WaitIdle(group.id))
    events = await all_events(rt, group.id)
    messages = [e for e in events if e["type"] == "group_message"]
    # The repeat is stored once, so it is shown once.
    assert len(messages) == 1
    (said,) = messages
    assert events[0] is said and said["seq"] == 1
    assert (said["messageId"], said["author"], said["role"]) == (first.message_id, "ann", "user")
    assert (said["text"], said["mentions"], said["clientMessageId"]) == (
        "@linus ready?",
        ["linus"],
        "c-1",
    )
    assert said["chainId"] == first.message_id and "handoff" not in said
    statuses = [e for e in _turn_of(events, "linus") if e["type"] == "agent_status"]
    assert statuses and {s["triggerId"] for s in statuses} == {first.message_id}
    (reply,) = [m for m in await (await rt.store()).read_messages(group.id) if m.author == "linus"]
    assert _result(events, "linus")["message_id"] == reply.id


async def test_a_forward_is_shown_before_the_turn_it_starts(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(steve_forwards_to_linus)})
    group = await rt.create_group("team", ["steve", "linus"])
    out = await rt.send(Ingest(group.id, "ann", "@steve take this"))
    assert await rt.send(WaitIdle(group.id))
    events = await all_events(rt, group.id)
    person, forward = [e for e in events if e["type"] == "group_message"]
    assert person["messageId"] == out.message_id
    assert forward["handoff"] == {
        "from": "steve",
        "to": "linus",
        "via": "route_forward",
    }
    assert (forward["author"], forward["role"], forward["text"]) == (
        "steve",
        "assistant",
        "please take it",
    )
    assert forward["causedBy"] == [out.message_id] and forward["chainId"] == out.message_id
    # In order: the person's message, steve's turn up to the hand-off, the
    # hand-off, and only then anything of linus's turn.
    at = events.index(forward)
    assert events.index(person) < _index(events, lambda e: e.get("vpId") == "steve") < at
    assert at < _index(events, lambda e: e.get("vpId") == "linus")
    linus = _turn_of(events, "linus")
    assert {e["triggerId"] for e in linus if e["type"] == "agent_status"} == {forward["messageId"]}
    # The hand-off is in the group log under the same id, for a reload.
    stored = await (await rt.store()).get_message(group.id, forward["messageId"])
    assert stored is not None and stored.meta["injectedBy"] == "route_forward"


async def test_a_reply_that_mentions_a_vp_threads_its_turn(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(steve_mentions_linus)})
    group = await rt.create_group("team", ["steve", "linus"])
    out = await rt.send(Ingest(group.id, "ann", "@steve start"))
    assert await rt.send(WaitIdle(group.id))
    events = await all_events(rt, group.id)
    # No frame repeats steve's reply: its text streamed, its result names it.
    assert [e["messageId"] for e in events if e["type"] == "group_message"] == [out.message_id]
    reply_id = _result(events, "steve")["message_id"]
    reply = await (await rt.store()).get_message(group.id, reply_id)
    assert reply is not None and reply.mentions == ["linus"]
    steve_end = _index(
        events, lambda e: e.get("vpId") == "steve" and e.get("data", {}).get("type") == "result"
    )
    assert steve_end < _index(events, lambda e: e.get("vpId") == "linus")
    linus = [e for e in _turn_of(events, "linus") if e["type"] == "agent_status"]
    assert {e["triggerId"] for e in linus} == {reply_id}
