"""One attempt at a task, from its plan to its answer.

An :class:`AttemptRun` asks the planner whether one VP does the attempt
(``single``) or a team does (``team``), then runs it as ordinary VP turns,
each with a :class:`~team.delegation.Delegation` attached:

* **team**: every node whose dependencies are done starts at once, on its
  own VP actor, so independent nodes run in parallel; a node whose
  dependency failed is skipped. Each node gets the skills the resolver picks
  for it, or an ephemeral guidance when none fits. Then the synthesiser
  writes the one answer from every node's output.
* **single**: one run of the chosen VP, with the skills the assembler picks.

Every turn is admitted by the group's loop guard and charged to its budget
like any other; its reply streams in its own bubble and is stored in the
group log with the run it belongs to (``meta.task``). Each change of a run
is published (stored and announced as ``task_changed``). When the attempt
ends the task waits for the person's review, and the attempt's evidence is
stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ray.exceptions import RayError

from actors.group_events import GroupEvents
from actors.turns import TurnOrigin, TurnOutcome
from actors.vp_commands import Abort
from coordinator.dispatch import Dispatcher
from engine.events import StopReason
from personas.directory import PersonaDirectory
from protocol.tasks import (
    NODE_OUTPUT_CHARS,
    ActivatedSkill,
    Attempt,
    Evidence,
    Plan,
    PlanMode,
    PlanNode,
    Run,
    RunRole,
    RunStatus,
    Skill,
    Task,
    TaskStatus,
)
from store.base import Group, Store
from store.retry import until_stored
from team.calls import Complete
from team.delegation import Delegation, DependencyOutput, SkillText
from team.evidence import build_evidence, render_evidence
from team.planner import RosterEntry, plan
from team.router import ROUTER_SKILL
from team.skills import (
    BM25Retriever,
    Retriever,
    SkillLibrary,
    activation_message,
    assemble_skills,
    ephemeral_guidance,
    resolve_node_skills,
)
from telemetry import tracing

log = logging.getLogger(__name__)

# Why a turn's end counts as a failed run.
_FAILED = frozenset({StopReason.ABORTED, StopReason.ERROR, StopReason.ERROR_MAX_TURNS})
# How much of the team's evidence (runs, skills, tool calls) the synthesis reads.
SYNTHESIS_EVIDENCE_CHARS = 3_000
# Admit a run's turn: None when the loop guard lets it through, else why not.
Admit = Callable[[Group, str, str], Awaitable[str | None]]


class TaskBoard:
    """Stores a task and announces it, one change at a time per group.

    Every change is the whole task: a member who reconnects, a second tab or
    another gateway sees the same card from the newest ``task_changed``. A
    write is retried while the store is away (``store.retry``), so an
    attempt never ends with its task left running in the store. Nothing is
    written for a group that is being deleted.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        # One write at a time per group: a deletion waits for the one under way.
        self._locks: dict[str, asyncio.Lock] = {}
        self._gone: set[str] = set()

    async def forget(self, group_id: str) -> None:
        """Write nothing more for the group; returns once a write under way is done."""
        self._gone.add(group_id)
        async with self._lock(group_id):
            pass
        self._locks.pop(group_id, None)

    def _lock(self, group_id: str) -> asyncio.Lock:
        return self._locks.setdefault(group_id, asyncio.Lock())

    async def publish(self, task: Task, evidence: Evidence | None = None) -> None:
        """Store and announce ``task`` (with an attempt's ``evidence``, stored first)."""
        if task.group_id in self._gone:
            return
        async with self._lock(task.group_id):
            if task.group_id in self._gone:
                return  # the group was deleted while this write waited
            if evidence is not None:
                try:
                    await self.store.save_evidence(evidence)
                except Exception:
                    log.warning("evidence of task %s not stored", task.id, exc_info=True)
            await until_stored(lambda: self.store.save_task(task), f"task {task.id}")
            await GroupEvents(self.store, task.group_id).task_changed(task)


@dataclass(slots=True)
class TeamServices:
    """What every attempt of a coordinator works with."""

    store: Store
    turns: Dispatcher
    personas: PersonaDirectory
    board: TaskBoard
    admit: Admit
    data_dir: Path | None = None
    clock: Callable[[], float] = field(default=time.time)
    # The names of the VPs' built-in tools: a learned skill may list these
    # and the tools its task's evidence shows in use, nothing else.
    tool_names: frozenset[str] = frozenset()
    # How skills are recalled: BM25, or embeddings when the deployment
    # configures an embedding model (shared, so a library is embedded once).
    retriever: Retriever = field(default_factory=BM25Retriever)


