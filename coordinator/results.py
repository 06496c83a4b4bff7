"""What coordinator operations return: small frozen dataclasses that cross Ray as values."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.tools.handoff import ForwardResult

__all__ = ["CancelResult", "ForwardResult", "IngestResult"]


@dataclass(frozen=True, slots=True)
class IngestResult:
    """A person's message: where it was stored and whom it went to.

    ``duplicate`` is True when the ``clientMessageId`` was seen before: the
    stored message is returned and nothing is dispatched again. ``turns``
    maps each dispatched VP to its turn id, in dispatch order.
    """

    message_id: str
    duplicate: bool = False
    trigger: str = "none"
    unknown: tuple[str, ...] = ()
    truncated: bool = False
    turns: dict[str, str] = field(default_factory=dict)

    @property
    def dispatched(self) -> list[str]:
        return list(self.turns)


@dataclass(frozen=True, slots=True)
class CancelResult:
    """How many running or queued turns a cancel aborted, and of which VPs."""

    aborted: int
    vps: tuple[str, ...] = ()
