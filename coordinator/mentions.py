"""Dispatch selection (DESIGN.md, "Group chat rules").

Mention names (``personas.mentions``) match roster ids and aliases
case-insensitively; ``@all`` is everyone but the sender.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from personas.mentions import extract_mentions

__all__ = ["BROADCAST", "Selection", "extract_mentions", "select_targets"]

BROADCAST = "all"


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
