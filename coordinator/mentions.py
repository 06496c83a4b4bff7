"""Mention parsing and dispatch selection (DESIGN.md, "Group chat rules").

``@name`` counts only at the start of the text or after whitespace (so an
e-mail address is not a mention); names are ``[A-Za-z0-9_-]`` and match roster
ids and aliases case-insensitively. ``@all`` is everyone but the sender.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

MENTION = re.compile(r"(?:^|(?<=\s))@([A-Za-z0-9_][A-Za-z0-9_-]*)")
BROADCAST = "all"


def extract_mentions(text: str) -> list[str]:
    """Mention names in first-seen order, unique case-insensitively."""
    seen: dict[str, str] = {}
    for name in MENTION.findall(text or ""):
        seen.setdefault(name.lower(), name)
    return list(seen.values())


@dataclass(slots=True)
class Selection:
    """Which VPs a message goes to, and why."""

    targets: list[str] = field(default_factory=list)
    trigger: str = "none"  # mention | broadcast | default | none
    unknown: list[str] = field(default_factory=list)
    truncated: bool = False


def select_targets(
    names: list[str],
    roster: list[str],
    *,
    sender: str | None,
    resolve: Callable[[str], str | None],
    cap: int,
    broadcast_when_unmentioned: bool = True,
    default_vp: str | None = None,
) -> Selection:
    """Apply the dispatch rules to a message's mention names.

    ``resolve`` maps a name or alias to a persona id (or None). A message
    whose mentions are all unknown is not dispatched; a message with no
    mention goes to everyone (or to the default VP when the group says so).
    """
    members = [vp for vp in roster if vp != sender]
    lowered = {vp.lower(): vp for vp in roster}
    if not names:
        if broadcast_when_unmentioned:
            return _capped(members, "broadcast", cap)
        fallback = default_vp if default_vp in roster else (roster[0] if roster else None)
        if fallback is None or fallback == sender:
            return Selection()
        return Selection([fallback], "default")
    targets: list[str] = []
    unknown: list[str] = []
    broadcast = False
    for name in names:
        if name.lower() == BROADCAST:
            broadcast = True
            continue
        pid = resolve(name)
        vp = lowered.get((pid or name).lower())
        if vp is None:
            unknown.append(name)
        elif vp != sender and vp not in targets:
            targets.append(vp)
    if broadcast:
        sel = _capped(members, "broadcast", cap)
        sel.unknown = unknown
        return sel
    sel = _capped(targets, "mention" if targets else "none", cap)
    sel.unknown = unknown
    return sel


def _capped(vps: list[str], trigger: str, cap: int) -> Selection:
    return Selection(vps[:cap], trigger if vps else "none", truncated=len(vps) > cap)
