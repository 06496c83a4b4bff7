"""Skills: the two model selectors (per plan node, and for a whole task) and ephemeral guidance.

Every model call is answered by :class:`Scripted`, an async function that
returns (or raises) what each test scripts per purpose and records the calls.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from protocol.tasks import PlanNode, SkillSource
from team.calls import CallFailed, ModelCall, Purpose
from team.skills import (
    BM25Retriever,
    activation_message,
    assemble_skills,
    ephemeral_guidance,
    node_skill_query,
    resolve_node_skills,
)
from team.skills.select import ACTIVATION_CHARS
from tests.skill_helpers import skill

Answer = str | BaseException


class Scripted:
    """A :class:`team.calls.Complete` that answers from a script, per purpose, in order."""

    def __init__(self, script: dict[Purpose, list[Answer]]) -> None:
        self.script = {purpose: list(answers) for purpose, answers in script.items()}
        self.calls: list[ModelCall] = []

    async def __call__(self, call: ModelCall) -> str:
        self.calls.append(call)
        answer = self.script[call.purpose].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def purposes(self) -> list[Purpose]:
        return [call.purpose for call in self.calls]


# --- selection ----------------------------------------------------------------

LIBRARY = [
    skill("launch-plan", "Plan a product launch.", "LAUNCH BODY " * 200),
    skill("launch-comms", "Launch announcements and launch copy.", "COMMS BODY"),
    skill("launch-risks", "Risks of a launch.", "RISK BODY"),
    skill("launch-budget", "Budget for a launch.", "BUDGET BODY"),
    skill("launch-metrics", "Metrics after a launch.", "METRICS BODY"),
    skill("gardening", "Grow tomatoes.", "SOIL BODY"),
]
NODE = PlanNode(
    id="n1",
    vp="alice",
    task="Draft the launch timeline",
    capabilities=["planning", "scheduling"],
    skill_query="launch plan",
    expected_output="A dated timeline",
)


def test_node_skill_query_joins_the_non_empty_parts() -> None:
    node = NODE.model_copy(update={"capabilities": [], "skill_query": ""})
    assert node_skill_query(node, "Ship v2", "") == "Draft the launch timeline\nShip v2"
    assert node_skill_query(NODE, "goal", "req").splitlines() == [
        "launch plan",
        "Draft the launch timeline",
        "planning scheduling",
        "goal",
        "req",
    ]


async def test_resolve_node_skills_keeps_only_candidates_in_model_order() -> None:
    answer = '["launch-risks", "invented-skill", "gardening", "launch-plan", "launch-risks", 3]'
    model = Scripted({Purpose.SKILL_NODE: [answer]})
    chosen = await resolve_node_skills(
        model,
        library=LIBRARY,
        retriever=BM25Retriever(),
        node=NODE,
        goal="Ship the v2 launch",
        request="plan it",
    )
    # "gardening" is in the library but was not a candidate: it is dropped too.
    assert [s.name for s in chosen] == ["launch-risks", "launch-plan"]
    [call] = model.calls
    assert call.purpose == Purpose.SKILL_NODE
    assert "JSON array" in call.system and "invent" in call.system
    assert call.prompt.startswith("Node skill query:\nlaunch plan\nDraft the launch timeline")
    assert "Candidate skills:\n- launch-plan: Plan a product launch." in call.prompt
    assert "- gardening" not in call.prompt
    assert "LAUNCH BODY" not in call.prompt


@pytest.mark.parametrize(
    "answer",
    ["[]", "no idea", '["launch-plan"', '["made-up"]', CallFailed("down"), TimeoutError()],
)
async def test_resolve_node_skills_falls_back_to_nothing(answer: Answer) -> None:
    model = Scripted({Purpose.SKILL_NODE: [answer]})
    chosen = await resolve_node_skills(
        model, library=LIBRARY, retriever=BM25Retriever(), node=NODE, goal="g", request="r"
    )
    assert chosen == []


async def test_resolve_node_skills_gives_a_node_at_most_max_active_skills() -> None:
    answer = '["launch-risks", "launch-plan", "launch-comms", "launch-budget", "launch-metrics"]'
    model = Scripted({Purpose.SKILL_NODE: [answer, answer]})

    async def names(**limit: int) -> list[str]:
        chosen = await resolve_node_skills(
            model,
            library=LIBRARY,
            retriever=BM25Retriever(),
            node=NODE,
            goal="launch",
            request="r",
            **limit,
        )
        return [s.name for s in chosen]

    assert await names() == ["launch-risks", "launch-plan", "launch-comms"]
    assert "a JSON array of at most 3 names" in model.calls[0].prompt
    assert await names(max_active=1) == ["launch-risks"]
    assert "at most 1 names" in model.calls[1].prompt
    assert await names(max_active=0) == [] and len(model.calls) == 2  # none asked: no call


async def test_resolve_node_skills_without_candidates_makes_no_call() -> None:
    model = Scripted({})
    node = NODE.model_copy(update={"task": "Sing a song", "skill_query": "", "capabilities": []})
    chosen = await resolve_node_skills(
        model, library=LIBRARY, retriever=BM25Retriever(), node=node, goal="", request=""
    )
    assert chosen == [] and model.calls == []


async def test_assemble_skills_shortlists_then_chooses_from_bodies() -> None:
    model = Scripted(
        {
            Purpose.SKILL_SHORTLIST: ['["launch-plan", "launch-comms", "gardening", "x"]'],
            Purpose.SKILL_FINAL: ['```json\n["launch-comms", "launch-risks", "launch-plan"]\n```'],
        }
    )
    chosen = await assemble_skills(
        model,
        library=LIBRARY,
        retriever=BM25Retriever(),
        task_description="Plan the launch: budget, risks, comms and metrics",
        max_detailed=2,
        max_active=3,
    )
    # launch-risks was not shortlisted, so the final stage cannot bring it back.
    assert [s.name for s in chosen] == ["launch-comms", "launch-plan"]
    shortlist, final = model.calls
    assert model.purposes() == [Purpose.SKILL_SHORTLIST, Purpose.SKILL_FINAL]
    assert "Selection stage: shortlist" in shortlist.system
    assert "at most 2" in shortlist.system and "at most 2" in shortlist.prompt
    assert shortlist.prompt.startswith("Task description:\nPlan the launch")
    assert "- launch-metrics: Metrics after a launch." in shortlist.prompt
    assert "BODY" not in shortlist.prompt  # summaries only
    assert "Selection stage: final" in final.system and "at most 3" in final.system
    assert "COMMS BODY" in final.prompt and "LAUNCH BODY" in final.prompt
    assert "METRICS BODY" not in final.prompt
    assert final.prompt.count("LAUNCH BODY") < 200  # each body is cut
    assert "\n\nReturn only JSON" in final.prompt


async def test_assemble_skills_few_candidates_go_straight_to_final() -> None:
    model = Scripted({Purpose.SKILL_FINAL: ['["launch-risks", "launch-plan"]']})
    chosen = await assemble_skills(
        model,
        library=LIBRARY,
        retriever=BM25Retriever(),
        task_description="launch risks",
        max_detailed=8,
        max_active=1,
    )
    assert [s.name for s in chosen] == ["launch-risks"]
    assert model.purposes() == [Purpose.SKILL_FINAL]


@pytest.mark.parametrize(
    "script",
    [
        {Purpose.SKILL_SHORTLIST: [CallFailed("down")]},
        {Purpose.SKILL_SHORTLIST: ["[]"]},
        {Purpose.SKILL_SHORTLIST: ['["launch-plan"]'], Purpose.SKILL_FINAL: ["not json"]},
        {Purpose.SKILL_SHORTLIST: ['["launch-plan"]'], Purpose.SKILL_FINAL: [TimeoutError()]},
    ],
)
async def test_assemble_skills_any_failure_gives_nothing(
    script: dict[Purpose, list[Answer]],
) -> None:
    chosen = await assemble_skills(
        Scripted(script),
        library=LIBRARY,
        retriever=BM25Retriever(),
        task_description="launch budget risks comms metrics",
        max_detailed=2,
    )
    assert chosen == []


async def test_assemble_skills_skips_ephemeral_and_empty_queries() -> None:
    ephemeral = skill("ephemeral:x", "launch", source=SkillSource.EPHEMERAL)
    model = Scripted({})
    for description in ("", "launch"):
        chosen = await assemble_skills(
            model, library=[ephemeral], retriever=BM25Retriever(), task_description=description
        )
        assert chosen == []
    assert model.calls == []


def test_activation_message() -> None:
    published = skill("launch-plan", "Plan a launch.", "---\nname: x\n---\n## Steps\n1. Go.")
    text = activation_message(published)
    assert text.startswith("[Activated skill: launch-plan]\nPlan a launch.")
    assert text.endswith("## Steps\n1. Go.") and "name: x" not in text
    guidance = skill("ephemeral:n1", "For n1.", "Do it.", source=SkillSource.EPHEMERAL)
    assert "ephemeral guidance: ephemeral:n1" in activation_message(guidance)
    assert activation_message(published, "zh-CN").startswith("[已激活技能:launch-plan]")
    assert "临时指导" in activation_message(guidance, "zh")


def test_activation_message_cuts_a_huge_body_after_a_whole_line() -> None:
    lines = [f"{i}. Step number {i} of a very long learned procedure." for i in range(1, 2001)]
    huge = skill("huge", "A huge skill.", "\n".join(lines))
    text = activation_message(huge)
    header, body = text.split("\n\n", 1)
    assert header.startswith("[Activated skill: huge]")
    assert len(body) <= ACTIVATION_CHARS
    kept, mark = body.rsplit("\n", 1)
    assert mark == "[…truncated]"
    # Every line kept is a whole line of the skill, in order, from its first.
    assert kept.splitlines() == lines[: len(kept.splitlines())]
    assert len(kept) > ACTIVATION_CHARS - 200  # cut near the bound, not far before it
    # One line longer than the room is cut inside it; the mark still shows.
    body = activation_message(skill("wall", "One line.", "x" * 50_000)).split("\n\n", 1)[1]
    assert len(body) <= ACTIVATION_CHARS and body.endswith("x\n[…truncated]")
    # A body within the bound and a huge description: the body whole, the description cut.
    text = activation_message(skill("long-desc", "word " * 1_000, "1. Go."), "zh")
    assert text.endswith("\n\n1. Go.") and "truncated" not in text
    assert len(text.splitlines()[1]) <= 500


# --- ephemeral guidance -------------------------------------------------------


async def test_ephemeral_guidance_from_the_model() -> None:
    answer = json.dumps(
        {
            "guidance_name": "Launch Timeline Draft",
            "description": "Draft a dated launch timeline.",
            "content": "## Steps\n1. List milestones.\n2. Date them.",
            "tags": ["launch"],
        }
    )
    model = Scripted({Purpose.GUIDANCE: [f"Here you go:\n{answer}"]})
    guidance = await ephemeral_guidance(model, goal="Ship v2", request="plan it", node=NODE)
    assert guidance.name == "ephemeral:launch-timeline-draft"
    assert guidance.source == SkillSource.EPHEMERAL
    assert guidance.version.startswith("ephemeral:") and len(guidance.version) > 10
    assert guidance.description == "Draft a dated launch timeline."
    assert guidance.content.startswith("## Steps") and guidance.tools == []
    [call] = model.calls
    assert call.purpose == Purpose.GUIDANCE
    assert "guidance_name, description, content, tags" in call.system
    assert call.prompt.startswith("Create procedural guidance")
    for heading in (
        "Task goal:\nShip v2",
        "Current user request:\nplan it",
        "Node id:\nn1",
        "Node task:\nDraft the launch timeline",
        "Skill query:\nlaunch plan",
        "Required capabilities:\n- planning\n- scheduling",
    ):
        assert heading in call.prompt
    assert "implementation claims" in call.prompt and "publish metadata" in call.prompt


@pytest.mark.parametrize(
    "answer",
    [
        CallFailed("no model"),
        TimeoutError(),
        "plain words",
        '{"guidance_name": "x", "content": ""}',
    ],
)
async def test_ephemeral_guidance_falls_back_locally(answer: Answer) -> None:
    model = Scripted({Purpose.GUIDANCE: [answer]})
    guidance = await ephemeral_guidance(model, goal="Ship v2", request="r", node=NODE)
    assert guidance.name == "ephemeral:n1"
    assert guidance.source == SkillSource.EPHEMERAL
    assert guidance.version.startswith("ephemeral:")
    content = guidance.content
    assert "## Objective\nDraft the launch timeline" in content
    assert "## Capabilities to apply\n- planning\n- scheduling" in content
    assert "## Output\nA dated timeline" in content
    assert "Ship v2" in content


async def test_ephemeral_guidance_names_fall_back_to_the_node() -> None:
    answer = json.dumps({"guidance_name": "日程", "content": "Do it.", "tags": []})
    model = Scripted({Purpose.GUIDANCE: [answer]})
    guidance = await ephemeral_guidance(model, goal="", request="", node=NODE)
    assert guidance.name == "ephemeral:n1"
    assert guidance.description.startswith("Guidance for node n1")


async def test_a_model_that_never_answers_is_cut_off_by_the_call_timeout() -> None:
    async def silent(call: ModelCall) -> str:
        await asyncio.Event().wait()
        return "[]"

    chosen = await resolve_node_skills(
        silent,
        library=LIBRARY,
        retriever=BM25Retriever(),
        node=NODE,
        goal="g",
        request="r",
        timeout_s=0.01,
    )
    assert chosen == []
