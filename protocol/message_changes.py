"""The frame that tells every member a stored message changed after it was written.

Two changes exist: a person deleted their own message (``deleted``), and a
VP's reply was regenerated (``superseded``: the reply stays in the log, and
a new turn on the same message answers again). The frame goes through the
group's event log like everything else a member must see, so every tab,
every gateway replica and a client that reconnects with ``lastSeq`` learn
it; a reload learns it from the stored message's ``meta`` instead.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ServerModel, WireEnum


class MessageChange(WireEnum):
    """What happened to a stored message."""

    DELETED = "deleted"
    SUPERSEDED = "superseded"


class MessageChanged(ServerModel):
    """A stored message of a group changed: deleted by its author, or superseded.

    ``by`` is the user who made the change; ``turnId`` is the new turn of a
    regenerated reply (``superseded`` only); ``ts`` is when, in Unix seconds.
    """

    type: Literal["message_changed"] = "message_changed"
    group_id: str
    message_id: str
    change: MessageChange
    by: str
    ts: float
    turn_id: str | None = None
    seq: int | None = Field(default=None, ge=0)
