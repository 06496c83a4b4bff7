"""The one way team mode reaches a model: a :class:`ModelCall` given to a :class:`Complete`.

Each component (router, planner, skill selection, guidance, learning) builds
a call with its ``purpose``, a system message and a user prompt, and parses
the text that comes back. The purpose travels to the provider in the
request's call context (``context.purpose``, never on the wire), so the
offline model and the tests' scripted model can tell the calls apart. A
:class:`Complete` raises on any failure (:class:`CallFailed`, a timeout);
each component has its own fallback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Purpose(StrEnum):
    ROUTER = "team.router"
    PLANNER = "team.planner"
    SKILL_NODE = "team.skills.node"  # a team node's skills (TaskSkillResolver)
    SKILL_SHORTLIST = "team.skills.shortlist"  # a run's skills, first stage (SkillAssembler)
    SKILL_FINAL = "team.skills.final"
    GUIDANCE = "team.guidance"  # ephemeral guidance for a node with no skill
    DRAFT = "team.draft"  # a skill draft from an accepted task


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call without tools: a system message, one user prompt, text back."""

    purpose: Purpose
    system: str
    prompt: str
    max_tokens: int = 1024
    timeout_s: float = 30.0
    language: str = "en"


class CallFailed(RuntimeError):
    """The model could not be reached or gave no answer (the message says why)."""


class Complete(Protocol):
    async def __call__(self, call: ModelCall) -> str:
        """The model's text for ``call``; raises on failure or timeout."""
        ...


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _candidates(text: str, opener: str, closer: str) -> list[str]:
    """Pieces of ``text`` that may be the JSON value: fenced blocks, then the outermost span."""
    found = [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find(opener), text.rfind(closer)
    if start != -1 and end > start:
        found.append(text[start : end + 1])
    found.append(text.strip())
    return found


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a model's answer (bare, fenced or amid prose), or None."""
    for piece in _candidates(text, "{", "}"):
        try:
            value = json.loads(piece)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_json_array(text: str) -> list[Any] | None:
    """The JSON array in a model's answer (bare, fenced or amid prose), or None."""
    for piece in _candidates(text, "[", "]"):
        try:
            value = json.loads(piece)
        except ValueError:
            continue
        if isinstance(value, list):
            return value
    return None
