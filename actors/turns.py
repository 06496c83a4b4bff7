"""What the coordinator hands a VP actor, and what it gets back.

Plain picklable dataclasses: they cross process boundaries as Ray arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class TurnRequest:
    group_id: str
    vp_id: str
    turn_id: str
    # The group-log message that triggered the turn (a user message, a
    # forward, or another VP's reply that mentioned this VP).
    trigger_id: str
    # Ids of the messages that caused this one, root (the user message) first.
    caused_by: list[str] = field(default_factory=list)
    chain_id: str = ""
    user_id: str | None = None
    # A handle with ``forward(...)`` for the route_forward tool; None hides it.
    router: Any = None


@dataclass(slots=True)
class TurnOutcome:
    turn_id: str
    vp_id: str
    group_id: str
    reason: str
    text: str = ""
    message_id: str | None = None
    mentions: list[str] = field(default_factory=list)
    skipped: bool = False
    error: str | None = None
    handoff: dict[str, Any] | None = None
