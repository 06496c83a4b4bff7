"""Dispatch selection for the coordinator: a re-export of ``personas.routing``.

The rules live in the personas layer so that the VP actor (for replies)
and the coordinator (for messages and forwards) apply the same ones.

``select_targets`` here also accepts the older call without ``source``,
which means a person's message; new code passes ``source`` explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from personas.mentions import extract_mentions
from personas.routing import BROADCAST, Selection, Source, Trigger
from personas.routing import select_targets as _select_targets

__all__ = ["BROADCAST", "Selection", "Source", "Trigger", "extract_mentions", "select_targets"]


def select_targets(
    names: Sequence[str],
    roster: Sequence[str],
    *,
    sender: str | None,
    resolve: Callable[[str], str | None],
    cap: int,
    broadcast_when_unmentioned: bool = True,
    default_vp: str | None = None,
    source: Source = Source.PERSON,
) -> Selection:
    """:func:`personas.routing.select_targets`, with ``source`` defaulting to a person.

    Kept for the coordinator's existing call; drop the default once every
    caller names its source.
    """
    return _select_targets(
        names,
        roster,
        source=source,
        sender=sender,
        resolve=resolve,
        cap=cap,
        broadcast_when_unmentioned=broadcast_when_unmentioned,
        default_vp=default_vp,
    )
