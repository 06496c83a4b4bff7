"""Messages that join a running turn (steering), as the engine sees them.

A turn may be given a :class:`SteerSource`. At each model-call boundary
(before a call, so after a stream or a tool result) the engine takes what is
pending and appends it to the conversation as new user messages. When the
model ends its turn the engine asks once more with ``closing=True``: pending
messages make it call the model again; none close the source, so nothing can
join a turn that has decided to end (whoever offered a message then hears it
was refused, and gives it a turn of its own).
"""

from __future__ import annotations

from typing import Protocol

from engine.messages import Message


class SteerSource(Protocol):
    """Where a running turn gets the messages that join it."""

    def take(self, closing: bool) -> list[Message]:
        """Messages pending since the last call; with none and ``closing``, close for good."""
        ...
