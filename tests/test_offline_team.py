"""The offline model's answers to team calls parse into real decisions, plans and skills.

Each test runs the team component itself (router, planner, skill selection,
guidance, drafts) with a Complete that asks :func:`team_answer`, exactly as
the offline provider would, so a change to a prompt's headings that the
offline model no longer understands shows up here.
"""

from __future__ import annotations

import json

import pytest

from engine.call_context import CallContext, CallMode
from engine.events import TextDelta
from engine.messages import Message
from engine.providers.base import ModelRequest, StopItem
from engine.providers.offline import OfflineProvider
from engine.providers.offline_team import TEAM_NODES, TEAM_PURPOSES, team_answer
from engine.providers.scripted import Reply, ScriptedModel
from protocol.tasks import (
    ActivatedSkill,
    Attempt,
    PlanMode,
    PlanNode,
    Run,
    RunRole,
    RunStatus,
    Skill,
    SkillSource,
    Task,
    TaskAction,
    TaskStatus,
    ToolUse,
)
from team.calls import ModelCall, Purpose
from team.evidence import accept, build_evidence
from team.planner import RosterEntry, plan, waves
from team.router import route
from team.skills import (
    BM25Retriever,
    assemble_skills,
    ephemeral_guidance,
    fallback_guidance,
    resolve_node_skills,
    synthesize_draft,
)

ROSTER = [
    RosterEntry("steve", "Steve Jobs", "product and design"),
    RosterEntry("linus", "Linus Torvalds", "systems engineering"),
    RosterEntry("ada", "Ada Lovelace", "analysis and maths"),
    RosterEntry("grace", "Grace Hopper", "compilers and teaching"),
    RosterEntry("alan", "Alan Turing", "computation"),
]


async def offline(call: ModelCall) -> str:
    """A Complete answered the way the unscripted offline model answers."""
    answer = team_answer(call.purpose.value, call.system, call.prompt)
    assert answer is not None, call.purpose
    return answer


def task(status: TaskStatus = TaskStatus.REVIEW) -> Task:
    return Task(
        id="t1",
        group_id="g1",
        title="Launch plan",
        goal="Plan the spring launch",
        status=status,
        created_by="ann",
        created_at=1.0,
        updated_at=1.0,
    )


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("hi there", TaskAction.SIMPLE_CHAT),
        ("what do you think of Linus?", TaskAction.SIMPLE_CHAT),
        ("please write a launch plan", TaskAction.NEW_TASK),
        ("we need a full rollout for the new billing system next quarter", TaskAction.NEW_TASK),
        ("帮我写一份发布计划", TaskAction.NEW_TASK),
        ("你好", TaskAction.SIMPLE_CHAT),
    ],
)
async def test_router_without_a_task(message: str, action: TaskAction) -> None:
    decision = await route(offline, message, active=None, recent=[])
    assert decision.action is action and not decision.fallback
    assert bool(decision.short_title) == (action is TaskAction.NEW_TASK)


@pytest.mark.parametrize(
    ("message", "action"),
    [
        ("looks good, thanks", TaskAction.CLOSE_TASK),
        ("可以了", TaskAction.CLOSE_TASK),
        ("let's drop it", TaskAction.ABANDON_TASK),
        ("算了，不做了", TaskAction.ABANDON_TASK),
        ("change the dates to May instead", TaskAction.REVISE_TASK),
        ("把预算修改一下", TaskAction.REVISE_TASK),
        ("go on with the next part", TaskAction.CONTINUE_TASK),
    ],
)
async def test_router_with_an_active_task(message: str, action: TaskAction) -> None:
    decision = await route(offline, message, active=task(), recent=[])
    assert decision.action is action and not decision.fallback


async def test_router_treats_a_closed_task_as_none() -> None:
    decision = await route(offline, "thanks", active=task(TaskStatus.ACCEPTED), recent=[])
    assert decision.action is TaskAction.SIMPLE_CHAT


async def test_planner_makes_a_team_with_one_dependency() -> None:
    result = await plan(
        offline,
        goal="Plan the launch",
        request="plan it",
        attempt=1,
        roster=ROSTER[:3],
        default_vp="ada",
    )
    assert result.mode is PlanMode.TEAM and not result.fallback
    assert [n.id for n in result.nodes] == ["n1", "n2", "n3"]
    assert [n.vp for n in result.nodes] == ["steve", "linus", "ada"]
    assert result.nodes[2].depends_on == ["n1"] and result.synthesizer == "steve"
    assert all("Plan the launch" in n.task for n in result.nodes)
    assert [[n.id for n in layer] for layer in waves(result)] == [["n1", "n2"], ["n3"]]


async def test_planner_caps_the_team_and_plans_single_for_one_vp() -> None:
    big = await plan(offline, goal="g", request="r", attempt=1, roster=ROSTER, default_vp="ada")
    assert big.mode is PlanMode.TEAM and len(big.nodes) == TEAM_NODES
    two = await plan(offline, goal="g", request="r", attempt=1, roster=ROSTER[:2], default_vp="ada")
    assert two.mode is PlanMode.TEAM and all(not n.depends_on for n in two.nodes)
    one = await plan(
        offline, goal="g", request="r", attempt=1, roster=ROSTER[1:2], default_vp="ada"
    )
    assert one.mode is PlanMode.SINGLE and one.vp == "linus" and not one.fallback


async def test_planner_in_chinese() -> None:
    result = await plan(
        offline,
        goal="制定春季发布方案",
        request="做个方案",
        attempt=1,
        roster=ROSTER[:2],
        default_vp="ada",
        language="zh",
    )
    assert result.mode is PlanMode.TEAM and "制定春季发布方案" in result.nodes[0].task


