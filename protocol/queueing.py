"""Queue modes: what happens to a message that reaches a VP while it is answering.

A (group, VP) lane runs one turn at a time. When a person's message arrives
while the lane is busy, the group's ``queueMode`` setting (or a prefix on the
message itself, see :func:`split_queue_prefix`) picks one of
:class:`QueueMode`; the ``agent_status`` frame of the new turn then says
what happened to it with a :class:`QueueOutcome`.
"""

from __future__ import annotations

import re

from protocol.common import WireEnum


class QueueMode(WireEnum):
    """How a busy lane takes a new person's message."""

    # Joins the running turn at its next model call, as a new user message.
    STEER = "steer"
    # A turn of its own after the running one.
    FOLLOWUP = "followup"
    # Messages that arrive while busy become one turn after a quiet window.
    COLLECT = "collect"
    # The running turn stops (its partial text kept) and one on this message starts.
    INTERRUPT = "interrupt"


class QueueOutcome(WireEnum):
    """What became of a message that found its lane busy (``agent_status.queue``)."""

    QUEUED = "queued"  # waits for a turn of its own
    STEERED = "steered"  # joined the running turn ``otherTurnId``
    MERGED = "merged"  # answered by the collected turn ``otherTurnId``
    INTERRUPTED = "interrupted"  # stopped the running turn ``otherTurnId``; runs next


# ``/steer``, ``/queue`` (followup), ``/collect`` and ``/interrupt`` at the
# very start of a message, followed by a space or the end of the text.
_PREFIXES = {
    "steer": QueueMode.STEER,
    "queue": QueueMode.FOLLOWUP,
    "followup": QueueMode.FOLLOWUP,
    "collect": QueueMode.COLLECT,
    "interrupt": QueueMode.INTERRUPT,
}
_PREFIX = re.compile(r"^/(steer|queue|followup|collect|interrupt)(?:\s+|$)")


def split_queue_prefix(text: str) -> tuple[QueueMode | None, str]:
    """The queue mode a message asks for with a leading ``/mode``, and the text without it.

    ``"/steer use metres"`` gives ``(QueueMode.STEER, "use metres")``; a
    message without such a prefix comes back unchanged with None. A prefix
    with nothing after it is not one (the text would be empty).
    """
    match = _PREFIX.match(text)
    if match is None or not text[match.end() :].strip():
        return None, text
    return _PREFIXES[match.group(1)], text[match.end() :]
