"""Learning: a skill draft synthesised from an accepted task's evidence.

When a person accepts a task, :func:`synthesize_draft` turns the evidence of
its attempts into a :class:`~protocol.tasks.SkillDraft` a person may later
publish. What kind of draft follows from the evidence alone, not from the
model:

- the *related* skills are the published skills the runs activated that the
  library still has (ephemeral guidance is never related);
- none → ``new``; exactly one → ``revise`` that skill (the draft keeps its
  name, so publishing replaces it); two or more → ``merge`` them.

The model (``Purpose.DRAFT``) is shown every attempt's evidence, each written
by :func:`team.evidence.render_evidence` (:func:`render_attempts` gives the
accepted attempt the larger share of the room), and excerpts of the session
the task lived in (the people's requests and the runs' replies, each cut,
newest kept when there are too many), and writes the front matter,
the body and the reason for the change. Its answer is normalised: the name
becomes a slug, an empty tools list is filled from the tools the runs used,
and a missing description or body, or an answer that is not JSON, gives a
local draft built from the evidence instead. Every draft then passes the
deterministic safety check (:mod:`team.skills.safety`); a draft that fails is
``blocked`` and can never be published.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.tasks import (
    DraftAction,
    DraftStatus,
    Evidence,
    PlanMode,
    SafetyReport,
    Skill,
    SkillDraft,
    SkillSource,
    Task,
)
from team.calls import Complete, ModelCall, Purpose, parse_json_object
from team.evidence import render_evidence
from team.skills.common import ask, describe_error
from team.skills.guidance import EPHEMERAL_PREFIX
from team.skills.loader import slugify, strip_front_matter
from team.skills.safety import DESCRIPTION_MAX, check_draft
from team.text import excerpt, one_line

__all__ = [
    "EVIDENCE_CHARS",
    "SESSION_CHARS",
    "choose_action",
    "evidence_tool_names",
    "fallback_body",
    "related_skills",
    "render_attempts",
    "render_session",
    "synthesize_draft",
]

log = logging.getLogger(__name__)

# The evidence shown to the model is cut to about this many characters.
EVIDENCE_CHARS = 6_000
# The session excerpts: each message cut to a line, the newest within the total.
SESSION_CHARS = 3_000
SESSION_LINE_CHARS = 400
_MAX_TOKENS = 3_000
_RELATED_BODY_CHARS = 1_200

_SYSTEM = (
    "You synthesise reusable skill drafts from accepted task evidence. A skill is a "
    "markdown procedure that future agents follow for similar tasks; a person reviews "
    "the draft before it is published. Return JSON only, with exactly the keys "
    "frontmatter, content, change_reason."
)

_REASONS = {
    DraftAction.NEW: (
        "No published skill was activated in the accepted runs: capture the procedure "
        "that worked as a new skill."
    ),
    DraftAction.REVISE: (
        "The accepted runs used one published skill: revise it with what this task taught, "
        "keeping its name."
    ),
    DraftAction.MERGE: (
        "The accepted runs used several published skills: merge them into one skill that "
        "covers this kind of task."
    ),
}


def related_skills(evidence: Sequence[Evidence], library: Sequence[Skill]) -> list[Skill]:
    """The published skills the evidence's runs activated that ``library`` has, first seen first."""
    published = {s.name: s for s in library if s.source != SkillSource.EPHEMERAL}
    found: dict[str, Skill] = {}
    for item in evidence:
        for run in item.runs:
            for used in run.skills:
                ephemeral = used.source == SkillSource.EPHEMERAL.value
                if ephemeral or used.name.startswith(EPHEMERAL_PREFIX):
                    continue
                if used.name in published:
                    found.setdefault(used.name, published[used.name])
    return list(found.values())


def choose_action(related: Sequence[Skill]) -> DraftAction:
    """``new`` with no related skill, ``revise`` with one, ``merge`` with more."""
    if not related:
        return DraftAction.NEW
    return DraftAction.REVISE if len(related) == 1 else DraftAction.MERGE


def _called_tools(evidence: Sequence[Evidence]) -> list[str]:
    names = (use.tool for item in evidence for run in item.runs for use in run.tools)
    return list(dict.fromkeys(name for name in names if name))