def skill(name: str, description: str) -> Skill:
    return Skill(
        name=name,
        description=description,
        content=f"# {name}\n\nSteps.",
        source=SkillSource.BUILTIN,
    )


async def test_skill_selection_picks_the_best_candidate_shown() -> None:
    library = [
        skill("market-sizing", "Estimate the size of a market for a product launch"),
        skill("release-notes", "Write release notes for a software launch"),
        skill("tax-filing", "File quarterly taxes"),
    ]
    node = PlanNode(id="n1", vp="steve", task="size the market for the launch")
    chosen = await resolve_node_skills(
        offline, library=library, retriever=BM25Retriever(), node=node, goal="launch", request=""
    )
    assert [s.name for s in chosen] == ["market-sizing"]
    picked = await assemble_skills(
        offline,
        library=library,
        retriever=BM25Retriever(),
        task_description="write the release notes for the launch",
        max_detailed=1,
    )
    assert len(picked) == 1 and picked[0].name in {"market-sizing", "release-notes"}


def test_skill_selection_without_candidates_is_empty() -> None:
    for purpose in ("team.skills.node", "team.skills.shortlist", "team.skills.final"):
        assert team_answer(purpose, "", "Task description:\nx") == "[]"


async def test_guidance_is_used_not_replaced_by_the_local_fallback() -> None:
    node = PlanNode(id="n2", vp="linus", task="Review the deployment pipeline")
    made = await ephemeral_guidance(offline, goal="Ship v2", request="ship it", node=node)
    assert made.source is SkillSource.EPHEMERAL and made.name.startswith("ephemeral:")
    assert "Review the deployment pipeline" in made.content
    assert made.content != fallback_guidance("Ship v2", node).content


async def test_a_draft_from_accepted_evidence_is_the_models_and_passes_safety() -> None:
    t = task()
    attempt = Attempt(
        index=1,
        request="plan the launch",
        message_id="m1",
        action=TaskAction.NEW_TASK,
        runs=[
            Run(
                id="single",
                role=RunRole.SINGLE,
                vp="steve",
                status=RunStatus.DONE,
                output="Launch in April.",
                skills=[ActivatedSkill(name="ephemeral:x", source="ephemeral")],
                tools=[ToolUse(tool="web_search")],
            )
        ],
        final_run="single",
        started_at=1.0,
    )
    t.attempts.append(attempt)
    evidence = accept([build_evidence(t, attempt, 2.0)], "single")
    draft = await synthesize_draft(
        offline, task=t, evidence=evidence, library=[], draft_id="d1", ts=3.0
    )
    assert draft.safety.ok, draft.safety.problems
    assert draft.name == "plan-the-spring-launch" and draft.tools == ["web_search"]
    assert draft.change_reason == "learned from an accepted task"


def test_guidance_and_draft_answers_without_their_headings_are_still_json() -> None:
    guidance = json.loads(team_answer("team.guidance", "", "nothing here") or "")
    assert set(guidance) == {"guidance_name", "description", "content", "tags"}
    draft = json.loads(team_answer("team.draft", "", "nothing here") or "")
    assert set(draft) == {"frontmatter", "content", "change_reason"}
    assert set(draft["frontmatter"]) == {"name", "description", "tools"}
    assert team_answer("chat", "", "hi") is None


def request(purpose: str | None, prompt: str, model: str = "default") -> ModelRequest:
    context = CallContext(mode=CallMode.TASK, purpose=purpose) if purpose else CallContext()
    return ModelRequest(model=model, system="sys", messages=[Message.user(prompt)], context=context)


async def text_of(provider: OfflineProvider | ScriptedModel, req: ModelRequest) -> str:
    items = [item async for item in provider.stream(req)]
    assert isinstance(items[-1], StopItem)
    return "".join(i.text for i in items if isinstance(i, TextDelta))


ROUTER_PROMPT = "Active task:\nnull\n\nCurrent user message:\nplease draft a plan"


async def test_the_offline_provider_answers_team_calls_with_team_answer() -> None:
    provider = OfflineProvider()
    # A fixed reply length (benchmarks) and a visible pace do not apply to JSON answers.
    req = request("team.router", ROUTER_PROMPT, model="default?tokens=3&tps=1000")
    text = await text_of(provider, req)
    assert json.loads(text)["action"] == "new_task"
    assert text == team_answer("team.router", "sys", ROUTER_PROMPT)


async def test_the_offline_provider_still_chats_without_a_team_purpose() -> None:
    chat = await text_of(OfflineProvider(), request(None, "please draft a plan"))
    assert "draft a plan" in chat and not chat.startswith("{")
    other = await text_of(OfflineProvider(), request("summary", "please draft a plan"))
    assert not other.startswith("{")


async def test_a_scripted_model_receives_team_calls_and_their_purpose() -> None:
    seen: list[str] = []

    def script(req: ModelRequest) -> Reply:
        seen.append(str(req.context.purpose))
        return Reply('{"action": "simple_chat", "reason": "scripted"}')

    provider = ScriptedModel(script)
    text = await text_of(provider, request("team.router", ROUTER_PROMPT))
    assert json.loads(text)["reason"] == "scripted" and seen == ["team.router"]
    queued = ScriptedModel(["not json"])
    assert await text_of(queued, request("team.planner", "Roster:\n[]")) == "not json"
    queued.assert_complete()


def test_every_purpose_of_team_calls_is_known_to_the_offline_model() -> None:
    assert {p.value for p in Purpose} == set(TEAM_PURPOSES)
