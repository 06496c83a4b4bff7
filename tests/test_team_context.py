"""What team mode hands its model calls, on a real Ray cluster (seed 001's prompt atlas).

The scripted model answers each call by its ``context.purpose``; a task's
runs carry ``team.run.<role>``, so the synthesis request can be read on the
VP actor's side and reported back in the synthesis's own answer.
"""

from __future__ import annotations

import json
from dataclasses import replace

from coordinator.commands import AcceptTask, Ingest, TeamIdle
from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from protocol.settings import GroupSettingsPatch
from protocol.tasks import RunRole, RunStatus, Skill, SkillSource, TaskStatus
from team.delegation import Delegation, DependencyOutput
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER, all_events, last_is_tool_result, notices

PLAN = {
    "mode": "team",
    "reason": "REASON-42: two areas",
    "strategy": "market and tech in parallel",
    "nodes": [
        {"id": "market", "vp": "steve", "task": "size the market", "depends_on": []},
        {"id": "tech", "vp": "linus", "task": "list the technical risks", "depends_on": []},
    ],
    "final_synthesis_instruction": "one launch plan",
    "synthesizer": "steve",
}
# What the synthesis's system prompt must hold, by the word its answer reports.
SYNTHESIS_SEES = {
    "reason": "Planner's reason: REASON-42: two areas",
    "result": "Team result: every part finished.",
    "evidence": "Team evidence (facts of each run):",
    "failed": "tool no_such_tool failed",
    "reminder": "do not repeat them",
    "outputs": "OUT-linus",
}


def team_calls(request: ModelRequest) -> Reply | None:
    """The answers to team mode's narrow calls (router, planner, skills, guidance)."""
    purpose = request.context.purpose
    if purpose == "team.router":
        return Reply('{"action": "new_task", "reason": "work", "short_title": "Launch"}')
    if purpose == "team.planner":
        return Reply(json.dumps(PLAN))
    if isinstance(purpose, str) and purpose.startswith("team.skills"):
        return Reply("[]")
    if purpose == "team.guidance":
        return Reply('{"guidance_name": "focus", "description": "d", "content": "Stay on it."}')
    return None


def synthesis_model(request: ModelRequest) -> Reply:
    answer = team_calls(request)
    if answer is not None:
        return answer
    purpose = request.context.purpose
    me = request.context.speaker_id
    if purpose == "team.run.synthesis":
        seen = [word for word, needle in SYNTHESIS_SEES.items() if needle in request.system]
        return Reply("SYNTH " + ",".join(seen))
    if purpose == "team.run.node" and me == "linus" and not last_is_tool_result(request):
        return Reply(tool_calls=[("no_such_tool", {"q": "risks"})])
    return Reply(f"OUT-{me}")


