"""People's ``@mentions``: a name that is no VP of the group but one of its members.

The VP rules come first and stay as they are (``personas.routing``): a name
that resolves to a VP of the roster is that VP, whatever the members are
called. Of the names left over (``Selection.unknown``), those that match a
member's username, in any case, mention that person. A person mentioned is
told (an unread mention, a notification), never given a turn: a message
that names only people dispatches no VP and gets no notice, and the names
left unknown after that are reported as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from personas.routing import Selection

MAX_PEOPLE = 32
"""The most people one message mentions (the rest stay plain text)."""


def people_mentioned(sel: Selection, members: Sequence[str]) -> tuple[Selection, list[str]]:
    """The selection without the names that are members, and those members, in order."""
    by_lower = {m.lower(): m for m in members}
    people: list[str] = []
    unknown: list[str] = []
    for name in sel.unknown:
        member = by_lower.get(name.lower())
        if member is None:
            unknown.append(name)
        elif member not in people and len(people) < MAX_PEOPLE:
            people.append(member)
    if not people:
        return sel, []
    return replace(sel, unknown=unknown), people
