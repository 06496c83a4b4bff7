"""The execution planner: one VP does this attempt, or a team of VPs does.

For every attempt at a task, :func:`plan` asks a model to choose a mode:

- ``single``: one VP of the roster does the whole attempt;
- ``team``: a graph of 2 to :data:`~protocol.tasks.MAX_TEAM_NODES` nodes,
  each a sub-task for one VP, run in parallel wherever no ``depends_on``
  orders them, after which the ``synthesizer`` VP writes the answer by the
  ``final_synthesis_instruction``.

The model's JSON answer is checked by :func:`validate_plan`, which either
returns a :class:`~protocol.tasks.Plan` that keeps the invariants below or
raises :class:`PlanInvalid` saying what is wrong. :func:`plan` never
raises: a provider failure, a timeout, an answer that is not JSON or a plan
that does not validate all give ``Plan(mode=single, vp=default_vp,
fallback=True)``, whose ``reason`` says why in a short classified phrase
(``FALLBACK_*`` below, or "the plan was invalid: " and the validation's
reason), never the text of a provider's error: a plan is stored and shown
to people, and an engine or Ray error can hold a traceback, host names and
process ids. The error itself goes to the log. A team is an optimisation;
one VP doing the work is always a correct plan.

Invariants of a validated plan:

- ``single``: ``vp`` is a roster id (or ``default_vp``), ``nodes`` empty;
- ``team``: node ids are unique, non-empty, at most 40 characters of
  ``[A-Za-z0-9_-]`` and none of :data:`RESERVED_NODE_IDS` in any case (the
  executor gives those ids to its synthesis run and its single run, and a
  run's id names it in the attempt); every node's ``vp`` is a roster id; every
  ``depends_on`` names another node of the plan; the graph has no cycle;
  ``synthesizer`` is a roster id (or ``default_vp``) and
  ``final_synthesis_instruction`` is not empty.

Several nodes may go to the same VP; that is a valid plan, but a VP takes
one turn of a group at a time, so that VP's nodes run one after another
even where the graph would let them run in parallel. The prompt tells the
model so.

VP names resolve by roster id or display name, in any case; the plan
always holds ids. :func:`waves` orders a team plan's nodes into layers an
executor can run one after another, each layer in parallel.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from protocol.tasks import MAX_TEAM_NODES, Plan, PlanMode, PlanNode
from team.calls import Complete, ModelCall, Purpose, parse_json_object
from team.text import language_name, one_line

__all__ = [
    "DEFAULT_SYNTHESIS",
    "FALLBACK_BAD_ANSWER",
    "FALLBACK_INVALID",
    "FALLBACK_TIMEOUT",
    "FALLBACK_UNREACHABLE",
    "PLANNER_TIMEOUT_S",
    "RESERVED_NODE_IDS",
    "PlanInvalid",
    "RosterEntry",
    "build_prompt",
    "plan",
    "validate_plan",
    "waves",
]

log = logging.getLogger(__name__)

PLANNER_TIMEOUT_S = 45.0
PLANNER_MAX_TOKENS = 2000
NODE_ID_CHARS = 40
_NODE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
# The ids the executor (coordinator.team.run.runs_of) gives its own runs: a
# node with one of them would be confused with the synthesis or single run.
RESERVED_NODE_IDS = frozenset({"synthesis", "single"})

# A fallback plan's reason: what went wrong, classified, never the error's own text.
FALLBACK_UNREACHABLE = "the model could not be reached"
FALLBACK_TIMEOUT = "the model timed out"
FALLBACK_BAD_ANSWER = "the answer was not valid JSON"
FALLBACK_INVALID = "the plan was invalid: "
# A validation reason quotes the model's values; this keeps a quoted essay short.
_INVALID_REASON_CHARS = 200

DEFAULT_SYNTHESIS = (
    "Combine the team's results into one answer to the person's request: keep what each "
    "node found, resolve any disagreement, and say plainly what is still uncertain."
)

SYSTEM = (
    "You choose the execution mode of one attempt at an internal task of a group chat "
    "whose members are AI VPs. Return compact JSON only, with no prose around it."
)

_TEAM_RULE = (
    "Use mode=team only when the work needs several distinct areas of expertise whose "
    "parts can be done in parallel, and the roster has at least 2 VPs. Otherwise use "
    "mode=single and name the one VP best suited to the whole attempt. A team has "
    f"2 to {MAX_TEAM_NODES} nodes; a node may depend on others' outputs, never in a cycle. "
    "Nodes given to the same VP run one after another, not in parallel."
)

_SCHEMA = """Answer with this JSON:
{
  "mode": "single" | "team",
  "reason": "why this mode, one sentence",
  "strategy": "how the work is split (team) or approached (single)",
  "vp": "single only: the roster id of the VP who does the work",
  "nodes": [
    {
      "id": "short id, letters digits _ -",
      "vp": "roster id",
      "task": "the sub-task, self-contained",
      "capabilities": ["skill or expertise the node needs"],
      "expected_output": "what the node hands back",
      "depends_on": ["ids of nodes whose output this node needs"],
      "skill_query": "words to search reusable skills with"
    }
  ],
  "final_synthesis_instruction": "how the synthesizer combines the node outputs",
  "synthesizer": "roster id of the VP who writes the final answer"
}"""


class PlanInvalid(ValueError):
    """A planner's answer does not make a valid plan; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class RosterEntry:
    """A VP the planner may give work to: its id, display name, what it does, its tools."""

    id: str
    name: str
    description: str = ""
    tools: tuple[str, ...] = ()


