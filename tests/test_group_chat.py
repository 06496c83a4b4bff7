"""Group chat end to end on a real local Ray cluster, against both stores."""

from __future__ import annotations

import time

import pytest
import ray

from actors.transcripts import load_conversation
from actors.vp_commands import Running, Stats
from coordinator.commands import (
    AddVP,
    Answer,
    Cancel,
    DeleteGroup,
    EditGroup,
    Ingest,
    RemoveVP,
    VPStatsOf,
    WaitIdle,
)
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.membership import GroupEdit
from coordinator.results import CancelResult
from engine.providers.scripted import ScriptedModel
from protocol import GroupSettingsPatch
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import (
    ROSTER,
    all_events,
    ask_then_answer,
    count_what_i_see,
    forward_around,
    host_of,
    list_tools,
    mention_the_other,
    notices,
    results,
    steve_forwards_to_linus,
    wait_for_event,
)


async def test_one_mention_one_answer(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER, members=["ann"])
    out = await rt.send(Ingest(group.id, "ann", "@linus is the kernel ready?"))
    assert out.dispatched == ["linus"] and out.trigger == "mention"
    await wait_for_event(
        rt, group.id, lambda e: e.get("type") == "yeaft_output" and e["data"]["type"] == "result"
    )
    # By the time any client sees the result, the reply is in the group log,
    # so a page reloaded at that moment shows it.
    stored = await (await rt.store()).read_messages(group.id)
    assert [m.author for m in stored] == ["ann", "linus"]
    assert await rt.send(WaitIdle(group.id))
    res = results(await all_events(rt, group.id))
    assert list(res) == ["linus"] and res["linus"][0]["subtype"] == "success"
    log = await (await rt.store()).read_messages(group.id)
    assert [(m.author, m.role) for m in log] == [("ann", "user"), ("linus", "assistant")]
    assert log[1].meta["causedBy"] == [log[0].id]


