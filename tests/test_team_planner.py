"""The execution planner: plan validation, its fallbacks, and the waves of a team graph."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from protocol.tasks import MAX_TEAM_NODES, Plan, PlanMode, PlanNode
from team.calls import CallFailed, ModelCall, Purpose
from team.planner import (
    DEFAULT_SYNTHESIS,
    FALLBACK_BAD_ANSWER,
    FALLBACK_INVALID,
    FALLBACK_TIMEOUT,
    FALLBACK_UNREACHABLE,
    RESERVED_NODE_IDS,
    PlanInvalid,
    RosterEntry,
    build_prompt,
    plan,
    validate_plan,
    waves,
)

# What a provider error raised through Ray can look like: none of it may reach a plan.
RAY_ERROR = (
    "ray::VPActor.complete() (pid=48213, ip=10.0.3.17, actor_id=af31c0d2)\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/app/engine/providers/openai.py", line 211, in stream\n'
    "httpx.ConnectError: [Errno 111] Connection refused to llm-7.internal:8443"
)

ROSTER = [
    RosterEntry("steve", "Steve Jobs", "product and design", ("web_search",)),
    RosterEntry("linus", "Linus Torvalds", "systems engineering"),
    RosterEntry("ada", "Ada Lovelace", "analysis and maths"),
]


class Script:
    """A Complete that answers from a list: text, an exception to raise, or 'hang'."""

    def __init__(self, *steps: str | BaseException) -> None:
        self.steps = list(steps)
        self.calls: list[ModelCall] = []

    async def __call__(self, call: ModelCall) -> str:
        self.calls.append(call)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        if step == "hang":
            await asyncio.Event().wait()  # never set: only the planner's timeout ends it
        return step


def node(node_id: str, vp: str = "linus", deps: list[str] | None = None, **kw: Any) -> dict:
    return {"id": node_id, "vp": vp, "task": f"do {node_id}", "depends_on": deps or [], **kw}


def team(*nodes: Any, **kw: Any) -> dict[str, Any]:
    return {"mode": "team", "reason": "r", "strategy": "s", "nodes": list(nodes), **kw}


def test_a_valid_team_plan_resolves_names_and_keeps_its_fields() -> None:
    raw = team(
        node("research", "Steve Jobs", capabilities=["market"], skill_query="market sizing"),
        node("build", "LINUS", ["research"], expected_output="a prototype"),
        final_synthesis_instruction="Merge.",
        synthesizer="@ada",
    )
    result = validate_plan(raw, ROSTER, "steve")
    assert result.mode is PlanMode.TEAM and not result.fallback
    assert [n.vp for n in result.nodes] == ["steve", "linus"]
    assert result.nodes[0].capabilities == ["market"]
    assert result.nodes[0].skill_query == "market sizing"
    assert result.nodes[1].depends_on == ["research"]
    assert result.nodes[1].expected_output == "a prototype"
    assert result.synthesizer == "ada" and result.final_synthesis_instruction == "Merge."
    assert result.reason == "r" and result.strategy == "s"


def test_team_defaults_for_synthesizer_and_instruction() -> None:
    result = validate_plan(team(node("a"), node("b"), synthesizer="nobody"), ROSTER, "steve")
    assert result.synthesizer == "steve"
    assert result.final_synthesis_instruction == DEFAULT_SYNTHESIS


def test_single_resolves_its_vp_or_takes_the_default() -> None:
    single = validate_plan({"mode": "single", "vp": "Ada Lovelace"}, ROSTER, "steve")
    assert single.mode is PlanMode.SINGLE and single.vp == "ada" and single.nodes == []
    unknown = validate_plan({"mode": "Single", "vp": "grace"}, ROSTER, "steve")
    assert unknown.vp == "steve"


def test_a_team_of_one_node_is_single_for_that_vp() -> None:
    result = validate_plan(team(node("only", "ada")), ROSTER, "steve")
    assert result.mode is PlanMode.SINGLE and result.vp == "ada" and not result.nodes


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"mode": "swarm"}, "mode must be"),
        ({"reason": "no mode"}, "mode must be"),
        (team(), "2 to"),
        ({"mode": "team", "nodes": "a,b"}, "list of nodes"),
        (team(node("a"), node("b", "grace")), "not in the roster"),
        (team(node("a"), node("a", "ada")), "used twice"),
        (team(node("a"), node("b", deps=["c"])), "unknown node 'c'"),
        (team(node("a", deps=["a"]), node("b")), "depends on itself"),
        (team(node("a"), node("b c")), "letters, digits"),
        (team(node("a"), node("x" * 41)), "letters, digits"),
        (team(node("a"), node("")), "has no id"),
        (team(node("a"), {"id": "b", "vp": "ada", "task": "  "}), "has no task"),
        (team(node("a"), node("b", capabilities="fast")), "list of strings"),
        (team(node("a"), node("b", capabilities=[1])), "list of strings"),
        (team(node("a"), "b"), "not an object"),
        (team(node("a"), node("b"), reason=3), "reason must be a string"),
    ],
)
def test_invalid_plans_say_why(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanInvalid, match=words):
        validate_plan(raw, ROSTER, "steve")


@pytest.mark.parametrize("reserved", ["synthesis", "single", "Synthesis", "SINGLE"])
def test_the_executors_run_ids_are_refused_as_node_ids(reserved: str) -> None:
    assert reserved.lower() in RESERVED_NODE_IDS
    raw = team(node("a"), node(reserved, "ada", ["a"]))
    with pytest.raises(PlanInvalid, match=f"node id '{reserved}' is reserved"):
        validate_plan(raw, ROSTER, "steve")
    # Only the whole id is reserved.
    ok = team(node("a"), node(f"{reserved}-draft", "ada", ["a"]))
    assert validate_plan(ok, ROSTER, "steve").mode is PlanMode.TEAM


def test_several_nodes_of_one_vp_are_a_valid_team() -> None:
    raw = team(node("a", "ada"), node("b", "Ada Lovelace"), node("c", "ada", ["a"]))
    result = validate_plan(raw, ROSTER, "steve")
    assert result.mode is PlanMode.TEAM and [n.vp for n in result.nodes] == ["ada"] * 3
    # The model is told what that costs: one VP's nodes run one after another.
    prompt = build_prompt(goal="g", request="r", attempt=1, roster=ROSTER)
    assert "Nodes given to the same VP run one after another" in prompt


def test_too_many_nodes() -> None:
    raw = team(*(node(f"n{i}") for i in range(MAX_TEAM_NODES + 1)))
    with pytest.raises(PlanInvalid, match=f"not {MAX_TEAM_NODES + 1}"):
        validate_plan(raw, ROSTER, "steve")
    raw = team(*(node(f"n{i}") for i in range(MAX_TEAM_NODES)))
    assert len(validate_plan(raw, ROSTER, "steve").nodes) == MAX_TEAM_NODES


def test_a_cycle_is_named() -> None:
    raw = team(node("a", deps=["c"]), node("b", deps=["a"]), node("c", deps=["b"]), node("d"))
    with pytest.raises(PlanInvalid, match="cycle: a -> c -> b -> a"):
        validate_plan(raw, ROSTER, "steve")


async def test_a_valid_answer_becomes_the_plan() -> None:
    complete = Script("Here you go:\n" + json.dumps(team(node("a", "steve"), node("b", "ada"))))
    result = await plan(
        complete, goal="g", request="r", attempt=1, roster=ROSTER, default_vp="linus"
    )
    assert result.mode is PlanMode.TEAM and not result.fallback
    assert complete.calls[0].purpose is Purpose.PLANNER


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (CallFailed("no key"), FALLBACK_UNREACHABLE),
        (ValueError("odd"), FALLBACK_UNREACHABLE),
        (CallFailed(RAY_ERROR), FALLBACK_UNREACHABLE),
        (RuntimeError(RAY_ERROR), FALLBACK_UNREACHABLE),
        (TimeoutError(), FALLBACK_TIMEOUT),
        ("not json at all", FALLBACK_BAD_ANSWER),
        (
            json.dumps(team(node("a"), node("a"))),
            FALLBACK_INVALID + "node id 'a' is used twice",
        ),
        (
            json.dumps(team(node("a"), node("synthesis"))),
            FALLBACK_INVALID + "node id 'synthesis' is reserved: the executor names its own "
            "synthesis run so",
        ),
    ],
)
async def test_any_failure_falls_back_to_single(step: str | BaseException, why: str) -> None:
    result = await plan(
        Script(step), goal="g", request="r", attempt=2, roster=ROSTER, default_vp="linus"
    )
    assert result == Plan(mode=PlanMode.SINGLE, vp="linus", fallback=True, reason=why)
    shown = result.model_dump_json()
    for secret in ("no key", "odd", "pid=", "10.0.3.17", "Traceback", "llm-7.internal"):
        assert secret not in shown


async def test_an_invalid_plans_reason_stays_short() -> None:
    answer = json.dumps({"mode": "swarm " * 2_000})
    result = await plan(
        Script(answer), goal="g", request="r", attempt=1, roster=ROSTER, default_vp="linus"
    )
    assert result.fallback and result.reason.startswith(FALLBACK_INVALID + "mode must be")
    assert len(result.reason) <= len(FALLBACK_INVALID) + 200


async def test_a_hung_model_times_out_into_the_fallback() -> None:
    result = await plan(
        Script("hang"),
        goal="g",
        request="r",
        attempt=1,
        roster=ROSTER,
        default_vp="ada",
        timeout_s=0.01,
    )
    assert result.fallback and result.vp == "ada" and result.reason == FALLBACK_TIMEOUT


def test_the_prompt_has_the_seed_headings_in_order() -> None:
    prompt = build_prompt(
        goal="Plan the launch",
        request="and the budget",
        attempt=3,
        roster=ROSTER,
        history="attempt 1: too long",
    )
    order = [
        "Decide execution mode for this internal Task attempt.",
        "Use mode=team only when",
        '"final_synthesis_instruction"',
        "Roster:\n",
        "Task goal:\nPlan the launch",
        "Current user request:\nand the budget",
        "Attempt index: 3",
        "Relevant task history:\nattempt 1: too long",
    ]
    positions = [prompt.index(heading) for heading in order]
    assert positions == sorted(positions)
    roster = json.loads(prompt.split("Roster:\n")[1].split("\n\n")[0])
    assert roster[0] == {
        "id": "steve",
        "name": "Steve Jobs",
        "description": "product and design",
        "tools": ["web_search"],
    }
    assert "Relevant task history" not in build_prompt(
        goal="g", request="r", attempt=1, roster=ROSTER
    )


@pytest.mark.parametrize(("language", "name"), [("en", "English"), ("zh", "Chinese")])
async def test_the_plans_prose_is_asked_for_in_the_groups_language(
    language: str, name: str
) -> None:
    complete = Script(json.dumps({"mode": "single", "vp": "ada", "reason": "一人即可"}))
    result = await plan(
        complete,
        goal="制定发布方案",
        request="做个方案",
        attempt=1,
        roster=ROSTER,
        default_vp="steve",
        language=language,
    )
    call = complete.calls[0]
    assert f"Write reason, strategy, tasks and instructions in {name}." in call.prompt
    assert call.language == language
    assert result.reason == "一人即可" and not result.fallback


def test_waves_put_each_node_after_its_dependencies() -> None:
    raw = team(
        node("d", deps=["b", "c"]),
        node("a"),
        node("b", deps=["a"]),
        node("c"),
        node("e", deps=["d"]),
    )
    layers = waves(validate_plan(raw, ROSTER, "steve"))
    assert [[n.id for n in layer] for layer in layers] == [["a", "c"], ["b"], ["d"], ["e"]]
    assert waves(Plan(mode=PlanMode.SINGLE, vp="ada")) == []


def test_waves_refuse_a_graph_that_never_validated() -> None:
    looped = Plan(
        mode=PlanMode.TEAM,
        nodes=[
            PlanNode(id="a", vp="ada", task="t", depends_on=["b"]),
            PlanNode(id="b", vp="ada", task="t", depends_on=["a"]),
        ],
    )
    with pytest.raises(PlanInvalid, match="cycle"):
        waves(looped)
    dangling = Plan(
        mode=PlanMode.TEAM, nodes=[PlanNode(id="a", vp="ada", task="t", depends_on=["z"])]
    )
    with pytest.raises(PlanInvalid, match="unknown"):
        waves(dangling)
