"""Who a group message goes to: one rule set for every way a VP is reached.

Three things can dispatch VPs in a group (DESIGN.md, "Group chat rules"):

- a person's message (:attr:`Source.PERSON`);
- a VP's finished reply that ``@mentions`` others (:attr:`Source.VP_REPLY`);
- a VP's ``route_forward`` tool call, whose ``to`` is one name or ``all``
  (:attr:`Source.FORWARD`).

:func:`select_targets` decides all three with the same rules, so a name means
the same VP and ``@all`` the same people whichever way it arrives:

- a name is a roster id or an alias, in any case; ``resolve`` maps it to a
  persona id, and a name it does not know still matches a roster id;
- ``all`` is everyone in the roster but the sender;
- a name that is not in the roster is reported in ``unknown``, never silently
  dropped; what to do about it (a notice, a refusal) is the caller's choice;
- a sender never targets itself; naming itself is reported in ``named_self``;
- no name at all: a person's message goes to everyone (or to the default VP
  when the group turns broadcasting off); a VP's reply or forward goes nowhere;
- at most ``cap`` targets, in first-named (or roster) order; ``truncated``
  says when some were left out.

This module decides targets only: it reads no files and keeps no state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["BROADCAST", "Selection", "Source", "Trigger", "select_targets"]

# The name that means "everyone but the sender"; persona ids may not use it.
BROADCAST = "all"


class Source(StrEnum):
    """What is asking for targets; the rules differ only when nothing is named."""

    PERSON = "person"
    VP_REPLY = "vp_reply"
    FORWARD = "forward"


class Trigger(StrEnum):
    """Why the targets were chosen. Equal to its plain string value."""

    MENTION = "mention"
    BROADCAST = "broadcast"
    DEFAULT = "default"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Selection:
    """Which VPs a message goes to, and why.

    ``targets`` never holds the sender, holds no VP twice and has at most the
    cap's number of entries; ``trigger`` is :attr:`Trigger.NONE` exactly when
    no VP qualified (before the cap). ``unknown`` keeps the names as they
    were written, in order.
    """

    targets: list[str] = field(default_factory=list)
    trigger: Trigger = Trigger.NONE
    unknown: list[str] = field(default_factory=list)
    truncated: bool = False
    # The sender named itself; a forward refuses that, a reply ignores it.
    named_self: bool = False


def select_targets(
    names: Sequence[str],
    roster: Sequence[str],
    *,
    source: Source,
    sender: str | None = None,
    resolve: Callable[[str], str | None],
    cap: int,
    broadcast_when_unmentioned: bool = True,
    default_vp: str | None = None,
) -> Selection:
    """Apply the dispatch rules (see the module docstring) to the names a message gives.

    ``names`` are mention names without the ``@`` (or a forward's ``to``);
    ``sender`` is the VP that wrote the message, None for a person, and is
    required for a VP reply or a forward. ``broadcast_when_unmentioned`` and
    ``default_vp`` matter only for a person's message that names nobody.
    """
    if source is not Source.PERSON and sender is None:
        raise ValueError(f"a {source} selection needs the sending VP")
    members = [vp for vp in roster if vp != sender]
    if not names:
        if source is not Source.PERSON:
            return Selection()
        return _unmentioned(members, roster, sender, cap, broadcast_when_unmentioned, default_vp)
    by_lower = {vp.lower(): vp for vp in roster}
    targets: list[str] = []
    unknown: list[str] = []
    broadcast = named_self = False
    for name in names:
        if name.lower() == BROADCAST:
            broadcast = True
            continue
        pid = resolve(name)
        vp = by_lower.get((pid or name).lower())
        if vp is None:
            unknown.append(name)
        elif vp == sender:
            named_self = True
        elif vp not in targets:
            targets.append(vp)
    if broadcast:
        return _capped(members, Trigger.BROADCAST, cap, unknown, named_self)
    return _capped(targets, Trigger.MENTION, cap, unknown, named_self)


def _unmentioned(
    members: list[str],
    roster: Sequence[str],
    sender: str | None,
    cap: int,
    broadcast: bool,
    default_vp: str | None,
) -> Selection:
    """A person's message that names nobody: everyone, or the default VP."""
    if broadcast:
        return _capped(members, Trigger.BROADCAST, cap)
    # A default that left the roster falls back to its first member.
    fallback = default_vp if default_vp in roster else (roster[0] if roster else None)
    if fallback is None or fallback == sender:
        return Selection()
    return _capped([fallback], Trigger.DEFAULT, cap)


def _capped(
    vps: list[str],
    trigger: Trigger,
    cap: int,
    unknown: list[str] | None = None,
    named_self: bool = False,
) -> Selection:
    return Selection(
        targets=vps[:cap],
        trigger=trigger if vps else Trigger.NONE,
        unknown=list(unknown or []),
        truncated=len(vps) > cap,
        named_self=named_self,
    )
