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
    maps each dispatched VP to its turn id, in dispatch order. ``people``
    are the members it mentions (``coordinator.people``).
    """

    message_id: str
    duplicate: bool = False
    trigger: str = "none"
    unknown: tuple[str, ...] = ()
    truncated: bool = False
    turns: dict[str, str] = field(default_factory=dict)
    people: tuple[str, ...] = ()

    @property
    def dispatched(self) -> list[str]:
        return list(self.turns)


@dataclass(frozen=True, slots=True)
class CancelResult:
    """How many running or queued turns a cancel aborted, and of which VPs."""

    aborted: int
    vps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What a coordinator did with the turns it found without a result when it started.

    ``followed``: still running on a live VP actor, now followed again;
    ``rerun``: never started, sent again; ``interrupted``: started and lost
    with the processes that ran them, ended with an error result. ``since``
    is when the coordinator that recovered them started (its wall clock; the
    newest one when reports are added).
    """

    followed: int = 0
    rerun: int = 0
    interrupted: int = 0
    since: float = 0.0

    def __add__(self, other: RecoveryReport) -> RecoveryReport:
        return RecoveryReport(
            self.followed + other.followed,
            self.rerun + other.rerun,
            self.interrupted + other.interrupted,
            max(self.since, other.since),
        )

    @property
    def turns(self) -> tuple[int, int, int]:
        """(followed, rerun, interrupted): what was found, without the time."""
        return (self.followed, self.rerun, self.interrupted)


@dataclass(frozen=True, slots=True)
class DrainResult:
    """How a graceful shutdown left a coordinator's turns.

    ``drained``: every turn finished within the time given; ``interrupted``:
    the turns still open then, each ended with an error result.
    """

    drained: bool
    interrupted: int = 0
