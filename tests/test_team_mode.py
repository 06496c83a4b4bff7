"""Team mode on a real Ray cluster: router, planner, parallel nodes, synthesis, acceptance.

The model is scripted per call: the router, planner, skill and learning
calls by their ``purpose``, and the VPs' turns by what their prompt holds
(the ``# Execution Context`` of a task's run). Node replies take half a
second, so the runs' own start and end times show which ran side by side.
"""

from __future__ import annotations

import json
import re

from coordinator.commands import AbandonTask, AcceptTask, Cancel, Ingest, TeamIdle, WaitIdle
from engine.errors import ErrorKind
from engine.providers.base import ModelRequest
from engine.providers.scripted import Fail, Reply, ScriptedModel
from protocol.settings import GroupSettingsPatch
from protocol.tasks import (
    Attempt,
    DraftAction,
    DraftStatus,
    Plan,
    PlanMode,
    Run,
    RunRole,
    RunStatus,
    Task,
    TaskAction,
    TaskStatus,
)
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import (
    ROSTER,
    all_events,
    last_is_tool_result,
    notices,
    results,
)

NODE_DELAY_S = 0.5
TEAM_PLAN = {
    "mode": "team",
    "reason": "three areas",
    "strategy": "market and tech in parallel, then the message",
    "nodes": [
        {"id": "market", "vp": "steve", "task": "size the market", "depends_on": []},
        {"id": "tech", "vp": "linus", "task": "list the technical risks", "depends_on": []},
        {
            "id": "message",
            "vp": "martin",
            "task": "write the launch message",
            "depends_on": ["market"],
        },
    ],
    "final_synthesis_instruction": "one launch plan",
    "synthesizer": "steve",
}


def _prompt(request: ModelRequest) -> str:
    content = request.messages[-1].content
    return content if isinstance(content, str) else ""


def team_model(request: ModelRequest) -> Reply | Fail:
    purpose = request.context.purpose
    if purpose == "team.router":
        if "Current user message:\nhello" in _prompt(request):
            return Reply(json.dumps({"action": "simple_chat", "reason": "greeting"}))
        return Reply('{"action": "new_task", "reason": "work", "short_title": "Launch plan"}')
    if purpose == "team.planner":
        return Reply("```json\n" + json.dumps(TEAM_PLAN) + "\n```")
    if isinstance(purpose, str) and purpose.startswith("team.skills"):
        return Reply('["launch-plan", "made-up-skill"]')
    if purpose == "team.guidance":
        return Reply('{"guidance_name": "focus", "description": "d", "content": "Stay on it."}')
    if purpose == "team.draft":
        draft = {
            "frontmatter": {"name": "team-launch", "description": "Plan a launch as a team"},
            "content": "## Steps\n1. Size the market.\n2. Write the message.",
            "change_reason": "a new kind of task",
        }
        return Reply(json.dumps(draft))
    me = request.context.speaker_id
    if "# Execution Context" not in request.system:
        return Reply(f"{me} chats")
    skills = sum(1 for m in request.messages[:-1] if "launch-plan" in str(m.content))
    if _prompt(request).startswith("Synthesis instruction"):
        seen = sorted(set(re.findall(r"OUT-\w+", request.system)))
        return Reply("SYNTH " + " ".join(seen))
    if me == "linus" and not last_is_tool_result(request):
        return Reply(tool_calls=[("rethink", {"reason": "check the risks"})])
    saw = "saw-steve" if "OUT-steve" in request.system else "alone"
    return Reply(f"OUT-{me} {saw} skills={skills}", delay=NODE_DELAY_S)