async def test_mentions_answer_concurrently(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(engine={"model": "offline:default?ttft=1.5"})
    group = await rt.create_group("team", ROSTER)
    await rt.send(VPStatsOf(group.id, ROSTER))  # start the actors before timing
    started = time.monotonic()
    out = await rt.send(Ingest(group.id, "ann", "@steve @linus @martin thoughts?"))
    assert await rt.send(WaitIdle(group.id))
    wall = time.monotonic() - started
    assert out.dispatched == ROSTER
    assert set(results(await all_events(rt, group.id))) == set(ROSTER)
    # One after another they would take 4.5 s; the rest is a loaded machine's margin.
    assert wall < 1.5 * 2, f"took {wall:.2f}s: not concurrent"


async def test_vps_sharing_a_process_answer_concurrently_each_with_its_own_model(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine={"model": "offline:default?ttft=1.5"}, vp_hosts=1)
    group = await rt.create_group("team", ROSTER)
    before = await rt.send(VPStatsOf(group.id, ROSTER))
    assert len({s.pid for s in before}) == 1
    started = time.monotonic()
    await rt.send(Ingest(group.id, "ann", "@steve @linus @martin thoughts?"))
    assert await rt.send(WaitIdle(group.id))
    wall = time.monotonic() - started
    assert set(results(await all_events(rt, group.id))) == set(ROSTER)
    # One after another they would take 4.5 s; the rest is a loaded machine's margin.
    assert wall < 1.5 * 2, f"took {wall:.2f}s: not concurrent"

    # A scripted model is each VP's own, as if it had a process of its own.
    scripted = make_runtime(
        provider_overrides={"offline": ScriptedModel(lambda _: "thoughts")}, vp_hosts=1
    )
    group = await scripted.create_group("team", ROSTER)
    await scripted.send(Ingest(group.id, "ann", "@all thoughts?"))
    assert await scripted.send(WaitIdle(group.id))
    stats = await scripted.send(VPStatsOf(group.id, ROSTER))
    assert [s.model_calls for s in stats] == [1, 1, 1]


async def test_all_and_fanout_cap(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER, settings=GroupSettingsPatch(fanout_cap=2))
    out = await rt.send(Ingest(group.id, "ann", "@all standup"))
    assert out.dispatched == ["steve", "linus"] and out.truncated
    assert out.trigger == "broadcast"
    await rt.send(WaitIdle(group.id))


async def test_no_mention_is_everyone_or_the_default_vp(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    everyone = await rt.create_group("all", ROSTER)
    assert (await rt.send(Ingest(everyone.id, "ann", "hello"))).dispatched == ROSTER
    focused = await rt.create_group(
        "one",
        ROSTER,
        default_vp="martin",
        settings=GroupSettingsPatch(broadcast_when_unmentioned=False),
    )
    out = await rt.send(Ingest(focused.id, "ann", "hello"))
    assert out.dispatched == ["martin"] and out.trigger == "default"
    await rt.send(WaitIdle(everyone.id))
    await rt.send(WaitIdle(focused.id))


async def test_unknown_mentions_get_a_notice_and_no_dispatch(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER)
    out = await rt.send(Ingest(group.id, "ann", "@bob @carol hi"))
    assert out.dispatched == [] and out.unknown == ("bob", "carol")
    (notice,) = notices(await all_events(rt, group.id))
    assert "@bob" in notice["message"] and "@linus" in notice["message"]
    partly = await rt.send(Ingest(group.id, "ann", "@bob @steve hi"))
    assert partly.dispatched == ["steve"]
    await rt.send(WaitIdle(group.id))


async def test_plain_reply_is_not_dispatched_again(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER)
    await rt.send(Ingest(group.id, "ann", "@steve @linus hi"))
    await rt.send(WaitIdle(group.id))
    res = results(await all_events(rt, group.id))
    assert {vp: len(r) for vp, r in res.items()} == {"steve": 1, "linus": 1}


async def test_mention_ping_pong_is_stopped_by_the_guard(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(mention_the_other)})
    group = await rt.create_group("team", ["steve", "linus"])
    await rt.send(Ingest(group.id, "ann", "@steve start"))
    assert await rt.send(WaitIdle(group.id))
    events = await all_events(rt, group.id)
    rules = [n["detail"].get("rule") for n in notices(events)]
    assert rules == ["ping_pong"]
    stats = await rt.send(VPStatsOf(group.id, ["steve", "linus"]))
    calls = sum(s.model_calls for s in stats)
    assert calls == 5  # the first turn and four exchanges, far inside the budget of 32
    assert sum(len(r) for r in results(events).values()) == calls


async def test_route_forward_chain_depth(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(forward_around)})
    group = await rt.create_group(
        "team", ROSTER, settings=GroupSettingsPatch(max_pair_exchanges=16, throttle_hits=32)
    )
    await rt.send(Ingest(group.id, "ann", "@steve go"))
    assert await rt.send(WaitIdle(group.id))
    log = await (await rt.store()).read_messages(group.id, limit=500)
    forwards = [m for m in log if m.meta.get("injectedBy") == "route_forward"]
    assert len(forwards) == 8  # eight hops allowed, the ninth refused
    assert max(len(m.meta["causedBy"]) for m in forwards) == 8
    events = await all_events(rt, group.id)
    assert [n["detail"]["rule"] for n in notices(events)] == ["chain_depth_exceeded"]
    # The refused forward went back to the model, which then answered plainly.
    tool_results = [
        b
        for e in events
        if e.get("type") == "yeaft_output" and e["data"]["type"] == "user"
        for b in e["data"]["message"]["content"]
    ]
    assert any("chain_depth_exceeded" in b["content"] for b in tool_results)