def _selected_tools(evidence: Sequence[Evidence]) -> list[str]:
    return list(dict.fromkeys(name for item in evidence for name in item.tool_names if name))


def evidence_tool_names(evidence: Sequence[Evidence]) -> list[str]:
    """The tools of the evidence: those it records, then any other the runs called."""
    return list(dict.fromkeys([*_selected_tools(evidence), *_called_tools(evidence)]))


def _accepted(evidence: Sequence[Evidence]) -> Evidence | None:
    """The attempt whose answer was accepted (or the last attempt when none says so)."""
    for item in reversed(evidence):
        if item.accepted_run:
            return item
    return evidence[-1] if evidence else None


def render_attempts(evidence: Sequence[Evidence], limit: int = EVIDENCE_CHARS) -> str:
    """Every attempt's evidence as prompt text of at most ``limit`` characters, oldest first.

    Each attempt is written by :func:`team.evidence.render_evidence` under a
    heading that names it. The accepted attempt gets at least half of the
    room: it is what the skill should teach; earlier attempts share the rest.
    """
    if not evidence:
        return "(none)"
    accepted = _accepted(evidence)
    others = len(evidence) - 1
    # The blank lines between the blocks come out of the room first.
    room = limit - 2 * others
    main_budget = room if others == 0 else room // 2
    other_budget = (room - main_budget) // others if others else 0
    label = "accepted" if accepted is not None and accepted.accepted_run else "newest"
    blocks = []
    for item in evidence:
        chosen = item is accepted
        heading = f"Attempt {item.attempt} of {len(evidence)}" + (f" ({label}):" if chosen else ":")
        # accept() names the accepted run on every attempt's evidence, and run ids
        # ("synthesis", "n1") repeat across attempts: only the chosen attempt's run was accepted.
        shown = item if chosen else item.model_copy(update={"accepted_run": None})
        budget = (main_budget if chosen else other_budget) - len(heading) - 1
        blocks.append(f"{heading}\n{render_evidence(shown, max(budget, 0))}")
    return "\n\n".join(blocks)[:limit]


def render_session(excerpts: Sequence[str], limit: int = SESSION_CHARS) -> str:
    """The session excerpts as prompt lines, each cut, the newest kept within ``limit``."""
    lines: list[str] = []
    used = 0
    for line in reversed(excerpts):
        shown = "- " + excerpt(one_line(line, SESSION_LINE_CHARS), SESSION_LINE_CHARS)
        if used + len(shown) + 1 > limit:
            break
        lines.append(shown)
        used += len(shown) + 1
    return "\n".join(reversed(lines)) if lines else "(none)"


def _candidate_kind(evidence: Sequence[Evidence]) -> str:
    if any(item.mode == PlanMode.TEAM for item in evidence):
        return "team workflow (several agents, then a synthesis)"
    if _called_tools(evidence):
        return "tool workflow (one agent using tools)"
    return "procedure (one agent, no tools)"


def _related_text(related: Sequence[Skill]) -> str:
    if not related:
        return "(none)"
    blocks = []
    for skill in related:
        body = excerpt(strip_front_matter(skill.content), _RELATED_BODY_CHARS)
        lines = [f"- {skill.name}: {one_line(skill.description)}", "  Text:"]
        lines.extend(f"    {line}" if line.strip() else "" for line in body.splitlines())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _task_summary(task: Task, accepted: Evidence | None) -> str:
    lines = [
        f"- Title: {one_line(task.title, 200)}",
        f"  Goal: {one_line(task.goal, 600)}",
        f"  Attempts: {len(task.attempts)}",
    ]
    if accepted is not None:
        lines.append(f"  Accepted attempt: {accepted.attempt}")
    return "\n".join(lines)


def _accepted_run_id(accepted: Evidence | None) -> str:
    if accepted is None:
        return "(none)"
    run = accepted.accepted_run or accepted.final_run
    return f"{run} (attempt {accepted.attempt})" if run else "(none)"