def build_prompt(
    *,
    goal: str,
    request: str,
    attempt: int,
    roster: Sequence[RosterEntry],
    history: str | None = None,
    language: str = "en",
) -> str:
    """The planner's user prompt, headings fixed (the offline model parses them).

    It asks for the plan's prose (reason, strategy, tasks, instructions) in
    the group's ``language``.
    """
    people = [
        {"id": r.id, "name": r.name, "description": r.description, "tools": list(r.tools)}
        for r in roster
    ]
    parts = [
        "Decide execution mode for this internal Task attempt.",
        _TEAM_RULE,
        _SCHEMA,
        f"Write reason, strategy, tasks and instructions in {language_name(language)}.",
        "Roster:\n" + json.dumps(people, ensure_ascii=False),
        "Task goal:\n" + goal,
        "Current user request:\n" + request,
        f"Attempt index: {attempt}",
    ]
    if history and history.strip():
        parts.append("Relevant task history:\n" + history.strip())
    return "\n\n".join(parts)


async def plan(
    complete: Complete,
    *,
    goal: str,
    request: str,
    attempt: int,
    roster: Sequence[RosterEntry],
    default_vp: str,
    history: str | None = None,
    language: str = "en",
    timeout_s: float = PLANNER_TIMEOUT_S,
) -> Plan:
    """The plan for one attempt (see the module docstring); never raises for the model's faults.

    A fallback's ``reason`` is a ``FALLBACK_*`` phrase, never an error's text.
    """
    call = ModelCall(
        purpose=Purpose.PLANNER,
        system=SYSTEM,
        prompt=build_prompt(
            goal=goal,
            request=request,
            attempt=attempt,
            roster=roster,
            history=history,
            language=language,
        ),
        max_tokens=PLANNER_MAX_TOKENS,
        timeout_s=timeout_s,
        language=language,
    )
    try:
        text = await asyncio.wait_for(complete(call), timeout_s)
    except TimeoutError:
        log.info("planner call timed out")
        return _fallback(default_vp, FALLBACK_TIMEOUT)
    except Exception as exc:  # any provider failure: one VP does the attempt
        log.warning("planner call failed: %r", exc)
        return _fallback(default_vp, FALLBACK_UNREACHABLE)
    raw = parse_json_object(text)
    if raw is None:
        log.info("planner answer was not a JSON object: %.200r", text)
        return _fallback(default_vp, FALLBACK_BAD_ANSWER)
    try:
        return validate_plan(raw, roster, default_vp)
    except PlanInvalid as exc:
        log.info("planner answer rejected: %s", exc)
        return _fallback(default_vp, FALLBACK_INVALID + one_line(str(exc), _INVALID_REASON_CHARS))