async def test_the_synthesis_reads_the_reason_the_evidence_and_the_reminder(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(synthesis_model)})
    group = await rt.create_group("ctx", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    assert task.status is TaskStatus.REVIEW
    attempt = task.attempt
    assert attempt is not None
    runs = {r.id: r for r in attempt.runs}
    assert all(r.status is RunStatus.DONE for r in runs.values()), runs
    assert [(t.tool, t.ok) for t in runs["tech"].tools] == [("no_such_tool", False)]
    assert runs["synthesis"].output == "SYNTH " + ",".join(SYNTHESIS_SEES)


def guided_router(request: ModelRequest) -> Reply:
    prompt = request.messages[-1].content if request.messages else ""
    if request.context.purpose == "team.router":
        guided = "Intent router guidance:\nGREETINGS-OF-WORK are chat" in str(prompt)
        action = "simple_chat" if guided else "new_task"
        return Reply(json.dumps({"action": action, "reason": "r", "short_title": "T"}))
    return team_calls(request) or Reply(f"{request.context.speaker_id} chats")


async def test_the_router_reads_the_groups_intent_router_skill(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(guided_router)})
    group = await rt.create_group("guided", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    store = await rt.store()
    guidance = Skill(
        name="intent-router",
        description="How this group's messages are routed",
        content="GREETINGS-OF-WORK are chat: never open a task for them.",
        source=SkillSource.LEARNED,
        group_id=group.id,
    )
    await store.save_learned_skill(guidance)
    sent = await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    await rt.send(TeamIdle(group.id))
    assert sent.trigger == "task"
    assert await store.list_tasks(group.id) == []  # the guidance made it plain chat


def drafting_model(request: ModelRequest) -> Reply:
    purpose = request.context.purpose
    if purpose == "team.planner":
        return Reply('{"mode": "single", "vp": "steve", "reason": "one voice"}')
    if purpose == "team.draft":
        prompt = str(request.messages[-1].content)
        excerpts = prompt.split("Session excerpts:\n")[1].split("\n\n")[0]
        quoted = "ann: Plan our product launch" in excerpts and "steve: PLAN-TEXT" in excerpts
        draft = {
            "frontmatter": {"name": "launch-steps", "description": f"quoted={quoted}"},
            "content": "## Steps\n1. Plan.",
            "change_reason": "new",
        }
        return Reply(json.dumps(draft))
    return team_calls(request) or Reply("PLAN-TEXT for March")


async def test_a_skill_draft_quotes_the_tasks_session(make_runtime: MakeRuntime) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(drafting_model)})
    group = await rt.create_group("drafts", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    [task] = await store.list_tasks(group.id)
    await rt.send(AcceptTask(group.id, task.id, "ann"))
    await rt.send(TeamIdle(group.id))
    done = await store.get_task(group.id, task.id)
    assert done is not None and done.draft_id
    draft = await store.get_skill_draft(done.draft_id)
    assert draft is not None and draft.description == "quoted=True"


def two_tasks(request: ModelRequest) -> Reply:
    if request.context.purpose == "team.router":
        prompt = str(request.messages[-1].content)
        title = "Pricing" if "pricing" in prompt else "Launch"
        return Reply(json.dumps({"action": "new_task", "reason": "r", "short_title": title}))
    if request.context.purpose == "team.planner":
        return Reply('{"mode": "single", "vp": "steve", "reason": "one voice"}')
    return team_calls(request) or Reply("an answer")


async def test_a_new_task_sets_the_open_one_aside_with_a_notice(
    make_runtime: MakeRuntime,
) -> None:
    rt = make_runtime(provider_overrides={"offline": ScriptedModel(two_tasks)})
    group = await rt.create_group("two", ROSTER, settings=GroupSettingsPatch(team_mode=True))
    await rt.send(Ingest(group.id, "ann", "Plan our product launch for March"))
    await rt.send(TeamIdle(group.id))
    second = await rt.send(Ingest(group.id, "ann", "Now work out our pricing tiers"))
    await rt.send(TeamIdle(group.id))
    store = await rt.store()
    pricing, launch = await store.list_tasks(group.id)
    assert (pricing.title, launch.title) == ("Pricing", "Launch")
    active = await store.active_task(group.id)
    assert active is not None and active.id == pricing.id
    [parked] = [n for n in notices(await all_events(rt, group.id)) if _rule(n) == "task_parked"]
    assert parked["detail"]["taskId"] == launch.id and parked["detail"]["byTaskId"] == pricing.id
    assert "Launch" in parked["message"] and "Pricing" in parked["message"]
    # The notice is in the group log too, answering the message that opened the new task.
    log = await store.read_messages(group.id)
    [stored] = [m for m in log if m.meta.get("notice", {}).get("rule") == "task_parked"]
    assert stored.meta["chainId"] == second.message_id


def _rule(data: dict[str, object]) -> object:
    detail = data.get("detail")
    return detail.get("rule") if isinstance(detail, dict) else None


def test_a_synthesis_after_a_failed_part_says_what_is_missing() -> None:
    parts = (
        DependencyOutput("market", "steve", "size the market", "OUT-steve"),
        DependencyOutput("tech", "linus", "list the risks", "", ok=False),
    )
    said_in = {"en": "Team result: 1 of 2 parts finished", "zh": "2 个部分中完成了 1 个"}
    for language, said in said_in.items():
        synthesis = Delegation(
            task_id="t1",
            attempt=1,
            run_id="synthesis",
            role=RunRole.SYNTHESIS,
            goal="launch",
            request="plan it",
            work="one plan",
            dependencies=parts,
            language=language,
        )
        context = synthesis.execution_context()
        assert said in context and synthesis.purpose == "team.run.synthesis"
    node = replace(synthesis, role=RunRole.NODE, language="en")
    assert "Team result" not in node.execution_context() and node.purpose == "team.run.node"