def _rules(action: DraftAction, related: Sequence[Skill]) -> str:
    rules = [
        "- frontmatter must include name (lowercase letters, digits and hyphens), "
        "description (one or two sentences on when to use the skill) and tools "
        "(a JSON array of tool names, [] when none).",
        "- content: the markdown body without front matter: when to use, steps, the "
        "output's shape, pitfalls the evidence shows. Write it for similar future tasks: "
        "no people's names, no secrets, no details that only fit this one task.",
        "- change_reason: one sentence on what the draft adds or changes.",
    ]
    if action == DraftAction.REVISE:
        rules.insert(1, f'- Keep the name "{related[0].name}": this revises that skill.')
    elif action == DraftAction.MERGE:
        rules.insert(1, "- Give the merged skill one name covering all the related skills.")
    return "Rules:\n" + "\n".join(rules)


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none)"


def _prompt(
    task: Task,
    evidence: Sequence[Evidence],
    action: DraftAction,
    related: Sequence[Skill],
    session: Sequence[str] = (),
) -> str:
    accepted = _accepted(evidence)
    sections = [
        "Synthesise a skill draft from this accepted task.",
        f"Action:\n{action.value}",
        f"Candidate kind:\n{_candidate_kind(evidence)}",
        f"Reason:\n{_REASONS[action]}",
        f"Related skills:\n{_related_text(related)}",
        f"Called tool names:\n{_listed(_called_tools(evidence))}",
        f"Run-selected tool names:\n{_listed(_selected_tools(evidence))}",
        f"Task summaries:\n{_task_summary(task, accepted)}",
        f"Session excerpts:\n{render_session(session)}",
        f"Evidence:\n{render_attempts(evidence)}",
        f"final_accepted_run_id:\n{_accepted_run_id(accepted)}",
        _rules(action, related),
        "Return JSON only with keys: frontmatter, content, change_reason.",
    ]
    return "\n\n".join(sections)


@dataclass(frozen=True, slots=True)
class _Body:
    """What a draft says, before it gets its id, status and safety report."""

    name: str
    description: str
    tools: list[str]
    content: str
    change_reason: str