async def test_a_team_answers_in_parallel_and_one_vp_synthesises(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    group = await rt.create_group("launch", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    sent = await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    assert sent.trigger == "task" and sent.turns == {}
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    assert task.status is TaskStatus.REVIEW and task.title == "Launch plan"
    attempt = task.attempt
    assert attempt is not None and attempt.plan is not None
    assert attempt.plan.mode is PlanMode.TEAM and not attempt.failed
    runs = {r.id: r for r in attempt.runs}
    assert all(r.status is RunStatus.DONE for r in runs.values()), runs
    market, tech, message = runs["market"], runs["tech"], runs["message"]
    # Independent nodes overlapped; the dependent one started after its dependency.
    assert market.started_at and tech.started_at and message.started_at
    assert market.finished_at and tech.finished_at
    assert market.started_at < tech.finished_at and tech.started_at < market.finished_at
    assert message.started_at >= market.finished_at
    assert message.output.startswith("OUT-martin saw-steve")
    # Skills: only names from the candidates reach a run, as activation messages.
    assert [s.name for s in market.skills] == ["launch-plan"]
    assert "skills=1" in market.output
    # A node's tool calls are part of the evidence.
    assert [(t.tool, t.ok) for t in tech.tools] == [("rethink", True)]
    # The synthesis read every node's output.
    assert runs["synthesis"].output == "SYNTH OUT-linus OUT-martin OUT-steve"
    assert attempt.final_run == "synthesis"
    # Each run streamed as its own turn, and its reply names its run.
    events = await all_events(rt, group.id)
    assert sorted(results(events)) == sorted(ROSTER)
    assert any(e["type"] == "task_changed" for e in events)
    log = await store.read_messages(group.id)
    tagged = {m.meta["task"]["runId"] for m in log if "task" in m.meta}
    assert tagged == {"market", "tech", "message", "synthesis"}
    [evidence] = await store.evidence_of(group.id, task.id)
    assert evidence.final_output == runs["synthesis"].output
    assert evidence.mode is PlanMode.TEAM and evidence.tool_names == ["rethink"]

    accepted = await rt.send(AcceptTask(group.id, task.id, "ann"))
    assert accepted.status is TaskStatus.ACCEPTED and accepted.accepted_by == "ann"
    await rt.send(TeamIdle(group.id))
    done = await store.get_task(group.id, task.id)
    assert done is not None and done.draft_id
    draft = await store.get_skill_draft(done.draft_id)
    assert draft is not None and draft.status is DraftStatus.DRAFT and draft.safety.ok
    # The runs used the built-in launch-plan skill: the draft revises it.
    assert draft.action is DraftAction.REVISE and draft.name == "launch-plan"
    [evidence] = await store.evidence_of(group.id, task.id)
    assert evidence.accepted_run == "synthesis"


async def test_plain_chat_mentions_and_the_task_prefix(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    group = await rt.create_group("launch", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    # The router calls a greeting plain chat: it goes where an unmentioned
    # message goes when team mode is off (to everyone, by default).
    await rt.send(Ingest(group.id, "ann", "hello"))
    await rt.send(TeamIdle(group.id))
    assert await rt.send(WaitIdle(group.id))
    store = await rt.store()
    assert await store.list_tasks(group.id) == []
    authors = [m.author for m in await store.read_messages(group.id)]
    assert authors[0] == "ann" and sorted(authors[1:]) == sorted(ROSTER)
    # @mentions win for plain chat: no router call, straight to steve.
    sent = await rt.send(Ingest(group.id, "ann", "@steve what do you think?"))
    assert sent.dispatched == ["steve"]
    assert await rt.send(WaitIdle(group.id))
    assert await store.list_tasks(group.id) == []

    off = await rt.create_group("plain", ROSTER)
    forced = await rt.send(Ingest(off.id, "ann", "/task plan the launch"))
    assert forced.trigger == "task"
    await rt.send(TeamIdle(off.id))
    [task] = await store.list_tasks(off.id)
    assert task.goal == "plan the launch"


def router_down(request: ModelRequest) -> Reply | Fail:
    purpose = request.context.purpose
    if purpose == "team.router":
        return Fail(ErrorKind.AUTH, "router model down")
    if purpose == "team.planner":
        return Reply("not json at all")
    return team_model(request)


async def test_fallbacks_plain_chat_then_a_single_run(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(router_down)})
    group = await rt.create_group(
        "launch", ROSTER, default_vp="martin", settings=GroupSettingsPatch(team_mode=True)
    )
    # No router: with no active task the message is plain chat.
    await rt.send(Ingest(group.id, "ann", "Plan our product launch"))
    await rt.send(TeamIdle(group.id))
    assert await rt.send(WaitIdle(group.id))
    store = await rt.store()
    assert await store.list_tasks(group.id) == []
    # /task forces a task; the planner's answer is unusable: one VP does it all.
    await rt.send(Ingest(group.id, "ann", "/task plan the launch"))
    await rt.send(TeamIdle(group.id))
    [task] = await store.list_tasks(group.id)
    attempt = task.attempt
    assert attempt is not None and attempt.plan is not None
    assert attempt.plan.mode is PlanMode.SINGLE and attempt.plan.fallback
    [run] = attempt.runs
    assert run.vp == "martin" and run.status is RunStatus.DONE
    assert task.status is TaskStatus.REVIEW
    abandoned = await rt.send(AbandonTask(group.id, task.id, "ann"))
    assert abandoned.status is TaskStatus.ABANDONED


async def test_the_loop_guard_bounds_a_team(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    settings = GroupSettingsPatch(team_mode=True, max_turns_per_message=2)
    group = await rt.create_group("launch", ROSTER, settings=settings)
    await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    attempt = task.attempt
    assert attempt is not None
    runs = {r.id: r for r in attempt.runs}
    # Two turns per message: the two independent nodes; nothing after them.
    assert runs["market"].status is RunStatus.DONE and runs["tech"].status is RunStatus.DONE
    for refused in ("message", "synthesis"):
        assert runs[refused].status is RunStatus.FAILED
        assert (runs[refused].error or "").startswith("loop guard"), runs[refused]
    assert attempt.failed and task.status is TaskStatus.REVIEW
    rules = [n["detail"]["rule"] for n in notices(await all_events(rt, group.id))]
    assert rules == ["turn_budget"]


async def test_a_restarted_coordinator_ends_the_attempt_it_lost(make_runtime: MakeRuntime) -> None:
    rt = make_runtime()
    group = await rt.create_group("launch", ROSTER)
    store = await rt.store()
    running = Run(id="single", role=RunRole.SINGLE, vp="steve", status=RunStatus.RUNNING)
    lost = Task(
        id="task_lost",
        group_id=group.id,
        title="Lost",
        goal="plan it",
        status=TaskStatus.RUNNING,
        created_by="ann",
        created_at=1.0,
        updated_at=1.0,
        attempts=[
            Attempt(
                index=1,
                request="plan it",
                message_id="msg_1",
                action=TaskAction.NEW_TASK,
                plan=Plan(mode=PlanMode.SINGLE, vp="steve"),
                runs=[running],
                started_at=1.0,
            )
        ],
    )
    await store.save_task(lost)
    # A new deployment on the same store: its coordinator recovers before any turn call.
    again = make_runtime()
    await again.send(Cancel(group.id))
    recovered = await store.get_task(group.id, "task_lost")
    assert recovered is not None and recovered.status is TaskStatus.REVIEW
    assert recovered.attempt is not None and recovered.attempt.failed
    [run] = recovered.attempt.runs
    assert run.status is RunStatus.FAILED and run.error == "the server restarted"
    [notice] = notices(await all_events(rt, group.id))
    assert notice["detail"]["rule"] == "task_interrupted"
    assert await store.active_task(group.id) == recovered


async def test_the_offline_model_runs_a_team_of_five(make_runtime: MakeRuntime) -> None:
    # What a new user gets from `make run` with no API key: the offline model
    # answers the router, the planner, the skills and the learning by itself.
    rt = make_runtime()
    five = ["steve", "linus", "martin", "grace", "ada"]
    group = await rt.create_group("launch", five, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Please write a launch plan for our new app"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    attempt = task.attempt
    assert attempt is not None and attempt.plan is not None
    assert attempt.plan.mode is PlanMode.TEAM and not attempt.plan.fallback
    nodes = [r for r in attempt.runs if r.role is RunRole.NODE]
    assert len(nodes) >= 2 and all(r.status is RunStatus.DONE for r in nodes)
    assert attempt.run("synthesis") is not None and not attempt.failed
    await rt.send(AcceptTask(group.id, task.id, "ann"))
    await rt.send(TeamIdle(group.id))
    done = await store.get_task(group.id, task.id)
    assert done is not None and done.draft_id
    draft = await store.get_skill_draft(done.draft_id)
    assert draft is not None and draft.safety.ok, draft
