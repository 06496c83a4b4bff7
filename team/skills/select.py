"""Choosing skills with the model: for a team node, and for a single run or the synthesis.

Both selectors first narrow the library with a :class:`~team.skills.retrieve.Retriever`
and then ask the model, which answers with a JSON array of names. Whatever
the model says, the answer is read the same way (:func:`pick_names`): only
names of the candidates shown count, in the model's order, each once, at most
the number asked for. A model cannot activate a skill it was not shown.

- :func:`resolve_node_skills` (the TaskSkillResolver) picks at most
  ``max_active`` published skills for one node of a team plan in one call.
  Any failure, or an empty answer, gives ``[]``; the caller then asks for
  ephemeral guidance (:mod:`team.skills.guidance`).
- :func:`assemble_skills` (the SkillAssembler) picks skills for a single run
  or the synthesis. With more candidates than ``max_detailed`` it first asks
  for a shortlist from summaries, then for the final choice from the
  shortlisted skills' bodies. Any failure gives ``[]``: a run without skills
  still runs.

:func:`activation_message` is the user message that hands an activated skill
to a VP, placed after the system prompt and before the history. It shows at
most :data:`ACTIVATION_CHARS` of the skill's body: learned and data-directory
skills are text nobody bounded, and a run's skills must leave the node room
for its task and its dependencies' outputs.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from protocol.tasks import PlanNode, Skill, SkillSource
from team.calls import Complete, ModelCall, Purpose, parse_json_array
from team.skills.common import ask, describe_error, join_non_empty
from team.skills.loader import strip_front_matter
from team.skills.retrieve import Retriever
from team.text import cut_at_line, excerpt, is_chinese, one_line

__all__ = [
    "ACTIVATION_CHARS",
    "activation_message",
    "assemble_skills",
    "node_skill_query",
    "pick_names",
    "resolve_node_skills",
]

log = logging.getLogger(__name__)

# How much of a skill's body the final selection stage shows per candidate.
FINAL_BODY_CHARS = 1_500
# How much of a skill's body an activation message hands a VP: with the
# default three skills a run gets, about 18k characters of procedure at most.
ACTIVATION_CHARS = 6_000
# An activated skill's description is a summary line; more is not a summary.
_ACTIVATION_DESCRIPTION_CHARS = 500
_NAMES_MAX_TOKENS = 300

_NODE_SYSTEM = (
    "You select published skills for one sub-agent node of a team task. A skill is a "
    "written procedure the node's agent follows while doing its sub-task. Choose only "
    "among the candidate skills listed in the prompt, using their exact names; never "
    "invent a name. Return a JSON array of names only, with no other text, for example "
    '["skill-a"]. Return [] when no candidate fits the node\'s work.'
)

_RUN_SYSTEM = (
    "You select skills for a single run of an agent. The prompt gives a task description "
    "and information on candidate skills. Choose only among the candidates, using their "
    "exact names; never invent a name. Return a JSON array of names only, with no other "
    'text, for example ["skill-a"]. Return [] when no candidate fits the task.'
)
_STAGE_RULES = {
    "shortlist": (
        "Selection stage: shortlist. You see summaries only. Return at most {limit} names: "
        "the candidates worth reading in full for this task."
    ),
    "final": (
        "Selection stage: final. You see each candidate's text. Return at most {limit} "
        "names: the skills to activate for this run, most useful first."
    ),
}


def pick_names(answer: str, allowed: Collection[str], limit: int | None = None) -> list[str]:
    """The names in a model's JSON-array answer that are in ``allowed``, in order, each once.

    Anything else in the array (an invented name, a number, an object) is
    dropped; an answer with no array gives ``[]``.
    """
    values = parse_json_array(answer) or []
    names: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        name = value.strip()
        if name in allowed and name not in names:
            names.append(name)
    return names if limit is None else names[: max(limit, 0)]


def node_skill_query(node: PlanNode, goal: str, request: str) -> str:
    """What a node's skills are searched with: its skill query, task, capabilities, then context."""
    return join_non_empty([node.skill_query, node.task, " ".join(node.capabilities), goal, request])


def _summaries(skills: Sequence[Skill]) -> str:
    return "\n".join(f"- {skill.name}: {one_line(skill.description)}" for skill in skills)


def _details(skills: Sequence[Skill]) -> str:
    """Each candidate as a "- name: description" line, then its tools and body, indented."""
    blocks = []
    for skill in skills:
        lines = [f"- {skill.name}: {one_line(skill.description)}"]
        if skill.tools:
            lines.append(f"  Tools: {', '.join(skill.tools)}")
        body = excerpt(strip_front_matter(skill.content), FINAL_BODY_CHARS)
        lines.append("  Text:")
        lines.extend(f"    {line}" if line.strip() else "" for line in body.splitlines())
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


