"""Team mode under the group's controls: verdicts in chat and at once, Stop, deletion,
budgets, duplicates, restarts, and what a task's run may not do.

Each scenario runs on a real Ray cluster with a scripted model (module-level
functions: Ray imports them by reference in the VP actors).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from coordinator.commands import (
    AbandonTask,
    AcceptTask,
    Cancel,
    DeleteGroup,
    Ingest,
    Regenerate,
    ReviseTask,
    TeamIdle,
    VPStatsOf,
)
from coordinator.errors import GroupError
from coordinator.team.calls import task_request
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from protocol.settings import GroupSettingsPatch
from protocol.tasks import RunStatus, TaskStatus
from store.turns import TurnRecord
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER, all_events, results, wait_for_event
from tests.test_team_mode import TEAM_PLAN, team_model

SLOW_S = 1.5


def _prompt(request: ModelRequest) -> str:
    content = request.messages[-1].content
    return content if isinstance(content, str) else ""


def verdicts_in_chat(request: ModelRequest) -> Reply:
    """A router that reads "looks good" as acceptance and "drop it" as abandonment."""
    if request.context.purpose == "team.router":
        prompt = _prompt(request)
        if "Current user message:\nlooks good" in prompt:
            return Reply('{"action": "close_task", "reason": "accepted in chat"}')
        if "Current user message:\ndrop it" in prompt:
            return Reply('{"action": "abandon_task", "reason": "dropped"}')
    return team_model(request)


def slow_verdict(request: ModelRequest) -> Reply:
    """A router that takes a while to read "looks good" as acceptance."""
    if request.context.purpose == "team.router":
        if "Current user message:\nlooks good" in _prompt(request):
            return Reply('{"action": "close_task", "reason": "accepted"}', delay=SLOW_S)
    return team_model(request)


def made_up_tool(request: ModelRequest) -> Reply | Any:
    """The skill drafted from a task lists a tool nothing here has."""
    if request.context.purpose == "team.draft":
        draft = {
            "frontmatter": {"name": "launch", "description": "Plan", "tools": ["teleport"]},
            "content": "## Steps\n1. Plan.",
        }
        return Reply(json.dumps(draft))
    return team_model(request)


def looping_nodes(request: ModelRequest) -> Reply | Any:
    """Task runs that would call tools for ever; each says whether it was told
    what to do when tools fail, and whether its last call was the final one."""
    node = str(request.context.purpose).startswith("team.run.")
    if node and not _prompt(request).startswith("Synthesis instruction"):
        if request.tools:
            return Reply(tool_calls=[("rethink", {"reason": "once more"})])
        guided = "# When tools fail" in request.system
        return Reply(f"OUT-{request.context.speaker_id} guided={guided} final")
    return team_model(request)


def slow_router(request: ModelRequest) -> Reply | Any:
    """A router that takes a while to open a task."""
    if request.context.purpose == "team.router":
        return Reply('{"action": "new_task", "reason": "work"}', delay=SLOW_S)
    return team_model(request)


def slow_planner(request: ModelRequest) -> Reply:
    """The planner takes a while: long enough to press Stop while it plans."""
    if request.context.purpose == "team.planner":
        return Reply(json.dumps(TEAM_PLAN), delay=SLOW_S)
    return team_model(request)


def slow_nodes(request: ModelRequest) -> Reply:
    """Task runs take a while: long enough to delete the group while they run."""
    if str(request.context.purpose).startswith("team.run."):
        return Reply(f"OUT-{request.context.speaker_id}", delay=SLOW_S)
    return team_model(request)


def tools_offered(request: ModelRequest) -> Reply:
    """Task runs report the tools they were offered."""
    if request.context.purpose == "team.planner":
        return Reply('{"mode": "single", "vp": "steve", "reason": "small"}')
    if "# Execution Context" in request.system:
        return Reply("tools: " + ",".join(sorted(t.name for t in request.tools)))
    return team_model(request)


async def _task_in_review(rt: Any, group_id: str, text: str) -> Any:
    await rt.send(Ingest(group_id, "ann", text))
    await rt.send(TeamIdle(group_id))
    task = (await (await rt.store()).list_tasks(group_id))[0]  # the newest
    assert task.status is TaskStatus.REVIEW, task
    return task


def test_the_task_prefix() -> None:
    assert task_request("/task plan it") == (True, "plan it")
    assert task_request("  /TASK: plan it") == (True, "plan it")
    assert task_request("/task帮我写一个发布计划") == (True, "帮我写一个发布计划")
    assert task_request("/task：做计划") == (True, "做计划")
    assert task_request("/task") == (True, "")
    assert task_request("/taskforce now") == (False, "/taskforce now")
    assert task_request("plan /task it") == (False, "plan /task it")


async def test_verdicts_said_in_chat(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(verdicts_in_chat)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    await _task_in_review_then(rt, group.id, "looks good")
    store = await rt.store()
    accepted = await store.get_task(group.id, task.id)
    assert accepted is not None and accepted.status is TaskStatus.ACCEPTED
    assert accepted.accepted_by == "ann"
    second = await _task_in_review(rt, group.id, "/task Plan the next launch")
    await _task_in_review_then(rt, group.id, "drop it")
    dropped = await store.get_task(group.id, second.id)
    assert dropped is not None and dropped.status is TaskStatus.ABANDONED


async def _task_in_review_then(rt: Any, group_id: str, text: str) -> None:
    await rt.send(Ingest(group_id, "ann", text))
    await rt.send(TeamIdle(group_id))


async def test_a_verdict_in_chat_on_a_task_settled_meanwhile_is_chat(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(slow_verdict)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    said = await rt.send(Ingest(group.id, "ann", "looks good"))
    # The card's Abandon comes while the router is still reading the message.
    await rt.send(AbandonTask(group.id, task.id, "ann"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    (only,) = await store.list_tasks(group.id)
    assert only.id == task.id and only.status is TaskStatus.ABANDONED
    # The message became plain chat: its VPs answer it; no task was opened for it.
    assert await store.turns_of(group.id, said.message_id)


async def test_a_learned_skill_may_only_list_tools_that_exist(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(made_up_tool)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    await rt.send(AcceptTask(group.id, task.id, "ann"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    done = await store.get_task(group.id, task.id)
    assert done is not None and done.draft_id
    draft = await store.get_skill_draft(done.draft_id)
    assert draft is not None and not draft.safety.ok
    assert any("'teleport'" in problem for problem in draft.safety.problems), draft.safety


async def test_task_runs_get_tool_failure_guidance_and_a_final_answer(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(
        engine={"max_tool_iterations": 2},
        provider_overrides={"offline": ScriptedModel(looping_nodes)},
    )
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    attempt = task.attempt
    assert attempt is not None
    nodes = [run for run in attempt.runs if run.id != "synthesis"]
    assert nodes and all(run.status is RunStatus.DONE for run in nodes), nodes
    for run in nodes:
        # Two rounds of tools, then the answer without tools the finalizer asks for.
        assert run.output == f"OUT-{run.vp} guided=True final", run
        assert [use.tool for use in run.tools] == ["rethink", "rethink"]


async def test_accept_and_revise_at_once_decide_once(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    outcomes = await asyncio.gather(
        rt.send(AcceptTask(group.id, task.id, "ann")),
        rt.send(ReviseTask(group.id, task.id, "ann", "shorter please")),
        rt.send(ReviseTask(group.id, task.id, "ann", "and in French")),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(refused) == 2, outcomes
    assert all(isinstance(getattr(e, "cause", e), GroupError) for e in refused)
    await rt.send(TeamIdle(group.id))
    final = await (await rt.store()).get_task(group.id, task.id)
    assert final is not None
    if final.status is TaskStatus.ACCEPTED:
        assert len(final.attempts) == 1
    else:
        assert len(final.attempts) == 2 and final.status is TaskStatus.REVIEW


async def test_stop_while_planning_starts_no_run(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(slow_planner)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan our product launch"))
    await wait_for_event(
        rt,
        group.id,
        lambda e: e.get("type") == "task_changed" and e["task"]["status"] == "planning",
    )
    await rt.send(Cancel(group.id))
    await rt.send(TeamIdle(group.id))
    [task] = await (await rt.store()).list_tasks(group.id)
    attempt = task.attempt
    assert attempt is not None and attempt.failed and task.status is TaskStatus.REVIEW
    assert {r.status for r in attempt.runs} <= {RunStatus.SKIPPED, RunStatus.FAILED}
    assert results(await all_events(rt, group.id)) == {}


async def test_deleting_a_group_while_its_task_runs(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(slow_nodes)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan our product launch"))
    await wait_for_event(
        rt,
        group.id,
        lambda e: (
            e.get("type") == "task_changed"
            and any(r["status"] == "running" for r in e["task"]["attempts"][-1]["runs"])
        ),
    )
    assert await rt.send(DeleteGroup(group.id))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    assert await store.list_tasks(group.id) == []
    assert await store.evidence_of(group.id, "any") == []


async def test_team_calls_are_charged_to_the_budget(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    settings = GroupSettingsPatch(team_mode=True, budget_tokens_per_day=1)
    group = await rt.create_group("g", ROSTER, settings=settings)
    await rt.send(Ingest(group.id, "ann", "Plan our product launch"))
    await rt.send(TeamIdle(group.id))
    # The router's call was the one the budget let through; it spent the
    # day's budget, so the planner's call was refused (a single run, the
    # fallback) and so was that run's turn.
    assert sum(s.model_calls for s in await rt.send(VPStatsOf(group.id))) == 1
    [task] = await (await rt.store()).list_tasks(group.id)
    attempt = task.attempt
    assert attempt is not None and attempt.plan is not None and attempt.plan.fallback
    [run] = attempt.runs
    assert run.status is RunStatus.FAILED and "budget" in (run.error or ""), run
    usage = await (await rt.store()).group_usage(group.id)
    assert usage.input_tokens + usage.output_tokens > 0


async def test_a_repeated_message_is_routed_once(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    first = await rt.send(
        Ingest(group.id, "ann", "Plan our product launch", client_message_id="c1")
    )
    await rt.send(TeamIdle(group.id))
    again = await rt.send(
        Ingest(group.id, "ann", "Plan our product launch", client_message_id="c1")
    )
    await rt.send(TeamIdle(group.id))
    assert again.duplicate and again.message_id == first.message_id
    assert len(await (await rt.store()).list_tasks(group.id)) == 1


async def test_a_repeat_sent_while_the_message_is_routed_is_not_routed_again(
    make_runtime: MakeRuntime,
) -> None:
    """A client resends what is not acked yet (on subscribing, say): the repeat
    comes while the router still reads the first, and opens no second task."""
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(slow_router)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    first = await rt.send(
        Ingest(group.id, "ann", "Plan our product launch", client_message_id="c1")
    )
    again = await rt.send(
        Ingest(group.id, "ann", "Plan our product launch", client_message_id="c1")
    )
    await rt.send(TeamIdle(group.id))
    assert again.duplicate and again.message_id == first.message_id
    assert len(await (await rt.store()).list_tasks(group.id)) == 1


async def test_a_tasks_runs_neither_hand_off_nor_regenerate(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(tools_offered)})
    group = await rt.create_group("g", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    task = await _task_in_review(rt, group.id, "Plan our product launch")
    attempt = task.attempt
    assert attempt is not None
    [run] = attempt.runs
    assert run.output.startswith("tools:") and "route_forward" not in run.output
    assert run.message_id is not None
    with pytest.raises(Exception) as refused:
        await rt.send(Regenerate(group.id, run.message_id, "ann"))
    assert "part of a task" in str(refused.value)


async def test_a_restart_never_reruns_a_tasks_turn_alone(make_runtime: MakeRuntime) -> None:
    provider = ScriptedModel(team_model)
    rt = make_runtime(provider_overrides={"offline": provider})
    group = await rt.create_group("g", ROSTER)
    store = await rt.store()
    record = TurnRecord(
        turn_id="t1:steve",
        group_id=group.id,
        vp_id="steve",
        trigger_id="msg_1",
        chain_id="msg_1",
        task_id="task_gone",
    )
    await store.add_turns(group.id, [record])
    again = make_runtime(provider_overrides={"offline": provider})
    await again.send(Cancel(group.id))
    [turn] = await store.turns_of(group.id, "msg_1")
    assert turn.finished and turn.interrupted
    assert sum(s.model_calls for s in await again.send(VPStatsOf(group.id))) == 0
