"""A VP's operations, one frozen command type each, with its result type.

The coordinator sends them to a VP through its host (``coordinator.vps.VPClient.send``);
the host finds the VP and runs the command's handler from :data:`VP_OPS`
(the handlers are :class:`~actors.vp_actor.VPActor` methods). A command that
asks about what a VP holds (``makes_vp`` False) does not make a VP that is
not there: it gets ``absent`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, TypeVar

from actors.commands import Command
from actors.turns import TurnOutcome, TurnRequest
from team.calls import ModelCall


@dataclass(frozen=True, slots=True)
class VPStats:
    """Counters of one VP actor (tests and benchmarks read them)."""

    vp_id: str
    model_calls: int
    active_turns: int
    # The actor's process (an operator's or a fault test's way to kill it).
    pid: int = 0


R = TypeVar("R")


class VPCommand(Command[R]):
    """What every VP command says about itself to the host that runs it."""

    __slots__ = ()
    # False: a VP this host does not hold answers ``absent`` (it is not made for it).
    makes_vp: ClassVar[bool] = True
    absent: ClassVar[object] = None


@dataclass(frozen=True, slots=True)
class RunTurn(VPCommand[TurnOutcome]):
    """Run a turn (``req.vp_id``) in its group's lane; answered with its outcome."""

    req: TurnRequest


@dataclass(frozen=True, slots=True)
class Ping(VPCommand[str]):
    """Make the VP now (its first turn finds it ready); answered with its id."""


@dataclass(frozen=True, slots=True)
class Running(VPCommand[list[str]]):
    """The turns the VP holds, queued or running (a recovering coordinator asks)."""

    makes_vp: ClassVar[bool] = False
    absent: ClassVar[object] = []


@dataclass(frozen=True, slots=True)
class Follow(VPCommand[TurnOutcome | None]):
    """Wait for a turn the VP holds and answer its outcome; None if it holds none."""

    turn_id: str
    makes_vp: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Abort(VPCommand[int]):
    """Abort the VP's running and queued turns of a group (or one turn); answered how many.

    ``at`` is when the coordinator cancelled the group, on the clock that
    stamps ``TurnRequest.sent_at``: a turn sent before then that arrives
    later is aborted on arrival.
    """

    group_id: str
    turn_id: str | None = None
    at: float | None = None


class AnswerVerdict(StrEnum):
    """What became of a person's answer to a VP's question."""

    TAKEN = "taken"
    # Not open: answered already, expired, never asked, or asked in another group.
    NOT_OPEN = "not_open"
    # Open, but the answer does not fit the question (see actors.questions.check_answer).
    NOT_A_CHOICE = "not_a_choice"
    ONE_ONLY = "one_only"
    EMPTY = "empty"


@dataclass(frozen=True, slots=True)
class AnswerReceipt:
    """The VP's reply to an answer: its verdict, and why when it was refused.

    True only when the answer was taken, so a caller may test it as a flag.
    """

    verdict: AnswerVerdict
    reason: str = ""
    choices: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.verdict is AnswerVerdict.TAKEN


@dataclass(frozen=True, slots=True)
class AnswerQuestion(VPCommand[AnswerReceipt]):
    """Deliver a person's answer to a question the VP asked (in ``group_id``, if given).

    A tuple is the choices of a multi-select question.
    """

    request_id: str
    answer: str | tuple[str, ...]
    group_id: str | None = None


@dataclass(frozen=True, slots=True)
class QuestionOf(VPCommand[str | None]):
    """The group an open question of the VP was asked in, or None."""

    request_id: str
    makes_vp: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Complete(VPCommand[str]):
    """One model call without tools for team mode, charged to ``group_id``'s budgets
    and to the quota of ``user_id``, the person whose message it serves."""

    call: ModelCall
    model: str | None
    group_id: str
    chain_id: str
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class Stats(VPCommand[VPStats]):
    """The VP's counters (model calls, active turns, its process)."""