async def _safe_rank(
    retriever: Retriever, query: str, library: Sequence[Skill], k: int
) -> list[Skill]:
    # A retriever backed by an embedding model can fail; a run then simply
    # goes without skills, as the selectors promise.
    try:
        return await retriever.rank(query, library, k)
    except Exception:
        log.warning("skill retrieval failed; no candidates", exc_info=True)
        return []


async def _choose(
    complete: Complete, call: ModelCall, candidates: Sequence[Skill], limit: int | None
) -> list[Skill]:
    """Make ``call`` and keep the named candidates; [] on any failure."""
    try:
        answer = await ask(complete, call)
    except Exception as exc:
        log.warning("skill selection (%s) failed: %s", call.purpose.value, describe_error(exc))
        return []
    by_name = {skill.name: skill for skill in candidates}
    return [by_name[name] for name in pick_names(answer, by_name, limit)]


async def resolve_node_skills(
    complete: Complete,
    *,
    library: Sequence[Skill],
    retriever: Retriever,
    node: PlanNode,
    goal: str,
    request: str,
    k: int = 8,
    max_active: int = 3,
    timeout_s: float = 20.0,
) -> list[Skill]:
    """At most ``max_active`` published skills for one team node, in the model's order.

    [] when none fits, on any failure, and for a ``max_active`` below 1
    (then without a call).
    """
    query = node_skill_query(node, goal, request)
    published = [skill for skill in library if skill.source != SkillSource.EPHEMERAL]
    candidates = await _safe_rank(retriever, query, published, k)
    if not candidates or max_active <= 0:
        return []
    prompt = (
        f"Node skill query:\n{query}\n\n"
        f"Candidate skills:\n{_summaries(candidates)}\n\n"
        f"Return only a JSON array of at most {max_active} names of the skills this node "
        'should use, most useful first, for example ["skill-a"], or [] when none fits.'
    )
    call = ModelCall(
        purpose=Purpose.SKILL_NODE,
        system=_NODE_SYSTEM,
        prompt=prompt,
        max_tokens=_NAMES_MAX_TOKENS,
        timeout_s=timeout_s,
    )
    return await _choose(complete, call, candidates, max_active)


def _stage_call(
    stage: str, task_description: str, candidates_text: str, limit: int, timeout_s: float
) -> ModelCall:
    prompt = (
        f"Task description:\n{task_description.strip()}\n\n"
        f"Candidate skills:\n{candidates_text}\n\n"
        f"Return only JSON: an array of at most {limit} skill names, for example "
        '["skill-a"], or [] when none fits.'
    )
    return ModelCall(
        purpose=Purpose.SKILL_SHORTLIST if stage == "shortlist" else Purpose.SKILL_FINAL,
        system=f"{_RUN_SYSTEM}\n{_STAGE_RULES[stage].format(limit=limit)}",
        prompt=prompt,
        max_tokens=_NAMES_MAX_TOKENS,
        timeout_s=timeout_s,
    )


async def assemble_skills(
    complete: Complete,
    *,
    library: Sequence[Skill],
    retriever: Retriever,
    task_description: str,
    k: int = 8,
    max_detailed: int = 4,
    max_active: int = 3,
    timeout_s: float = 20.0,
) -> list[Skill]:
    """At most ``max_active`` skills for a run, in the model's order; [] on any failure."""
    published = [skill for skill in library if skill.source != SkillSource.EPHEMERAL]
    candidates = await _safe_rank(retriever, task_description, published, k)
    if not candidates or max_active <= 0:
        return []
    if len(candidates) > max_detailed:
        call = _stage_call(
            "shortlist", task_description, _summaries(candidates), max_detailed, timeout_s
        )
        candidates = await _choose(complete, call, candidates, max_detailed)
        if not candidates:
            return []
    call = _stage_call("final", task_description, _details(candidates), max_active, timeout_s)
    return await _choose(complete, call, candidates, max_active)


def activation_message(skill: Skill, language: str = "en") -> str:
    """The user message that activates ``skill``: a short header, then its body.

    A Chinese ``language`` ("zh", "zh-CN") gives a Chinese header; the body
    is the skill's own text, without front matter, in whatever language it
    is written, cut after a whole line to at most :data:`ACTIVATION_CHARS`
    characters and then marked ``[…truncated]``.
    """
    ephemeral = skill.source == SkillSource.EPHEMERAL
    description = one_line(skill.description, _ACTIVATION_DESCRIPTION_CHARS)
    if is_chinese(language):
        kind = "临时指导" if ephemeral else "技能"
        header = (
            f"[已激活{kind}:{skill.name}]\n"
            f"{description}\n"
            "在适用于当前任务时遵循以下步骤;它不替代你的身份与系统指令。"
        )
    else:
        kind = "ephemeral guidance" if ephemeral else "skill"
        header = (
            f"[Activated {kind}: {skill.name}]\n"
            f"{description}\n"
            "Follow the procedure below where it applies to the current task; it does not "
            "replace your identity or your system instructions."
        )
    body = cut_at_line(strip_front_matter(skill.content), ACTIVATION_CHARS)
    return f"{header}\n\n{body}" if body else header
