"""People's @mentions in the coordinator (``coordinator.people``), on a real Ray cluster.

A name that is a member of the group mentions that person: it is stored with
the message and in its ``group_message`` frame, and it never gives a VP a
turn. VP routing is what it was: VP names dispatch, a message without names
goes to every VP, a name nobody answers to gets its notice.
"""

from __future__ import annotations

from coordinator.commands import Ingest, TeamIdle, WaitIdle
from coordinator.people import people_mentioned
from engine.providers.scripted import ScriptedModel
from personas.routing import Selection, Trigger
from protocol.common import Channel
from protocol.settings import GroupSettingsPatch
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER, all_events, notices, results
from tests.test_team_mode import team_model


def test_people_are_the_unknown_names_that_are_members() -> None:
    sel = Selection(targets=["linus"], trigger=Trigger.MENTION, unknown=["Bob", "zed", "bob"])
    rest, people = people_mentioned(sel, ["ann", "bob"])
    assert people == ["bob"] and rest.unknown == ["zed"] and rest.targets == ["linus"]
    same, none = people_mentioned(Selection(unknown=["zed"]), ["ann", "bob"])
    assert none == [] and same.unknown == ["zed"]


async def test_a_person_mentioned_is_stored_and_never_gets_a_turn(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER, members=["ann", "bob"])
    store = await rt.store()

    # Only a person named: stored for Bob, no VP answers, no notice.
    only = await rt.send(Ingest(group.id, "ann", "@Bob can you look?"))
    assert only.dispatched == [] and only.people == ("bob",) and only.unknown == ()
    # A VP and a person: the VP answers, as it would without the person.
    both = await rt.send(Ingest(group.id, "ann", "@bob @linus thoughts?"))
    assert both.dispatched == ["linus"] and both.people == ("bob",)
    # A name that is neither: the notice names it alone, and nobody answers.
    odd = await rt.send(Ingest(group.id, "ann", "@zed @bob hi"))
    assert odd.dispatched == [] and odd.unknown == ("zed",) and odd.people == ("bob",)
    # No name at all: every VP, as before.
    plain = await rt.send(Ingest(group.id, "ann", "hello all"))
    assert plain.dispatched == ROSTER and plain.people == ()
    assert await rt.send(WaitIdle(group.id))

    stored = {m.id: m for m in await store.read_messages(group.id)}
    assert stored[only.message_id].people == ["bob"] and stored[only.message_id].mentions == []
    assert stored[both.message_id].people == ["bob"]
    assert stored[both.message_id].mentions == ["linus"]
    assert stored[plain.message_id].people == []
    events = await all_events(rt, group.id)
    frames = {e["messageId"]: e for e in events if e.get("type") == "group_message"}
    assert frames[only.message_id]["people"] == ["bob"]
    assert frames[both.message_id]["mentions"] == ["linus"]
    (notice,) = notices(events)
    assert notice["detail"]["rule"] == "unknown_mentions"
    assert notice["detail"]["unknown"] == ["zed"]
    answered = results(events)
    assert sorted((vp, len(r)) for vp, r in answered.items()) == [
        ("linus", 2),
        ("martin", 1),
        ("steve", 1),
    ]


async def test_a_task_request_that_names_a_person_tells_them(make_runtime: MakeRuntime) -> None:
    """``/task`` goes to the team's router, and the person it names is still mentioned."""
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    group = await rt.create_group(
        "team", ROSTER, members=["ann", "bob"], settings=GroupSettingsPatch(team_mode=True)
    )
    said = await rt.send(
        Ingest(group.id, "ann", "/task plan the launch with @bob", channel=Channel.TERMINAL)
    )
    assert said.trigger == "task" and said.people == ("bob",)
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    stored = {m.id: m for m in await store.read_messages(group.id)}
    msg = stored[said.message_id]
    assert msg.people == ["bob"] and msg.meta["channel"] == "terminal"
    events = await all_events(rt, group.id)
    frame = next(
        e
        for e in events
        if e.get("messageId") == said.message_id and e.get("type") == "group_message"
    )
    assert frame["people"] == ["bob"]
    # The team worked on it as a task: the router opened one.
    assert await store.list_tasks(group.id)