def roster_entries(personas: PersonaDirectory, roster: Sequence[str]) -> list[RosterEntry]:
    """The group's VPs as the planner sees them: id, name, what they do, their tools."""
    entries = []
    for vp in roster:
        persona = personas.library.get(vp)
        if persona is None:
            continue
        description = " ".join(x for x in (persona.role, ", ".join(persona.traits)) if x)
        entries.append(RosterEntry(vp, persona.name, description, tuple(persona.tools or ())))
    return entries


def runs_of(plan: Plan, default_vp: str) -> list[Run]:
    """The runs a plan makes: a node each and the synthesis, or the one single run."""
    if plan.mode is PlanMode.SINGLE:
        return [Run(id="single", role=RunRole.SINGLE, vp=plan.vp or default_vp)]
    runs = [
        Run(id=n.id, role=RunRole.NODE, vp=n.vp, task=n.task, depends_on=list(n.depends_on))
        for n in plan.nodes
    ]
    synthesizer = plan.synthesizer or default_vp
    runs.append(
        Run(
            id="synthesis",
            role=RunRole.SYNTHESIS,
            vp=synthesizer,
            task=plan.final_synthesis_instruction,
            depends_on=[n.id for n in plan.nodes],
        )
    )
    return runs


class AttemptRun:
    """Runs the newest attempt of ``task`` to its end (see the module doc)."""

    def __init__(
        self,
        services: TeamServices,
        group: Group,
        task: Task,
        complete: Complete,
        origin: TurnOrigin,
        history: str | None = None,
    ) -> None:
        self.s = services
        self.group = group
        self.task = task
        attempt = task.attempt
        assert attempt is not None
        self.attempt: Attempt = attempt
        self.complete = complete
        self.history = history
        self.language = group.settings.language
        self.default_vp = group.default_vp or group.roster[0]
        self.library: list[Skill] = []
        # Set when a run's turn was aborted: the group's turns were cancelled.
        self.aborted = False
        self.retriever = services.retriever
        # The runs answer the message that asked for this attempt, acting
        # for its author with the tools it allowed (``!approve``).
        self.origin = origin
        self.previous = _previous_answer(task)

    @property
    def stopped(self) -> bool:
        """The task was abandoned, or a run was aborted (a cancel): start nothing more."""
        return self.aborted or self.task.status is TaskStatus.ABANDONED

    async def stop(self) -> None:
        """Start nothing more, and stop the runs whose turns are running."""
        self.aborted = True
        for run in self.attempt.runs:
            if run.status is RunStatus.RUNNING and run.turn_id:
                await self._abort(run)

    async def _abort(self, run: Run) -> None:
        try:
            await (await self.s.turns.vp(run.vp)).send(Abort(self.group.id, run.turn_id))
        except RayError:
            log.warning("run %s of task %s could not be stopped", run.id, self.task.id)

    async def run(self) -> None:
        """Plan, run, and leave the task for the person's review; never raises."""
        attributes = {"yeaft.task.id": self.task.id, "yeaft.task.attempt": self.attempt.index}
        try:
            with tracing.span("team_task", attributes):
                await self._steps()
        except Exception:
            log.exception("attempt %d of task %s failed", self.attempt.index, self.task.id)
            for run in self.attempt.runs:
                if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
                    run.status, run.error = RunStatus.FAILED, "the attempt failed"
        await self._finish()

    async def _steps(self) -> None:
        learned = await self.s.store.learned_skills(self.group.id)
        # The router's guidance is a skill for the router alone, never a run's.
        library = SkillLibrary.load(self.s.data_dir, learned).all()
        self.library = [skill for skill in library if skill.name != ROUTER_SKILL]
        decided = await plan(
            self.complete,
            goal=self.task.goal,
            request=self.attempt.request,
            attempt=self.attempt.index,
            roster=roster_entries(self.s.personas, self.group.roster),
            default_vp=self.default_vp,
            history=self.history,
            language=self.language,
        )
        self.attempt.plan = decided
        self.attempt.runs = runs_of(decided, self.default_vp)
        if self.stopped:
            return
        self.task.advance(TaskStatus.RUNNING, self.s.clock())
        await self.s.board.publish(self.task)
        if decided.mode is PlanMode.TEAM:
            await self._team(decided)
        else:
            await self._single()

    # -- single ---------------------------------------------------------------
    async def _single(self) -> None:
        run = self.attempt.runs[0]
        skills = await self._assembled("single", self.attempt.request)
        delegation = self._delegation(run, RunRole.SINGLE, self.attempt.request, skills=skills)
        await self._turn(run, delegation, skills)
        self.attempt.final_run = run.id

    # -- team -----------------------------------------------------------------
    async def _team(self, decided: Plan) -> None:
        finished = {node.id: asyncio.Event() for node in decided.nodes}
        await asyncio.gather(*(self._node(node, finished) for node in decided.nodes))
        synthesis = self.attempt.run("synthesis")
        assert synthesis is not None
        self.attempt.final_run = synthesis.id
        nodes = [r for r in self.attempt.runs if r.role is RunRole.NODE]
        if self.stopped or not any(r.status is RunStatus.DONE for r in nodes):
            synthesis.status = RunStatus.SKIPPED
            synthesis.error = "no node of the team finished"
            return
        deps = tuple(self._output_of(r) for r in nodes)
        instruction = decided.final_synthesis_instruction
        skills = await self._assembled("synthesis", instruction)
        delegation = replace(
            self._delegation(synthesis, RunRole.SYNTHESIS, instruction, deps=deps, skills=skills),
            reason=decided.reason,
            evidence=self._team_evidence(nodes),
        )
        await self._turn(synthesis, delegation, skills)

    def _team_evidence(self, nodes: Sequence[Run]) -> str:
        """The facts of the team's runs for the synthesis (their outputs it reads in full)."""
        evidence = build_evidence(self.task, self.attempt, self.s.clock())
        evidence = evidence.model_copy(update={"runs": [r.model_copy(deep=True) for r in nodes]})
        return render_evidence(evidence, SYNTHESIS_EVIDENCE_CHARS, outputs=False)

    async def _node(self, node: PlanNode, finished: dict[str, asyncio.Event]) -> None:
        run = self.attempt.run(node.id)
        assert run is not None
        try:
            await self._node_steps(node, run, finished)
        except Exception:
            # One node's failure is that node's: the others go on.
            log.exception("node %s of task %s failed", node.id, self.task.id)
            run.status, run.error = RunStatus.FAILED, "the node failed"
            await self.s.board.publish(self.task)
        finally:
            finished[node.id].set()

    async def _node_steps(
        self, node: PlanNode, run: Run, finished: dict[str, asyncio.Event]
    ) -> None:
        for dep in node.depends_on:
            await finished[dep].wait()
        deps = [self.attempt.run(d) for d in node.depends_on]
        if self.stopped or any(d is None or d.status is not RunStatus.DONE for d in deps):
            run.status = RunStatus.SKIPPED
            run.error = "stopped" if self.stopped else "a run it depends on did not finish"
            await self.s.board.publish(self.task)
            return
        skills = await self._node_skills(node)
        others = [
            f"@{r.vp} does “{r.task}”"
            for r in self.attempt.runs
            if r.role is RunRole.NODE and r.id != run.id
        ]
        delegation = self._delegation(
            run,
            RunRole.NODE,
            node.task,
            expected=node.expected_output,
            deps=tuple(self._output_of(d) for d in deps if d is not None),
            skills=skills,
            constraints=("Leave the other parts to the team: " + "; ".join(others),)
            if others
            else (),
        )
        await self._turn(run, delegation, skills)

    async def _node_skills(self, node: PlanNode) -> list[Skill]:
        """The published skills the resolver picks for a node, else one ephemeral guidance."""
        picked = await resolve_node_skills(
            self.complete,
            library=self.library,
            retriever=self.retriever,
            node=node,
            goal=self.task.goal,
            request=self.attempt.request,
        )
        if picked:
            return picked
        guidance = await ephemeral_guidance(
            self.complete, goal=self.task.goal, request=self.attempt.request, node=node
        )
        return [guidance]

    async def _assembled(self, phase: str, work: str) -> list[Skill]:
        """The skills the assembler picks for the single run or the synthesis."""
        decided = self.attempt.plan
        lines = [
            f"Task goal: {self.task.goal}",
            f"Current user request: {self.attempt.request}",
            f"Execution phase: {phase}; attempt {self.attempt.index}",
            f"Work: {work}",
        ]
        if decided is not None and decided.reason:
            lines.append(f"Planner reason: {decided.reason}")
        if decided is not None and decided.strategy:
            lines.append(f"Team strategy: {decided.strategy}")
        nodes = [r for r in self.attempt.runs if r.role is RunRole.NODE]
        if nodes:
            lines.append("Team parts: " + "; ".join(f"{r.id}: {r.task}" for r in nodes))
        lines.append("Prefer existing published skills.")
        return await assemble_skills(
            self.complete,
            library=self.library,
            retriever=self.retriever,
            task_description="\n".join(lines),
        )

    # -- one run ----------------------------------------------------------------
    def _delegation(
        self,
        run: Run,
        role: RunRole,
        work: str,
        *,
        expected: str = "",
        deps: tuple[DependencyOutput, ...] = (),
        skills: Sequence[Skill] = (),
        constraints: tuple[str, ...] = (),
    ) -> Delegation:
        decided = self.attempt.plan
        return Delegation(
            task_id=self.task.id,
            attempt=self.attempt.index,
            run_id=run.id,
            role=role,
            goal=self.task.goal,
            request=self.attempt.request,
            work=work,
            expected_output=expected,
            strategy=decided.strategy if decided else "",
            constraints=constraints,
            dependencies=deps,
            skills=tuple(
                SkillText(s.name, s.version, str(s.source), activation_message(s, self.language))
                for s in skills
            ),
            previous=self.previous,
            language=self.language,
        )

    @staticmethod
    def _output_of(run: Run) -> DependencyOutput:
        return DependencyOutput(run.id, run.vp, run.task, run.output, run.status is RunStatus.DONE)

    async def _turn(self, run: Run, delegation: Delegation, skills: Sequence[Skill]) -> None:
        """Run one VP turn for ``run`` and record how it went (a ``team_node`` span)."""
        attributes = {
            "yeaft.task.id": self.task.id,
            "yeaft.team.node": run.id,
            "yeaft.team.role": str(delegation.role),
            "gen_ai.agent.id": run.vp,
        }
        with tracing.span(f"team_node {run.id}", attributes) as span:
            await self._node_turn(run, delegation, skills)
            if run.status is RunStatus.FAILED:
                tracing.failed(span, "team_node_failed", run.error)

    async def _node_turn(self, run: Run, delegation: Delegation, skills: Sequence[Skill]) -> None:
        run.skills = [
            ActivatedSkill(name=s.name, version=s.version, source=str(s.source)) for s in skills
        ]
        if self.stopped:
            # Abandoned or cancelled while its skills were being chosen.
            run.status, run.error = RunStatus.SKIPPED, "stopped"
            await self.s.board.publish(self.task)
            return
        refusal = await self.s.admit(self.group, self.attempt.message_id, run.vp)
        if refusal is not None:
            run.status, run.error = RunStatus.FAILED, refusal
            await self.s.board.publish(self.task)
            return
        turns = self.s.turns
        # A run does its own part: it hands nothing on (no route_forward).
        planned = turns.plan(self.group, run.vp, self.origin)
        req = replace(planned, delegation=delegation, can_forward=False)
        await turns.record(self.group.id, [req])
        run.status, run.turn_id, run.started_at = RunStatus.RUNNING, req.turn_id, self.s.clock()
        if self.stopped:
            # Stopped while the turn was being recorded, before it was sent.
            await turns.withdraw(req, "the task was stopped before this run started")
            run.status, run.error = RunStatus.SKIPPED, "stopped"
            await self.s.board.publish(self.task)
            return
        await self.s.board.publish(self.task)
        outcome = await turns.run(req)
        self._ended(run, outcome)
        await self.s.board.publish(self.task)

    def _ended(self, run: Run, outcome: TurnOutcome | None) -> None:
        run.finished_at = self.s.clock()
        if outcome is None:
            run.status, run.error = RunStatus.FAILED, "the turn was lost"
            return
        run.message_id = outcome.message_id
        run.output = outcome.text[:NODE_OUTPUT_CHARS]
        run.tools = list(outcome.tools)
        if outcome.reason is StopReason.ABORTED:
            run.status, run.error = RunStatus.FAILED, "aborted"
            self.aborted = True
        elif outcome.reason in _FAILED or not outcome.text.strip():
            run.status = RunStatus.FAILED
            run.error = outcome.error or f"the turn ended without an answer ({outcome.reason})"
        else:
            run.status = RunStatus.DONE

    # -- the end ----------------------------------------------------------------
    async def _finish(self) -> None:
        attempt, task = self.attempt, self.task
        now = self.s.clock()
        attempt.finished_at = now
        for run in attempt.runs:
            if run.status is RunStatus.PENDING:
                run.status, run.error = RunStatus.SKIPPED, "stopped" if self.stopped else None
        final = attempt.run(attempt.final_run) if attempt.final_run else None
        attempt.failed = final is None or final.status is not RunStatus.DONE
        if task.status is not TaskStatus.ABANDONED:
            task.advance(TaskStatus.REVIEW, now)
        await self.s.board.publish(task, build_evidence(task, attempt, now))


def _previous_answer(task: Task) -> str:
    """The answer of the attempt before the newest one ("" for a first attempt)."""
    if len(task.attempts) < 2:
        return ""
    before = task.attempts[-2]
    final = before.run(before.final_run) if before.final_run else None
    return final.output if final is not None and final.status is RunStatus.DONE else ""
