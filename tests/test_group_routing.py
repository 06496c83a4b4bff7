"""One routing rule set on a real Ray cluster: forwards, replies that mention, answers.

Every path that reaches a VP (a person's message, a VP's reply that
``@mentions``, ``route_forward``) goes through the same selection rules and
carries the whole origin of the turn that caused it, the person included.
"""

from __future__ import annotations

from actors.turns import new_question_id, question_vp
from coordinator.commands import Answer, Ingest, WaitIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from store.memory import user_scope
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import (
    ROSTER,
    all_events,
    last_is_tool_result,
    notices,
    results,
)


def steve_forwards_linus_remembers(request: ModelRequest) -> Reply:
    """steve hands the work to linus; linus keeps a note in the person's own memory."""
    me = request.context.speaker_id
    if last_is_tool_result(request):
        return Reply("done")
    if me == "steve":
        return Reply(tool_calls=[("route_forward", {"to": "linus", "text": "note her choice"})])
    return Reply(
        tool_calls=[("remember", {"text": "ann prefers tabs over spaces", "scope": "user"})]
    )


async def test_a_forwarded_turn_acts_for_the_person_who_started_the_chain(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(steve_forwards_linus_remembers)})
    group = await rt.create_group("team", ["steve", "linus"])
    await rt.send(Ingest(group.id, "ann", "@steve tabs, please"))
    assert await rt.send(WaitIdle(group.id))
    tool_results = [
        block
        for env in await all_events(rt, group.id)
        if env["type"] == "yeaft_output"
        and env["vpId"] == "linus"
        and env["data"]["type"] == "user"
        for block in env["data"]["message"]["content"]
    ]
    assert tool_results and not any(b["is_error"] for b in tool_results), tool_results
    memory = rt.config.open_memory()
    try:
        items = await memory.list(user_scope("ann"))
    finally:
        await memory.close()
    assert [i.text for i in items] == ["ann prefers tabs over spaces"]


def steve_calls_everyone(request: ModelRequest) -> Reply:
    if request.context.speaker_id == "steve":
        return Reply("@all what do you think? and @nobody too")
    return Reply(f"{request.context.speaker_id} agrees")


async def test_all_in_a_vp_reply_reaches_everyone_else(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(steve_calls_everyone)})
    group = await rt.create_group("team", ROSTER)
    await rt.send(Ingest(group.id, "ann", "@steve start the round"))
    assert await rt.send(WaitIdle(group.id))
    events = await all_events(rt, group.id)
    assert sorted(results(events)) == sorted(ROSTER)
    log = await (await rt.store()).read_messages(group.id)
    (reply,) = [m for m in log if m.author == "steve"]
    assert reply.mentions == ["linus", "martin"]
    # An unknown name in a VP's reply is reported like one in a person's message.
    unknown = [n for n in notices(events) if n["detail"]["rule"] == "unknown_mentions"]
    assert [n["detail"]["unknown"] for n in unknown] == [["nobody"]]


async def test_an_answer_reaches_only_the_vp_that_asked(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ["steve", "linus"])
    # Ids that name no VP of the group, or no VP at all, are not delivered anywhere.
    assert not await rt.send(Answer(group.id, new_question_id("martin"), "red"))
    assert not await rt.send(Answer(group.id, "ask_not-a-question", "red"))
    assert not await rt.send(
        Answer(group.id, new_question_id("linus"), "red")
    )  # linus asked nothing


def test_question_ids_name_their_vp() -> None:
    for vp in ("steve", "vp_with_underscores", "dash-ed"):
        assert question_vp(new_question_id(vp)) == vp
    assert question_vp("ask_123") is None
    assert question_vp("anything-else") is None
