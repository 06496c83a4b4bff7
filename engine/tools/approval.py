"""Which tool calls run at once, which wait for a person, and which never run.

Every tool has a policy: ``auto`` (run it), ``ask`` (a person of the group
allows or refuses this call) or ``deny`` (never run it). Where it comes from,
first match wins:

1. ``deny`` set by the group or by the persona: refused, whatever else says.
2. The group's ``auto_approve`` switch, or a mark in the person's message
   that caused the turn (``!approve web_fetch``, ``!approve all``): ``auto``.
3. The group's policy for the tool, then the persona's, then the tool's
   default (:func:`default_policy`).

Policies are looked up by the tool's name as the model sees it; a key that
ends in ``*`` covers every name it prefixes (``fx__*``: every tool of the
MCP server ``fx``), and an exact name beats a prefix.

:class:`ApprovalGate` applies this to each call, before its handler runs,
for any tool by name: the tools of the registry, MCP tools and tools added
later alike. An ``ask`` goes to the people of the group with three choices;
"always in this group" is remembered through a callback the host supplies
(it stores the group's settings), and a refusal or a question nobody
answers comes back to the model as the call's error result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from engine.messages import ToolCall
    from engine.tools.registry import Tool, ToolContext

Policy = Literal["auto", "ask", "deny"]

ALLOW_ONCE = "allow once"
ALWAYS = "always in this group"
DENY = "deny"
CHOICES = (ALLOW_ONCE, ALWAYS, DENY)
# The mark that allows every tool (except those set to deny).
ALL = "all"

# Tools that only read or think run without asking; those that write, reach
# out of the machine or belong to another program ask first.
_READS = (
    "rethink",
    "finish",
    "ask_user",
    "recall",
    "remember",
    "route_forward",
    "list_files",
    "read_file",
    "search_files",
)
DEFAULT_POLICIES: Mapping[str, Policy] = {
    **{name: "auto" for name in _READS},
    "write_file": "ask",
    "web_fetch": "ask",
}
# An MCP tool is named ``server__tool``.
MCP_SEPARATOR = "__"
# A summary of a call's arguments longer than this is cut.
SUMMARY_CHARS = 400

_MARK = re.compile(r"(?:^|(?<=\s))!approve\s+([A-Za-z0-9_*-]+(?:\s*,\s*[A-Za-z0-9_*-]+)*)")


def approval_marks(text: str) -> tuple[str, ...]:
    """The tools a message allows with ``!approve name[, name...]`` (``all``: every one)."""
    names: list[str] = []
    for match in _MARK.finditer(text):
        for name in match.group(1).split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return tuple(names)


def default_policy(name: str, declared: Literal["auto", "ask"] = "auto") -> Policy:
    """A tool's policy when nobody set one: the table, MCP tools ask, else what it declares."""
    known = DEFAULT_POLICIES.get(name)
    if known is not None:
        return known
    if MCP_SEPARATOR in name:
        return "ask"
    return declared


def lookup(policies: Mapping[str, Policy], name: str) -> Policy | None:
    """``name``'s policy in ``policies``: its own entry, else the longest matching prefix."""
    exact = policies.get(name)
    if exact is not None:
        return exact
    best: tuple[int, Policy] | None = None
    for key, policy in policies.items():
        if key.endswith("*") and name.startswith(key[:-1]):
            if best is None or len(key) > best[0]:
                best = (len(key), policy)
    return best[1] if best is not None else None


@dataclass(slots=True)
class ApprovalRules:
    """The policies one turn runs under."""

    group: dict[str, Policy] = field(default_factory=dict)
    persona: Mapping[str, Policy] = field(default_factory=dict)
    auto_approve: bool = False
    # Tools the person's message allowed (``!approve``), ``all`` for every one.
    marks: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        group: Mapping[str, Policy],
        persona: Mapping[str, Policy],
        auto_approve: bool,
        marks: Iterable[str],
    ) -> ApprovalRules:
        return cls(dict(group), dict(persona), auto_approve, frozenset(marks))

    def resolve(self, name: str, declared: Literal["auto", "ask"] = "auto") -> Policy:
        """The policy of a call to ``name`` (see the module docstring for the order)."""
        by_group = lookup(self.group, name)
        by_persona = lookup(self.persona, name)
        if "deny" in (by_group, by_persona):
            return "deny"
        if self.auto_approve or ALL in self.marks or lookup(_as_auto(self.marks), name):
            return "auto"
        return by_group or by_persona or default_policy(name, declared)


def _as_auto(marks: frozenset[str]) -> dict[str, Policy]:
    return dict.fromkeys(marks, "auto")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a person is asked to allow: the tool and a short form of its arguments."""

    tool: str
    arguments: str

    @classmethod
    def of(cls, call: ToolCall) -> ApprovalRequest:
        text = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        if len(text) > SUMMARY_CHARS:
            text = text[: SUMMARY_CHARS - 1] + "…"
        return cls(call.name, text)

    def prompt(self, vp_id: str | None) -> str:
        who = f"@{vp_id}" if vp_id else "A VP"
        return f"{who} wants to run {self.tool} with {self.arguments}. Allow it?"


# Asks the people of the group; returns the chosen answer, raises TimeoutError.
AskApproval = Callable[[ApprovalRequest, str, list[str]], Awaitable[str]]
# Stores "always allow ``tool`` in this group".
Remember = Callable[[str], Awaitable[None]]


class ApprovalGate:
    """Decides each call of one turn; returns None to run it, else the refusal for the model."""

    def __init__(
        self, rules: ApprovalRules, ask: AskApproval | None, remember: Remember | None = None
    ) -> None:
        self.rules = rules
        self._ask = ask
        self._remember = remember

    async def __call__(self, tool: Tool, call: ToolCall, ctx: ToolContext) -> str | None:
        policy = self.rules.resolve(tool.name, tool.approval)
        if policy == "auto":
            return None
        if policy == "deny":
            return f"{tool.name} is not allowed in this group (its approval policy is deny)"
        return await self._ask_people(tool.name, call, ctx)

    async def _ask_people(self, name: str, call: ToolCall, ctx: ToolContext) -> str | None:
        if self._ask is None:
            return f"{name} needs a person's approval and nobody can be asked here"
        request = ApprovalRequest.of(call)
        try:
            answer = await self._ask(request, request.prompt(ctx.vp_id), list(CHOICES))
        except TimeoutError:
            return f"{name} was not run: nobody approved it before the question expired"
        choice = answer.strip().lower()
        if choice == ALWAYS:
            # The rest of this turn needs no second question; later turns read
            # the group's settings, where the host stores it.
            self.rules.group[name] = "auto"
            if self._remember is not None:
                await self._remember(name)
            return None
        if choice == ALLOW_ONCE:
            return None
        return f"{name} was not run: a person of the group denied it"
