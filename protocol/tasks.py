"""Team mode on the wire and in the store: tasks, plans, node runs, evidence, skills.

A group with team mode on (or a message that starts with ``/task``) may
turn a person's message into a *task*: an intent router decides whether the
message is plain chat or a task action, a planner decides whether one VP
does the work (``single``) or a team of VPs does (``team``: a graph of
nodes, each a VP of the roster with a sub-task, run in parallel where no
dependency orders them), and one VP writes the synthesised answer. A task is
done only when a person accepts it; an accepted task's evidence can be
turned into a skill draft that a person publishes.

Every model here is a :class:`~protocol.common.ServerModel` (camelCase on
the wire, extra fields allowed), built by our own code. A task's status
moves by :data:`TASK_TRANSITIONS`; :meth:`Task.advance` refuses any other
move.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from protocol.common import ServerModel, WireEnum

# How many characters of a node's output a task keeps (the whole reply is in
# the group log); dependent nodes and the synthesis receive this much.
NODE_OUTPUT_CHARS = 8_000
MAX_TEAM_NODES = 8


class TaskAction(WireEnum):
    """What the intent router decided for a person's message."""

    SIMPLE_CHAT = "simple_chat"  # not a task: today's mention fan-out
    NEW_TASK = "new_task"
    CONTINUE_TASK = "continue_task"  # another attempt at the active task, same goal
    REVISE_TASK = "revise_task"  # another attempt, the person asked for changes
    CLOSE_TASK = "close_task"  # the person says the active task is done (acceptance)
    ABANDON_TASK = "abandon_task"


class RouterDecision(ServerModel):
    """The router's answer; ``fallback`` is True when it was not the model's own."""

    action: TaskAction
    reason: str = ""
    short_title: str = ""
    fallback: bool = False


class TaskStatus(WireEnum):
    PLANNING = "planning"  # the planner is deciding single or team
    RUNNING = "running"  # an attempt's turns are running
    REVIEW = "review"  # the attempt ended: the person accepts, revises or abandons
    ACCEPTED = "accepted"  # done, by the person's acceptance only
    ABANDONED = "abandoned"


TASK_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PLANNING: frozenset({TaskStatus.RUNNING, TaskStatus.REVIEW, TaskStatus.ABANDONED}),
    TaskStatus.RUNNING: frozenset({TaskStatus.REVIEW, TaskStatus.ABANDONED}),
    TaskStatus.REVIEW: frozenset({TaskStatus.PLANNING, TaskStatus.ACCEPTED, TaskStatus.ABANDONED}),
    TaskStatus.ACCEPTED: frozenset(),
    TaskStatus.ABANDONED: frozenset(),
}
OPEN_STATUSES = frozenset({TaskStatus.PLANNING, TaskStatus.RUNNING, TaskStatus.REVIEW})


class IllegalTaskTransition(ValueError):
    """A task was asked to move to a status its current one does not lead to."""


class PlanMode(WireEnum):
    SINGLE = "single"
    TEAM = "team"


class PlanNode(ServerModel):
    """One sub-task of a team plan, done by one VP of the roster."""

    id: str
    vp: str
    task: str
    capabilities: list[str] = Field(default_factory=list)
    expected_output: str = ""
    depends_on: list[str] = Field(default_factory=list)
    # Text the skill retrieval searches with, besides the task itself.
    skill_query: str = ""


class Plan(ServerModel):
    """The planner's decision for one attempt; ``fallback``: not the model's own.

    ``single``: ``vp`` does the whole attempt. ``team``: ``nodes`` form an
    acyclic graph over the roster, and ``synthesizer`` writes the answer
    from their outputs by ``final_synthesis_instruction``.
    """

    mode: PlanMode
    reason: str = ""
    strategy: str = ""
    vp: str | None = None
    nodes: list[PlanNode] = Field(default_factory=list)
    final_synthesis_instruction: str = ""
    synthesizer: str | None = None
    fallback: bool = False