def _fallback(default_vp: str, why: str) -> Plan:
    return Plan(mode=PlanMode.SINGLE, vp=default_vp, reason=why, fallback=True)


def validate_plan(raw: dict[str, Any], roster: Sequence[RosterEntry], default_vp: str) -> Plan:
    """``raw`` (a planner's JSON object) as a valid :class:`Plan`; raises :class:`PlanInvalid`.

    A team of exactly one node is accepted as a single plan for that node's
    VP: the answer is clear even if the mode is not. Several nodes of one VP
    are accepted; they run one after another (see the module docstring).
    """
    mode = _string(raw.get("mode"), "mode").lower()
    reason = _string(raw.get("reason"), "reason")
    strategy = _string(raw.get("strategy"), "strategy")
    if mode == PlanMode.SINGLE:
        vp = _resolve(raw.get("vp"), roster) or default_vp
        return Plan(mode=PlanMode.SINGLE, reason=reason, strategy=strategy, vp=vp)
    if mode != PlanMode.TEAM:
        raise PlanInvalid(f"mode must be 'single' or 'team', not {raw.get('mode')!r}")
    items = raw.get("nodes")
    if not isinstance(items, list):
        raise PlanInvalid("a team plan needs a list of nodes")
    if len(items) == 1 and isinstance(items[0], dict):
        vp = _resolve(items[0].get("vp"), roster) or default_vp
        return Plan(mode=PlanMode.SINGLE, reason=reason, strategy=strategy, vp=vp)
    if not 2 <= len(items) <= MAX_TEAM_NODES:
        raise PlanInvalid(f"a team plan needs 2 to {MAX_TEAM_NODES} nodes, not {len(items)}")
    nodes = _nodes(items, roster)
    _check_graph(nodes)
    synthesizer = _resolve(raw.get("synthesizer"), roster) or default_vp
    instruction = _string(raw.get("final_synthesis_instruction"), "final_synthesis_instruction")
    return Plan(
        mode=PlanMode.TEAM,
        reason=reason,
        strategy=strategy,
        nodes=nodes,
        final_synthesis_instruction=instruction or DEFAULT_SYNTHESIS,
        synthesizer=synthesizer,
    )