def _unique(name: str, taken: Collection[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... when another skill already has it."""
    if name not in taken:
        return name
    number = 2
    while f"{name}-{number}" in taken:
        number += 1
    return f"{name}-{number}"


def _draft_name(
    proposed: str,
    task: Task,
    action: DraftAction,
    related: Sequence[Skill],
    library: Sequence[Skill],
) -> str:
    if action == DraftAction.REVISE:
        return related[0].name
    name = slugify(proposed) or slugify(task.title) or slugify(task.goal)
    name = name or (related[0].name if related else "learned-skill")
    # A new or merged skill must not silently replace an unrelated published one.
    allowed = {skill.name for skill in related}
    return _unique(name, {s.name for s in library if s.name not in allowed})


def _string_list(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    names = (item.strip() for item in value if isinstance(item, str))
    return list(dict.fromkeys(name for name in names if name))


def _from_answer(data: dict[str, Any]) -> tuple[dict[str, Any], str, str] | None:
    """The answer's front matter, body and reason, or None when a required part is missing."""
    front = data.get("frontmatter")
    content = data.get("content")
    if not isinstance(front, dict) or not isinstance(content, str):
        return None
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        return None
    body = strip_front_matter(content)
    if not body:
        return None
    reason = data.get("change_reason")
    return front, body, reason.strip() if isinstance(reason, str) else ""


def _output_shape(final_output: str) -> str:
    """The outline of an accepted answer: its headings, or its length when it has none."""
    headings = [line.strip() for line in final_output.splitlines() if line.lstrip().startswith("#")]
    if headings:
        outline = "\n".join(f"- {one_line(h.lstrip('#'), 120)}" for h in headings[:12])
        return f"Shape the answer like the accepted one, with these sections:\n{outline}"
    words = len(final_output.split())
    if words:
        return f"A direct answer without sections, about {words} words long like the accepted one."
    return "A direct, self-contained answer to the request."


def _fallback_steps(accepted: Evidence | None) -> str:
    runs = [run for run in (accepted.runs if accepted else []) if run.output or run.task]
    steps = [f"{run.vp} ({run.role.value}): {one_line(run.task or run.id, 240)}" for run in runs]
    if not steps:
        steps = ["Work out what the request asks for and what a complete answer contains."]
    steps.append("Check the answer against the request before handing it over.")
    return "\n".join(f"{number}. {step}" for number, step in enumerate(steps, start=1))


def fallback_body(
    task: Task, evidence: Sequence[Evidence], action: DraftAction, related: Sequence[Skill]
) -> tuple[str, str]:
    """A locally made description and body, for when the model's answer is unusable.

    A revision keeps the skill's current text and adds the notes after it:
    publishing the draft replaces the skill, and its procedure must not be lost.
    """
    accepted = _accepted(evidence)
    revising = action == DraftAction.REVISE
    mark = "###" if revising else "##"
    sections = [
        f"{mark} When to use\nUse this skill for tasks like: {one_line(task.goal, 400)}",
        f"{mark} Steps\n{_fallback_steps(accepted)}",
        f"{mark} Output\n{_output_shape(accepted.final_output if accepted else '')}",
    ]
    if related and not revising:
        builds_on = "\n".join(f"- {s.name}: {one_line(s.description, 200)}" for s in related)
        sections.append(f"## Builds on\n{builds_on}")
    sections.append(
        f"{mark} Evidence\nLearned from task {task.id} ({one_line(task.title, 120)}), "
        f"accepted run {_accepted_run_id(accepted)}."
    )
    content = "\n\n".join(sections)
    if revising:
        current = strip_front_matter(related[0].content)
        content = f"{current}\n\n## Notes from an accepted task\n\n{content}"
        return related[0].description, content
    description = f"Procedure for tasks like: {one_line(task.title or task.goal, 200)}"
    return one_line(description, DESCRIPTION_MAX), content


def _body(
    answer: str | None,
    *,
    task: Task,
    evidence: Sequence[Evidence],
    library: Sequence[Skill],
    action: DraftAction,
    related: Sequence[Skill],
) -> _Body:
    data = parse_json_object(answer) if answer is not None else None
    parts = _from_answer(data) if data is not None else None
    tools_from_evidence = evidence_tool_names(evidence)
    if parts is None:
        if answer is not None:
            log.warning("skill draft for task %s: no usable JSON; local draft", task.id)
        description, content = fallback_body(task, evidence, action, related)
        name = _draft_name("", task, action, related, library)
        reason = f"{_REASONS[action]} (Drafted locally: the model gave no usable draft.)"
        return _Body(name, description, tools_from_evidence, content, reason)
    front, content, reason = parts
    proposed = front.get("name")
    name = _draft_name(
        proposed if isinstance(proposed, str) else "", task, action, related, library
    )
    tools = _string_list(front.get("tools")) or tools_from_evidence
    description = one_line(str(front["description"]), DESCRIPTION_MAX)
    return _Body(name, description, tools, content, reason or _REASONS[action])


async def synthesize_draft(
    complete: Complete,
    *,
    task: Task,
    evidence: Sequence[Evidence],
    library: Sequence[Skill],
    draft_id: str,
    ts: float,
    timeout_s: float = 30.0,
    known_tools: Collection[str] | None = None,
    session: Sequence[str] = (),
) -> SkillDraft:
    """A draft learned from ``task``'s evidence: ``blocked`` when the safety check fails.

    ``known_tools``, when given, are the only tool names the draft may list;
    ``session`` holds the task's messages as ``"author: text"`` lines, oldest first.
    """
    related = related_skills(evidence, library)
    action = choose_action(related)
    call = ModelCall(
        purpose=Purpose.DRAFT,
        system=_SYSTEM,
        prompt=_prompt(task, evidence, action, related, session),
        max_tokens=_MAX_TOKENS,
        timeout_s=timeout_s,
    )
    answer: str | None
    try:
        answer = await ask(complete, call)
    except Exception as exc:
        log.warning("skill draft for task %s failed: %s", task.id, describe_error(exc))
        answer = None
    body = _body(
        answer, task=task, evidence=evidence, library=library, action=action, related=related
    )
    draft = SkillDraft(
        id=draft_id,
        task_id=task.id,
        group_id=task.group_id,
        action=action,
        name=body.name,
        description=body.description,
        tools=body.tools,
        content=body.content,
        change_reason=body.change_reason,
        related=[skill.name for skill in related],
        safety=SafetyReport(ok=True),
        created_at=ts,
    )
    report = check_draft(draft, known_tools)
    status = DraftStatus.DRAFT if report.ok else DraftStatus.BLOCKED
    return draft.model_copy(update={"safety": report, "status": status})