async def test_forward_throttle_stops_a_loop_across_messages(make_runtime: MakeRuntime) -> None:
    # The window is wide so the three messages fall inside it however slow the
    # machine; that the window expires is checked on a fake clock in
    # tests/test_group_rules.py.
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(steve_forwards_to_linus)})
    group = await rt.create_group(
        "team",
        ["steve", "linus"],
        settings=GroupSettingsPatch(throttle_hits=2, throttle_window_s=60),
    )
    for i in range(3):
        await rt.send(Ingest(group.id, "ann", f"@steve task {i}"))
        await rt.send(WaitIdle(group.id))
    rules = [n["detail"]["rule"] for n in notices(await all_events(rt, group.id))]
    assert rules == ["throttled"]
    log = await (await rt.store()).read_messages(group.id, limit=500)
    assert len([m for m in log if m.meta.get("injectedBy") == "route_forward"]) == 2


async def test_cancel_stops_every_turn(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(engine={"model": "offline:default?tps=5"})
    group = await rt.create_group("team", ROSTER)
    await rt.send(Ingest(group.id, "ann", "@all talk slowly"))
    for vp in ROSTER:
        await wait_for_event(
            rt,
            group.id,
            lambda e, vp=vp: (
                e.get("vpId") == vp
                and e.get("type") == "yeaft_output"
                and e["data"]["type"] == "assistant"
            ),
        )
    out = await rt.send(Cancel(group.id))
    assert out.aborted == 3
    assert await rt.send(WaitIdle(group.id, 10))
    res = results(await all_events(rt, group.id))
    assert {vp: r[-1]["subtype"] for vp, r in res.items()} == dict.fromkeys(
        ROSTER, "error_during_execution"
    )
    assert all(r[-1]["stop_reason"] == "aborted" for r in res.values())


async def test_groups_are_isolated(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    a = await rt.create_group("a", ROSTER)
    b = await rt.create_group("b", ROSTER)
    await rt.send(Ingest(a.id, "ann", "@steve the secret is alpha-7"))
    await rt.send(WaitIdle(a.id))
    await rt.send(Ingest(b.id, "bob", "@steve hello"))
    await rt.send(WaitIdle(b.id))
    store = await rt.store()
    assert all(e["groupId"] == b.id for e in await all_events(rt, b.id) if "groupId" in e)
    assert all("alpha-7" not in m.text for m in await store.read_messages(b.id))
    conv = await load_conversation(store, b.id, "steve")
    assert conv is not None and all("alpha-7" not in m.content for m in conv.messages)


async def test_resent_client_message_id_is_stored_once(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ROSTER)
    first = await rt.send(Ingest(group.id, "ann", "@linus once", client_message_id="c-1"))
    again = await rt.send(Ingest(group.id, "ann", "@linus once", client_message_id="c-1"))
    assert again.duplicate and again.message_id == first.message_id
    assert again.dispatched == []
    await rt.send(WaitIdle(group.id))
    log = await (await rt.store()).read_messages(group.id)
    assert len([m for m in log if m.role == "user"]) == 1
    assert len(results(await all_events(rt, group.id))["linus"]) == 1


async def test_ask_user_round_trip_and_expiry(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(
        provider_overrides={"offline": ScriptedModel(ask_then_answer)}, ask_timeout_s=1.0
    )
    group = await rt.create_group("team", ["steve"])
    await rt.send(Ingest(group.id, "ann", "@steve pick"))
    question = await wait_for_event(rt, group.id, lambda e: e["type"] == "ask_user_question")
    assert question["prompt"] == "which colour?" and question["vpId"] == "steve"
    assert await rt.send(Answer(group.id, question["requestId"], "red"))
    await rt.send(WaitIdle(group.id))
    await rt.send(Ingest(group.id, "ann", "@steve pick again"))
    await rt.send(WaitIdle(group.id))  # nobody answers: the question expires after 1 s
    log = await (await rt.store()).read_messages(group.id)
    replies = [m.text for m in log if m.author == "steve"]
    assert replies[0] == "you said: red"
    assert "expired" in replies[1]


@pytest.mark.own_processes
async def test_killed_vp_actor_restarts_and_the_group_goes_on(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(engine={"model": "offline:default?tps=5"})
    group = await rt.create_group("team", ROSTER)
    await rt.send(Ingest(group.id, "ann", "@linus a long answer please"))
    await wait_for_event(
        rt,
        group.id,
        lambda e: (
            e.get("vpId") == "linus"
            and e.get("type") == "yeaft_output"
            and e["data"]["type"] == "assistant"
        ),
    )
    ray.kill(await host_of(rt, "linus"), no_restart=False)
    assert await rt.send(WaitIdle(group.id, 20))
    (lost,) = results(await all_events(rt, group.id))["linus"]
    assert lost["is_error"] and "Ray is restarting it" in lost["error"]
    await rt.send(Ingest(group.id, "ann", "@linus are you back?"))
    assert await rt.send(WaitIdle(group.id, 30))
    res = results(await all_events(rt, group.id))["linus"]
    assert res[-1]["subtype"] == "success"
    # Nothing the user said was lost: the restarted VP saw both messages.
    conv = await load_conversation(await rt.store(), group.id, "linus")
    assert conv is not None
    said = [m.content for m in conv.messages if m.role == "user"]
    assert any("a long answer" in s for s in said) and any("are you back" in s for s in said)


@pytest.mark.own_processes
async def test_a_vp_actor_killed_for_good_says_it_was_not_restarted(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(engine={"model": "offline:default?tps=5"})
    group = await rt.create_group("team", ROSTER)
    await rt.send(Ingest(group.id, "ann", "@linus a long answer please"))
    await wait_for_event(
        rt, group.id, lambda e: e.get("vpId") == "linus" and e.get("type") == "yeaft_output"
    )
    ray.kill(await host_of(rt, "linus"), no_restart=True)
    assert await rt.send(WaitIdle(group.id, 20))
    (lost,) = results(await all_events(rt, group.id))["linus"]
    assert lost["is_error"] and "could not be restarted" in lost["error"]
    assert "restarting" not in lost["error"]


@pytest.mark.parametrize("name", ["", "x" * 200])
async def test_bad_group_names_are_refused(make_runtime: MakeRuntime, name: str) -> None:
    rt = make_runtime()
    with pytest.raises(GroupError) as err:
        await rt.create_group(name, ROSTER)
    assert err.value.code is GroupErrorCode.INVALID_NAME


async def test_memory_follows_the_user_into_a_new_group(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    first = await rt.create_group("one", ["steve", "linus"])
    await rt.send(Ingest(first.id, "ann", "@steve remember that I prefer Rust for services"))
    await rt.send(WaitIdle(first.id))
    second = await rt.create_group("two", ["steve"])
    await rt.send(Ingest(second.id, "ann", "@steve what should the new service be written in?"))
    await rt.send(WaitIdle(second.id))
    log = await (await rt.store()).read_messages(second.id)
    (reply,) = [m.text for m in log if m.author == "steve"]
    assert "You told me earlier: I prefer Rust for services." in reply


async def test_route_forward_is_hidden_in_one_vp_groups(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(list_tools)})
    solo = await rt.create_group("solo", ["steve"])
    pair = await rt.create_group("pair", ["steve", "linus"])
    for gid in (solo.id, pair.id):
        await rt.send(Ingest(gid, "ann", "@steve which tools?"))
        await rt.send(WaitIdle(gid))
    store = await rt.store()
    (solo_reply,) = [m.text for m in await store.read_messages(solo.id) if m.author == "steve"]
    (pair_reply,) = [m.text for m in await store.read_messages(pair.id) if m.author == "steve"]
    assert "route_forward" not in solo_reply and "remember" in solo_reply
    assert "route_forward" in pair_reply


async def test_what_a_vp_sees(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(count_what_i_see)})
    group = await rt.create_group("team", ["steve", "linus"])
    await rt.send(Ingest(group.id, "ann", "@steve @linus first"))
    await rt.send(WaitIdle(group.id))
    await rt.send(Ingest(group.id, "ann", "@linus second"))
    await rt.send(WaitIdle(group.id))
    log = await (await rt.store()).read_messages(group.id)
    replies = [(m.author, m.text) for m in log if m.role == "assistant"]
    by_linus = [t for a, t in replies if a == "linus"]
    # Dispatched together, neither saw the other's in-flight reply...
    assert by_linus[0] == "seen: leaked:False"
    # ...afterwards linus sees steve's reply as text only: no tool calls, no thinking.
    assert by_linus[1] == "seen:steve leaked:False"


async def test_group_management(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("team", ["steve", "Torvalds"], members=["ann"])
    assert group.roster == ["steve", "linus"] and group.default_vp == "steve"
    renamed = await rt.send(EditGroup(group.id, GroupEdit(name="core team")))
    assert renamed.name == "core team"
    grown = await rt.send(AddVP(group.id, "martin"))
    assert grown.roster == ["steve", "linus", "martin"]
    assert (
        await rt.send(EditGroup(group.id, GroupEdit(default_vp="martin")))
    ).default_vp == "martin"
    shrunk = await rt.send(RemoveVP(group.id, "martin"))
    assert shrunk.roster == ["steve", "linus"] and shrunk.default_vp == "steve"
    for call, code in [
        (rt.send(AddVP(group.id, "nobody")), GroupErrorCode.UNKNOWN_VP),
        (
            rt.send(EditGroup(group.id, GroupEdit(default_vp="kent"))),
            GroupErrorCode.DEFAULT_NOT_IN_ROSTER,
        ),
        (rt.send(RemoveVP(group.id, "kent")), GroupErrorCode.NOT_IN_ROSTER),
    ]:
        with pytest.raises(GroupError) as err:
            await call
        assert err.value.code is code
    await rt.send(Ingest(group.id, "ann", "@steve hi"))
    await rt.send(WaitIdle(group.id))
    assert await rt.send(DeleteGroup(group.id))
    store = await rt.store()
    assert await store.get_group(group.id) is None
    assert await store.read_messages(group.id) == []
    with pytest.raises(GroupError) as gone:
        await rt.send(Ingest(group.id, "ann", "anyone?"))
    assert gone.value.code is GroupErrorCode.NOT_FOUND


async def test_cancel_one_vp_leaves_the_others(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(engine={"model": "offline:default?tps=8"})
    group = await rt.create_group("team", ["steve", "linus"])
    await rt.send(Ingest(group.id, "ann", "@steve @linus go"))
    for vp in ("steve", "linus"):
        await wait_for_event(
            rt,
            group.id,
            lambda e, vp=vp: (
                e.get("vpId") == vp
                and e.get("type") == "yeaft_output"
                and e["data"]["type"] == "assistant"
            ),
        )
    out = await rt.send(Cancel(group.id, "linus"))
    assert out == CancelResult(aborted=1, vps=("linus",))
    assert await rt.send(WaitIdle(group.id, 30))
    res = results(await all_events(rt, group.id))
    assert res["linus"][-1]["stop_reason"] == "aborted"
    assert res["steve"][-1]["subtype"] == "success"


async def test_pooled_vp_hosts_start_with_the_runtime_before_any_group(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime()
    assert rt.start_vp_hosts() == 2
    for i in range(2):
        handle = ray.get_actor(rt.config.actor_name("vps", i), namespace=rt.config.namespace)
        assert await handle.call.remote("steve", Running()) == []
    assert make_runtime(vp_hosts=0).start_vp_hosts() == 0


async def test_a_new_groups_vp_actors_start_before_its_first_message(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime()
    group = await rt.create_group("warm", ["kent", "grace"], members=["ann"])
    # Nothing was sent to the group: the actors exist because it was created.
    pids = set()
    for vp in group.roster:
        stats = await (await host_of(rt, vp)).call.remote(vp, Stats())
        assert stats.vp_id == vp and stats.model_calls == 0
        pids.add(stats.pid)
    # Placed in roster order on the least loaded of the two pooled hosts:
    # the two VPs answer in two processes, not one.
    assert len(pids) == 2