def _string(value: Any, field: str) -> str:
    """An optional text field, stripped; None is empty and any other type is invalid."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PlanInvalid(f"{field} must be a string, not {type(value).__name__}")
    return value.strip()


def _resolve(name: Any, roster: Sequence[RosterEntry]) -> str | None:
    """The roster id ``name`` means (an id or a display name, any case, ``@`` optional)."""
    if not isinstance(name, str):
        return None
    key = name.strip().lstrip("@").lower()
    if not key:
        return None
    for entry in roster:
        if key == entry.id.lower():
            return entry.id
    for entry in roster:
        if key == entry.name.strip().lower():
            return entry.id
    return None


def _nodes(items: list[Any], roster: Sequence[RosterEntry]) -> list[PlanNode]:
    """Each item as a :class:`PlanNode`, ids unique and dependencies known."""
    nodes: list[PlanNode] = []
    seen: set[str] = set()
    for index, item in enumerate(items, 1):
        node = _node(item, index, roster)
        if node.id in seen:
            raise PlanInvalid(f"node id {node.id!r} is used twice")
        seen.add(node.id)
        nodes.append(node)
    for node in nodes:
        for dep in node.depends_on:
            if dep == node.id:
                raise PlanInvalid(f"node {node.id!r} depends on itself")
            if dep not in seen:
                raise PlanInvalid(f"node {node.id!r} depends on unknown node {dep!r}")
    return nodes


def _node(item: Any, index: int, roster: Sequence[RosterEntry]) -> PlanNode:
    if not isinstance(item, dict):
        raise PlanInvalid(f"node {index} is not an object")
    node_id = _string(item.get("id"), f"node {index} id")
    if not node_id:
        raise PlanInvalid(f"node {index} has no id")
    if len(node_id) > NODE_ID_CHARS or not _NODE_ID.match(node_id):
        raise PlanInvalid(
            f"node id {node_id!r} must be 1 to {NODE_ID_CHARS} letters, digits, '_' or '-'"
        )
    if node_id.lower() in RESERVED_NODE_IDS:
        raise PlanInvalid(
            f"node id {node_id!r} is reserved: the executor names its own {node_id.lower()} run so"
        )
    vp = _resolve(item.get("vp"), roster)
    if vp is None:
        raise PlanInvalid(f"node {node_id!r} names a VP not in the roster: {item.get('vp')!r}")
    task = _string(item.get("task"), f"node {node_id!r} task")
    if not task:
        raise PlanInvalid(f"node {node_id!r} has no task")
    where = f"node {node_id!r}"
    # A repeated dependency means nothing more than a single one.
    depends_on = list(dict.fromkeys(_strings(item.get("depends_on"), f"{where} depends_on")))
    return PlanNode(
        id=node_id,
        vp=vp,
        task=task,
        capabilities=_strings(item.get("capabilities"), f"{where} capabilities"),
        expected_output=_string(item.get("expected_output"), f"{where} expected_output"),
        depends_on=depends_on,
        skill_query=_string(item.get("skill_query"), f"{where} skill_query"),
    )


def _strings(value: Any, field: str) -> list[str]:
    """A list of non-empty strings; None is an empty list, anything else invalid."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlanInvalid(f"{field} must be a list of strings")
    return [v.strip() for v in value if v.strip()]


def _check_graph(nodes: Sequence[PlanNode]) -> None:
    """Raise :class:`PlanInvalid` naming a cycle if the dependency graph has one."""
    deps = {n.id: n.depends_on for n in nodes}
    # 0: not visited, 1: on the current path, 2: finished (no cycle through it).
    state = dict.fromkeys(deps, 0)
    path: list[str] = []

    def visit(node_id: str) -> None:
        state[node_id] = 1
        path.append(node_id)
        for dep in deps[node_id]:
            if dep not in state:
                continue  # outside the nodes checked: it cannot close a cycle among them
            if state[dep] == 1:
                cycle = [*path[path.index(dep) :], dep]
                raise PlanInvalid("dependency cycle: " + " -> ".join(cycle))
            if state[dep] == 0:
                visit(dep)
        path.pop()
        state[node_id] = 2

    for node_id in deps:
        if state[node_id] == 0:
            visit(node_id)


def waves(plan: Plan) -> list[list[PlanNode]]:
    """A team plan's nodes in layers: each node's dependencies are all in earlier layers.

    Nodes keep the plan's order within a layer; a single plan has no layers.
    Raises :class:`PlanInvalid` for a graph :func:`validate_plan` would refuse
    (a cycle or an unknown dependency), so an executor cannot loop forever.
    """
    remaining = list(plan.nodes)
    ids = {n.id for n in remaining}
    for node in remaining:
        unknown = [d for d in node.depends_on if d not in ids]
        if unknown:
            raise PlanInvalid(f"node {node.id!r} depends on unknown node {unknown[0]!r}")
    done: set[str] = set()
    layers: list[list[PlanNode]] = []
    while remaining:
        layer = [n for n in remaining if all(d in done for d in n.depends_on)]
        if not layer:
            _check_graph(remaining)  # names the cycle
            raise PlanInvalid("dependency cycle")  # pragma: no cover - _check_graph raised
        layers.append(layer)
        done |= {n.id for n in layer}
        remaining = [n for n in remaining if n.id not in done]
    return layers
