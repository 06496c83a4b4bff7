"""Ephemeral guidance: a one-off procedure for a team node that no published skill fits.

When :func:`~team.skills.select.resolve_node_skills` finds nothing for a
node, :func:`ephemeral_guidance` asks the model (``Purpose.GUIDANCE``) for a
short procedure written for that node's sub-task alone. The result is a
:class:`~protocol.tasks.Skill` with source ``ephemeral``, a name of the form
``ephemeral:<slug>`` and a version ``ephemeral:<id>``; it is activated like
any skill but never stored, selected again or published.

The call cannot fail from the caller's side: a model error, a timeout or an
answer without usable content gives a local guidance built from the node
(objective, capabilities to apply, output), so every node gets some guidance.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from protocol.tasks import PlanNode, Skill, SkillSource
from team.calls import Complete, ModelCall, Purpose, parse_json_object
from team.skills.common import ask, describe_error
from team.skills.loader import slugify, strip_front_matter
from team.text import one_line

__all__ = ["EPHEMERAL_PREFIX", "ephemeral_guidance", "fallback_guidance"]

log = logging.getLogger(__name__)

EPHEMERAL_PREFIX = "ephemeral:"
_MAX_TOKENS = 1_200
# Guidance is a short procedure; a longer answer is cut rather than refused.
_CONTENT_CHARS = 6_000

_SYSTEM = (
    "You create concise ephemeral guidance: a short procedure one temporary sub-agent "
    "follows for a single delegated sub-task of a team task. It is used once and never "
    "published. Return JSON only, with exactly the keys guidance_name, description, "
    "content, tags."
)


def _listed(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def _prompt(goal: str, request: str, node: PlanNode) -> str:
    sections = [
        "Create procedural guidance for a temporary sub-agent that has no published skill "
        "for its sub-task.",
        f"Task goal:\n{goal.strip() or '(none)'}",
        f"Current user request:\n{request.strip() or '(none)'}",
        f"Node id:\n{node.id}",
        f"Node task:\n{node.task.strip()}",
        f"Skill query:\n{node.skill_query.strip() or '(none)'}",
        f"Required capabilities:\n{_listed(node.capabilities)}",
        f"Expected output:\n{node.expected_output.strip() or '(not specified)'}",
        "Rules:\n"
        '- guidance_name: a short lowercase name with hyphens, such as "pricing-scan".\n'
        "- description: one sentence on what the guidance is for.\n"
        "- content: markdown guidance the temporary sub-agent can execute directly: "
        "objective, steps, output. Make no implementation claims (never say anything "
        "was built, tested or done), and add no review or publish metadata.\n"
        "- tags: a few lowercase keywords.",
        "Return JSON only with keys: guidance_name, description, content, tags.",
    ]
    return "\n\n".join(sections)


def _ephemeral_skill(node: PlanNode, slug: str, description: str, content: str) -> Skill:
    digest = hashlib.sha256(f"{node.id}\n{slug}\n{content}".encode()).hexdigest()[:10]
    return Skill(
        name=f"{EPHEMERAL_PREFIX}{slug}",
        description=description,
        tools=[],
        content=content,
        source=SkillSource.EPHEMERAL,
        version=f"{EPHEMERAL_PREFIX}{digest}",
    )


def _node_slug(node: PlanNode) -> str:
    return slugify(node.id) or slugify(node.task) or "node"


def fallback_guidance(goal: str, node: PlanNode) -> Skill:
    """Guidance made locally from the node itself, for when the model gives none."""
    capabilities = _listed(node.capabilities)
    if not node.capabilities:
        capabilities = "- Use the skills and tools at hand; state what you could not check."
    output = node.expected_output.strip() or (
        "A concise, self-contained result for this sub-task that the team's synthesis "
        "can use directly; mark assumptions and open questions."
    )
    objective = node.task.strip()
    if goal.strip():
        objective += f"\n\nThis serves the task goal: {one_line(goal, 400)}"
    content = (
        f"## Objective\n{objective}\n\n"
        f"## Capabilities to apply\n{capabilities}\n\n"
        f"## Output\n{output}"
    )
    description = f"Guidance for node {node.id}: {one_line(node.task, 160)}"
    return _ephemeral_skill(node, _node_slug(node), description, content)


def _from_answer(data: dict[str, Any], node: PlanNode) -> Skill | None:
    content = data.get("content")
    if not isinstance(content, str) or not strip_front_matter(content):
        return None
    name = data.get("guidance_name")
    slug = slugify(name) if isinstance(name, str) else ""
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        description = f"Guidance for node {node.id}: {node.task}"
    return _ephemeral_skill(
        node,
        slug or _node_slug(node),
        one_line(description, 300),
        strip_front_matter(content)[:_CONTENT_CHARS],
    )


async def ephemeral_guidance(
    complete: Complete,
    *,
    goal: str,
    request: str,
    node: PlanNode,
    timeout_s: float = 20.0,
) -> Skill:
    """Ephemeral guidance for ``node``: the model's, or the local fallback on any failure."""
    call = ModelCall(
        purpose=Purpose.GUIDANCE,
        system=_SYSTEM,
        prompt=_prompt(goal, request, node),
        max_tokens=_MAX_TOKENS,
        timeout_s=timeout_s,
    )
    try:
        answer = await ask(complete, call)
    except Exception as exc:
        log.warning("ephemeral guidance for node %s failed: %s", node.id, describe_error(exc))
        return fallback_guidance(goal, node)
    data = parse_json_object(answer)
    skill = _from_answer(data, node) if data is not None else None
    if skill is None:
        log.warning("ephemeral guidance for node %s: no usable JSON; local guidance", node.id)
        return fallback_guidance(goal, node)
    return skill