class RunStatus(WireEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"  # a dependency failed, or the attempt was stopped


class RunRole(WireEnum):
    SINGLE = "single"
    NODE = "node"
    SYNTHESIS = "synthesis"


class ActivatedSkill(ServerModel):
    """A skill a run was given: published (``builtin``/``data``/``learned``) or ephemeral."""

    name: str
    version: str = ""
    source: str = ""


class ToolUse(ServerModel):
    """One tool call a run made, as evidence: which tool, whether it worked, a short result."""

    tool: str
    ok: bool = True
    summary: str = ""


class Run(ServerModel):
    """One VP turn of an attempt: a team node, the synthesis, or the single run."""

    id: str  # the node id; "synthesis"; "single"
    role: RunRole
    vp: str
    task: str = ""
    status: RunStatus = RunStatus.PENDING
    turn_id: str | None = None
    message_id: str | None = None
    output: str = ""
    error: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    skills: list[ActivatedSkill] = Field(default_factory=list)
    tools: list[ToolUse] = Field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None


class Attempt(ServerModel):
    """One try at a task: the request that started it, its plan and its runs."""

    index: int = Field(ge=1)
    request: str
    message_id: str
    action: TaskAction
    plan: Plan | None = None
    runs: list[Run] = Field(default_factory=list)
    final_run: str | None = None  # the run whose output is the attempt's answer
    started_at: float
    finished_at: float | None = None
    failed: bool = False

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs if r.id == run_id), None)


class Task(ServerModel):
    """A piece of work a group asked for, over one or more attempts."""

    id: str
    group_id: str
    title: str
    goal: str
    status: TaskStatus = TaskStatus.PLANNING
    created_by: str
    created_at: float
    updated_at: float
    attempts: list[Attempt] = Field(default_factory=list)
    accepted_by: str | None = None
    # The skill draft learned from this task once accepted, if any.
    draft_id: str | None = None

    @property
    def attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def open(self) -> bool:
        return self.status in OPEN_STATUSES

    def advance(self, status: TaskStatus, ts: float) -> None:
        if status not in TASK_TRANSITIONS[self.status]:
            raise IllegalTaskTransition(
                f"task {self.id} cannot go from {self.status.value} to {status.value}"
            )
        self.status = status
        self.updated_at = ts


class Evidence(ServerModel):
    """Facts of one attempt, for people and for learning; no judgement, no score.

    ``accepted_run`` names the run whose output the person accepted (set on
    every attempt's evidence when the task is accepted: the final attempt's
    final run).
    """

    task_id: str
    group_id: str
    attempt: int
    goal: str
    request: str
    mode: PlanMode
    runs: list[Run] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    final_output: str = ""
    final_run: str | None = None
    accepted_run: str | None = None
    recorded_at: float


class SkillSource(WireEnum):
    BUILTIN = "builtin"  # shipped with the server
    DATA = "data"  # a file in the data directory's skills folder
    LEARNED = "learned"  # a published draft, kept in the store
    EPHEMERAL = "ephemeral"  # guidance made for one node, never stored


class Skill(ServerModel):
    """A markdown skill: front matter (name, description, tools) and a body."""

    name: str
    description: str
    tools: list[str] = Field(default_factory=list)
    content: str
    source: SkillSource = SkillSource.BUILTIN
    version: str = "1"
    # The group a learned skill was learned in: it is that group's alone, since
    # it quotes the group's conversation. None for built-in and data skills.
    group_id: str | None = None


class DraftAction(WireEnum):
    NEW = "new"
    REVISE = "revise"
    MERGE = "merge"


class DraftStatus(WireEnum):
    DRAFT = "draft"  # waiting for a person to publish it
    BLOCKED = "blocked"  # the safety check refused it; it cannot be published
    PUBLISHED = "published"


class SafetyReport(ServerModel):
    ok: bool
    problems: list[str] = Field(default_factory=list)


class SkillDraft(ServerModel):
    """A skill learned from an accepted task, waiting for a person to publish it."""

    id: str
    task_id: str
    group_id: str
    action: DraftAction
    name: str
    description: str
    tools: list[str] = Field(default_factory=list)
    content: str
    change_reason: str = ""
    related: list[str] = Field(default_factory=list)
    safety: SafetyReport
    status: DraftStatus = DraftStatus.DRAFT
    created_at: float
    published_by: str | None = None


class TaskChanged(ServerModel):
    """A group's task changed (created, planned, a run moved, accepted...).

    It goes through the group's event log, so every member, tab and gateway
    sees the same card, and a reconnecting client catches up with ``lastSeq``.
    The runs' outputs are left empty: each is a stored reply in the group
    log, and ``GET /api/groups/{id}/tasks/{taskId}`` has them.
    """

    type: Literal["task_changed"] = "task_changed"
    group_id: str
    task: Task
    seq: int | None = Field(default=None, ge=0)


def task_payload(task: Task) -> dict[str, Any]:
    """A task as the router and planner prompts show it (short, no run outputs)."""
    attempt = task.attempt
    return {
        "id": task.id,
        "title": task.title,
        "goal": task.goal,
        "status": task.status.value,
        "attempts": len(task.attempts),
        "lastRequest": attempt.request if attempt else None,
        "lastMode": attempt.plan.mode.value if attempt and attempt.plan else None,
    }
