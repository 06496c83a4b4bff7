"""Task evidence: the facts of one attempt, for people and for learning.

:func:`build_evidence` records what an attempt did: its goal and request,
the mode it ran in, every run (a team node, the synthesis, or the single
run) with its status, output, skills and tool calls, the tools used and the
final answer. Evidence judges nothing: it has no score, decides nothing
about success and writes no prompt for another attempt. Only a person's
acceptance ends a task, and :func:`accept` then marks, on the evidence of
every attempt, which run's output was accepted.

:func:`render_evidence` turns one record into bounded plain text. It is the
one way an attempt is written out: learning puts each attempt of a task in
its draft prompt with it (:func:`team.skills.drafts.render_attempts` splits
the room among them) and people read the same text, so it reads well, marks
the accepted run and each tool call's outcome, and never grows past its
``max_chars``, however long the outputs were.

Evidence holds copies of the runs, so a record stays what it was when the
attempt ended even if the task object changes later.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.tasks import Attempt, Evidence, PlanMode, Run, Task

__all__ = ["accept", "build_evidence", "render_evidence"]

# The head fields are cut to this much so that the outputs keep most of the room.
_HEAD_CHARS = 800
_TASK_CHARS = 300
_SUMMARY_CHARS = 160
# Below this an output is not worth showing cut; it is left out with a note.
_MIN_OUTPUT_CHARS = 40


def build_evidence(task: Task, attempt: Attempt, ts: float) -> Evidence:
    """The evidence of ``attempt`` of ``task``, recorded at ``ts``; facts only."""
    runs = [run.model_copy(deep=True) for run in attempt.runs]
    final = attempt.run(attempt.final_run) if attempt.final_run else None
    return Evidence(
        task_id=task.id,
        group_id=task.group_id,
        attempt=attempt.index,
        goal=task.goal,
        request=attempt.request,
        mode=attempt.plan.mode if attempt.plan else PlanMode.SINGLE,
        runs=runs,
        tool_names=sorted({use.tool for run in runs for use in run.tools}),
        final_output=final.output if final else "",
        final_run=attempt.final_run,
        recorded_at=ts,
    )


def accept(evidences: list[Evidence], run_id: str) -> list[Evidence]:
    """Copies of ``evidences``, each naming ``run_id`` as the accepted run."""
    return [e.model_copy(update={"accepted_run": run_id}, deep=True) for e in evidences]


def _cut(text: str, limit: int) -> str:
    """``text`` with at most ``limit`` characters; a cut is marked and says how much was left."""
    text = text.strip()
    if len(text) <= limit:
        return text
    # The note's length with the largest count it could show, so the cut text fits.
    keep = limit - len(f" … [{len(text)} more characters]")
    if keep <= 0:
        return text[:limit]
    head = text[:keep].rstrip()
    return f"{head} … [{len(text) - len(head)} more characters]"


def _fair_shares(lengths: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` among texts of ``lengths``: short ones whole, long ones equal shares."""
    shares = [0] * len(lengths)
    open_ = sorted(range(len(lengths)), key=lambda i: lengths[i])
    left = max(budget, 0)
    while open_:
        each = left // len(open_)
        i = open_[0]
        if lengths[i] <= each:
            shares[i] = lengths[i]
            left -= lengths[i]
            open_.pop(0)
            continue
        for j in open_:
            shares[j] = each
        break
    return shares


def _run_head(run: Run, accepted: bool) -> list[str]:
    """A run's lines without its output: who, what, status, skills, tools, error."""
    mark = " (accepted)" if accepted else ""
    lines = [f"- {run.role.value} {run.id}: {run.vp}, {run.status.value}{mark}"]
    if run.task:
        lines.append(f"  task: {_cut(run.task, _TASK_CHARS)}")
    if run.depends_on:
        lines.append(f"  depends on: {', '.join(run.depends_on)}")
    if run.skills:
        names = [f"{s.name}@{s.version}" if s.version else s.name for s in run.skills]
        lines.append(f"  skills: {', '.join(names)}")
    for use in run.tools:
        state = "ok" if use.ok else "failed"
        summary = f": {_cut(use.summary, _SUMMARY_CHARS)}" if use.summary else ""
        lines.append(f"  tool {use.tool} {state}{summary}")
    if run.error:
        lines.append(f"  error: {_cut(run.error, _SUMMARY_CHARS)}")
    return lines


def render_evidence(evidence: Evidence, max_chars: int = 6000, *, outputs: bool = True) -> str:
    """``evidence`` as plain text of at most ``max_chars`` characters.

    ``outputs=False`` gives the head and each run's facts only (the
    synthesis reads the outputs in full elsewhere).

    The head (goal, request, mode, each run's facts) comes first; the run
    outputs and the final output share what room is left, short ones whole
    and long ones cut evenly. The final run's output appears once, as the
    final output. The run ``evidence.accepted_run`` names is marked
    "(accepted)"; each tool call says whether it was ok or failed.
    """
    head = [
        f"Task goal: {_cut(evidence.goal, _HEAD_CHARS)}",
        f"Request (attempt {evidence.attempt}): {_cut(evidence.request, _HEAD_CHARS)}",
        f"Mode: {evidence.mode.value}",
    ]
    if evidence.tool_names:
        head.append(f"Tools used: {', '.join(evidence.tool_names)}")
    if evidence.accepted_run:
        head.append(f"Accepted run: {evidence.accepted_run}")
    blocks = [_run_head(run, run.id == evidence.accepted_run) for run in evidence.runs]
    if not outputs:
        runs = [line for block in blocks for line in block]
        return "\n".join([*head, "Runs:" if runs else "Runs: none", *runs])[:max_chars]
    # The outputs to fit: each run's but the final run's, then the final output.
    texts: list[str] = []
    for run, block in zip(evidence.runs, blocks, strict=True):
        if run.id == evidence.final_run and run.output.strip():
            block.append("  output: the final output, below")
            texts.append("")
        else:
            texts.append(run.output.strip())
    final = evidence.final_output.strip()
    label = f"Final output ({evidence.final_run}):" if evidence.final_run else "Final output:"
    skeleton = "\n".join([*head, "Runs:", *(line for b in blocks for line in b), label])
    # Each shown output costs its label line ("  output: ") besides its text.
    overhead = sum(11 for o in texts if o) + 1
    shares = _fair_shares([len(o) for o in [*texts, final]], max_chars - len(skeleton) - overhead)
    lines = [*head, "Runs:" if blocks else "Runs: none"]
    for block, output, share in zip(blocks, texts, shares, strict=False):
        lines += block
        if output:
            fits = len(output) <= share or share >= _MIN_OUTPUT_CHARS
            shown = _cut(output, share) if fits else "[left out for room]"
            lines.append(f"  output: {shown}")
    lines += [label, _cut(final, shares[-1]) if final else "(none)"]
    return "\n".join(lines)[:max_chars]
