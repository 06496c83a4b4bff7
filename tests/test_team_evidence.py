"""Task evidence: the facts of an attempt, marked on acceptance, rendered within bounds."""

from __future__ import annotations

from protocol.tasks import (
    ActivatedSkill,
    Attempt,
    Plan,
    PlanMode,
    Run,
    RunRole,
    RunStatus,
    Task,
    TaskAction,
    ToolUse,
)
from team.evidence import accept, build_evidence, render_evidence


def attempt(index: int = 1, plan: Plan | None = None, runs: list[Run] | None = None) -> Attempt:
    return Attempt(
        index=index,
        request="plan the spring launch",
        message_id=f"m{index}",
        action=TaskAction.NEW_TASK,
        plan=plan,
        runs=runs or [],
        final_run="synthesis" if runs else None,
        started_at=10.0,
    )


def team_runs(output: str = "market is large") -> list[Run]:
    return [
        Run(
            id="market",
            role=RunRole.NODE,
            vp="steve",
            task="size the market",
            status=RunStatus.DONE,
            output=output,
            skills=[ActivatedSkill(name="market-sizing", version="2", source="builtin")],
            tools=[
                ToolUse(tool="web_search", ok=True, summary="3 results"),
                ToolUse(tool="web_fetch", ok=False, summary="timed out"),
            ],
        ),
        Run(
            id="tech",
            role=RunRole.NODE,
            vp="linus",
            task="check the stack",
            status=RunStatus.FAILED,
            error="the turn was lost",
            tools=[ToolUse(tool="web_search", ok=True)],
        ),
        Run(
            id="synthesis",
            role=RunRole.SYNTHESIS,
            vp="ada",
            status=RunStatus.DONE,
            output="Launch in April.",
            depends_on=["market", "tech"],
        ),
    ]


def task(*attempts: Attempt) -> Task:
    return Task(
        id="t1",
        group_id="g1",
        title="Launch",
        goal="A plan for the spring launch",
        created_by="ann",
        created_at=1.0,
        updated_at=2.0,
        attempts=list(attempts),
    )


def test_evidence_records_the_facts_of_the_attempt() -> None:
    a = attempt(plan=Plan(mode=PlanMode.TEAM), runs=team_runs())
    evidence = build_evidence(task(a), a, 42.0)
    assert (evidence.task_id, evidence.group_id, evidence.attempt) == ("t1", "g1", 1)
    assert evidence.goal == "A plan for the spring launch"
    assert evidence.request == "plan the spring launch"
    assert evidence.mode is PlanMode.TEAM
    assert [r.id for r in evidence.runs] == ["market", "tech", "synthesis"]
    assert evidence.runs[1].status is RunStatus.FAILED
    assert evidence.tool_names == ["web_fetch", "web_search"]
    assert evidence.final_output == "Launch in April." and evidence.final_run == "synthesis"
    assert evidence.accepted_run is None and evidence.recorded_at == 42.0


def test_evidence_is_a_copy_of_the_runs() -> None:
    a = attempt(plan=Plan(mode=PlanMode.TEAM), runs=team_runs())
    evidence = build_evidence(task(a), a, 1.0)
    a.runs[0].output = "changed later"
    a.runs[0].tools.append(ToolUse(tool="shell"))
    assert evidence.runs[0].output == "market is large"
    assert len(evidence.runs[0].tools) == 2


def test_an_attempt_without_plan_or_runs_is_single_with_no_output() -> None:
    a = attempt()
    evidence = build_evidence(task(a), a, 1.0)
    assert evidence.mode is PlanMode.SINGLE and evidence.runs == []
    assert evidence.tool_names == [] and evidence.final_output == ""
    assert evidence.final_run is None


def test_accept_marks_copies_of_every_attempt() -> None:
    first, second = attempt(1), attempt(2, runs=team_runs())
    t = task(first, second)
    evidences = [build_evidence(t, first, 1.0), build_evidence(t, second, 2.0)]
    accepted = accept(evidences, "synthesis")
    assert [e.accepted_run for e in accepted] == ["synthesis", "synthesis"]
    assert [e.attempt for e in accepted] == [1, 2]
    assert all(e.accepted_run is None for e in evidences)


def test_rendering_shows_every_fact() -> None:
    a = attempt(plan=Plan(mode=PlanMode.TEAM), runs=team_runs())
    text = render_evidence(accept([build_evidence(task(a), a, 1.0)], "synthesis")[0])
    for expected in [
        "Task goal: A plan for the spring launch",
        "Request (attempt 1): plan the spring launch",
        "Mode: team",
        "Tools used: web_fetch, web_search",
        "Accepted run: synthesis",
        "- node market: steve, done",
        "  task: size the market",
        "  skills: market-sizing@2",
        "  tool web_search ok: 3 results",
        "  tool web_fetch failed: timed out",
        "  output: market is large",
        "- node tech: linus, failed",
        "  error: the turn was lost",
        "- synthesis synthesis: ada, done (accepted)",
        "  depends on: market, tech",
        "Final output (synthesis):\nLaunch in April.",
    ]:
        assert expected in text, expected
    # The final run's output is shown once, as the final output.
    assert text.count("Launch in April.") == 1
    # Only the accepted run is marked.
    assert text.count("(accepted)") == 1


def test_rendering_before_acceptance_marks_no_run() -> None:
    a = attempt(plan=Plan(mode=PlanMode.TEAM), runs=team_runs())
    text = render_evidence(build_evidence(task(a), a, 1.0))
    assert "(accepted)" not in text and "Accepted run:" not in text
    assert "- synthesis synthesis: ada, done\n" in text


def test_rendering_stays_within_its_bound_and_keeps_every_run() -> None:
    a = attempt(plan=Plan(mode=PlanMode.TEAM), runs=team_runs(output="word " * 5000))
    a.runs[-1].output = "answer " * 5000
    evidence = build_evidence(task(a), a, 1.0)
    text = render_evidence(evidence, max_chars=3000)
    assert len(text) <= 3000
    assert "- node tech: linus, failed" in text and "Final output (synthesis):" in text
    assert "more characters]" in text
    # The room left is shared: the node's output and the final output both show.
    node_output = text.split("  output: ")[1].split("\n")[0]
    final = text.split("Final output (synthesis):\n")[1]
    assert len(node_output) > 500 and len(final) > 500


def test_rendering_an_empty_attempt() -> None:
    a = attempt()
    text = render_evidence(build_evidence(task(a), a, 1.0))
    assert "Runs: none" in text and text.endswith("Final output:\n(none)")
