"""What a VP is told when it runs one part of a task: the delegated context.

A task's turns are ordinary VP turns with a :class:`Delegation` attached. It
travels in the turn request (a plain frozen dataclass, so it crosses Ray as
a value) and the VP's turn uses it three ways:

* :meth:`Delegation.execution_context` is added to the system prompt under
  an ``# Execution Context`` heading: the parent task, this run's part,
  constraints, the expected output and the outputs of the runs it depends on;
* :meth:`Delegation.user_input` is the turn's last user message (the node's
  sub-task, the synthesis request, or the person's request for a single run);
* :attr:`Delegation.skills` become user messages right after the system
  prompt, one per activated skill, and are never stored in the transcript.

The synthesis also reads the planner's reason, whether every part of the
team finished, the team's evidence (each run's status, skills and tool
calls, ok or failed) and a reminder not to repeat a tool call that already
failed: the answer builds on the material at hand. The turn's model call
carries :attr:`Delegation.purpose` in its call context (``team.run.<role>``).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.tasks import NODE_OUTPUT_CHARS, RunRole

# A dependency's output as a dependent run reads it.
DEPENDENCY_CHARS = 4_000
# The previous attempt's answer as every run of the next attempt reads it.
PREVIOUS_CHARS = 3_000


@dataclass(frozen=True, slots=True)
class DependencyOutput:
    """The output of a run another run depends on (or the synthesis reads)."""

    run_id: str
    vp: str
    task: str
    output: str
    ok: bool = True


@dataclass(frozen=True, slots=True)
class SkillText:
    """An activated skill: its name and version, and the message that activates it."""

    name: str
    version: str
    source: str
    text: str


_HEADINGS = {
    "en": {
        "context": "# Execution Context",
        "task": "Parent task",
        "goal": "Goal",
        "request": "The person's request",
        "attempt": "Attempt",
        "role": "Your part",
        "node": "You are one member of a team working on this task in parallel. Do only your "
        "part and hand back its result; the team's answers are combined afterwards.",
        "synthesis": "The team has finished its parts. Write the one answer the group gets: "
        "combine every member's output, resolve conflicts, and do not mention internal "
        "node ids.",
        "single": "You were chosen to do this task yourself.",
        "strategy": "Team strategy",
        "constraints": "Constraints",
        "expected": "Expected output",
        "deps": "Outputs you build on",
        "failed": "(this part failed)",
        "instruction": "Synthesis instruction",
        "previous": "The previous attempt's answer (the person asked for another attempt)",
        "reason": "Planner's reason",
        "team_ok": "Team result: every part finished.",
        "team_partial": "Team result: {done} of {total} parts finished; say what is missing.",
        "evidence": "Team evidence (facts of each run)",
        "no_repeat": "Tool calls that failed in the team's runs (marked failed above) will "
        "fail again: do not repeat them. Use the material at hand, state what stays "
        "uncertain and give the confirmed part.",
    },
    "zh": {
        "context": "# 执行上下文",
        "task": "上级任务",
        "goal": "目标",
        "request": "用户的请求",
        "attempt": "第几次尝试",
        "role": "你的部分",
        "node": "你是并行处理此任务的团队成员之一。只完成你的部分并交回结果；"
        "团队的回答之后会被合并。",
        "synthesis": "团队已完成各自的部分。请写出群组收到的唯一答案：综合每位成员的输出，"
        "解决冲突，不要提及内部节点编号。",
        "single": "你被选中独自完成此任务。",
        "strategy": "团队策略",
        "constraints": "约束",
        "expected": "期望输出",
        "deps": "你所依赖的输出",
        "failed": "（此部分失败）",
        "instruction": "综合说明",
        "previous": "上一次尝试的答案（用户要求再做一次）",
        "reason": "规划理由",
        "team_ok": "团队结果：所有部分都已完成。",
        "team_partial": "团队结果：{total} 个部分中完成了 {done} 个；请说明缺少什么。",
        "evidence": "团队证据（每个运行的事实）",
        "no_repeat": "团队运行中失败的工具调用（上面标为 failed）会再次失败：不要重复它们。"
        "使用已有材料，说明仍不确定之处，给出已确认的部分。",
    },
}


def _words(language: str) -> dict[str, str]:
    return _HEADINGS["zh" if language == "zh" else "en"]


@dataclass(frozen=True, slots=True)
class Delegation:
    """One run of a task attempt, as the VP that runs it is told."""

    task_id: str
    attempt: int
    run_id: str
    role: RunRole
    goal: str
    request: str
    # The node's sub-task; the synthesis instruction; the request (single).
    work: str
    expected_output: str = ""
    strategy: str = ""
    constraints: tuple[str, ...] = ()
    dependencies: tuple[DependencyOutput, ...] = ()
    skills: tuple[SkillText, ...] = ()
    # The answer of the attempt before this one, when the person asked again.
    previous: str = ""
    language: str = "en"
    # The synthesis only: the planner's reason and the team's rendered evidence.
    reason: str = ""
    evidence: str = ""

    @property
    def purpose(self) -> str:
        """What the run's model calls are for, in their call context (``team.run.<role>``)."""
        return f"team.run.{self.role.value}"

    def execution_context(self) -> str:
        """The system prompt's ``# Execution Context`` section."""
        w = _words(self.language)
        lines = [
            w["context"],
            f"{w['task']}: {self.task_id} ({w['attempt']} {self.attempt})",
            f"{w['goal']}: {self.goal}",
            f"{w['request']}: {self.request}",
            "",
            w[self.role.value],
        ]
        if self.reason:
            lines.append(f"{w['reason']}: {self.reason}")
        if self.strategy:
            lines.append(f"{w['strategy']}: {self.strategy}")
        if self.constraints:
            lines += ["", f"{w['constraints']}:", *(f"- {c}" for c in self.constraints)]
        if self.expected_output:
            lines += ["", f"{w['expected']}: {self.expected_output}"]
        if self.previous:
            lines += ["", f"{w['previous']}:", self.previous[:PREVIOUS_CHARS]]
        if self.dependencies:
            lines += ["", f"{w['deps']}:"]
            limit = NODE_OUTPUT_CHARS if self.role is RunRole.SYNTHESIS else DEPENDENCY_CHARS
            for dep in self.dependencies:
                body = dep.output[:limit] if dep.ok else w["failed"]
                lines += [f"## {dep.run_id} (@{dep.vp}): {dep.task}", body, ""]
        if self.role is RunRole.SYNTHESIS:
            lines += ["", *self._team_facts(w)]
        return "\n".join(lines).rstrip()

    def _team_facts(self, w: dict[str, str]) -> list[str]:
        """What the synthesis reads besides the outputs: the team's result, evidence, reminder."""
        done = sum(1 for dep in self.dependencies if dep.ok)
        total = len(self.dependencies)
        partial = w["team_partial"].format(done=done, total=total)
        lines = [w["team_ok"] if done == total else partial]
        if self.evidence:
            lines += ["", f"{w['evidence']}:", self.evidence]
        return [*lines, "", w["no_repeat"]]

    def user_input(self) -> str:
        """The turn's last user message: what this run must produce now."""
        w = _words(self.language)
        if self.role is RunRole.NODE:
            return f"{w['role']}: {self.work}"
        if self.role is RunRole.SYNTHESIS:
            return f"{w['instruction']}: {self.work}"
        return self.work

    def activation_texts(self) -> list[str]:
        return [skill.text for skill in self.skills]
