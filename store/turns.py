"""Durable turn records: every dispatched turn, from request to its one result.

A turn exists in the coordinator's memory and on a VP actor only while a
process lives; its record in the store outlives both. The coordinator writes
a record (``REQUESTED``) before it dispatches the turn, the VP marks it
``STARTED`` before the turn writes anything a client can see, and the turn's
``result`` envelope is appended in the same atomic step that marks it
``FINISHED`` (:meth:`~store.base.TurnLog.finish_turn`). So:

- a restarted deployment finds every turn without a result and knows whether
  it never started (run it) or did (end it with an error result);
- a turn can never get two results: whoever finishes it second (a late VP, a
  recovery, a retried write whose first attempt did land) appends nothing.

How a finished turn ended matters for one decision only: a person who sends
the same ``clientMessageId`` again gets a new turn from each VP whose turn
was ``INTERRUPTED`` (by a restart, a shutdown or a lost actor), and nothing
new from a VP that answered.
"""

from __future__ import annotations

import time
from enum import StrEnum

from pydantic import BaseModel, Field

from protocol import Channel, EventFrame


class TurnPhase(StrEnum):
    """How far a turn got, as the store knows it. Phases only move forward."""

    REQUESTED = "requested"  # dispatched; nothing of it is visible yet
    STARTED = "started"  # the VP began it: clients may have seen its output
    FINISHED = "finished"  # its result envelope is in the event log


class TurnEnd(StrEnum):
    """How a finished turn ended."""

    ANSWERED = "answered"  # its own result: success, error, aborted or handed off
    INTERRUPTED = "interrupted"  # ended from outside (restart, shutdown, lost actor)


PHASE_ORDER: dict[TurnPhase, int] = {
    TurnPhase.REQUESTED: 0,
    TurnPhase.STARTED: 1,
    TurnPhase.FINISHED: 2,
}


class TurnRecord(BaseModel):
    """One turn as the store keeps it: who runs it, why, and how far it got.

    ``trigger_id`` is the group-log message the turn answers, ``chain_id``
    the person's message its chain started from, ``caused_by`` the ids in
    between, ``user_id`` the person the chain acts for and ``approvals`` the
    tools that person's message allowed (``!approve``): together they
    rebuild the turn's origin when it must run again.
    """

    turn_id: str
    group_id: str
    vp_id: str
    trigger_id: str
    chain_id: str
    caused_by: list[str] = Field(default_factory=list)
    user_id: str | None = None
    approvals: list[str] = Field(default_factory=list)
    # How the person's message came in (web, terminal, API), for the VP's prompt.
    channel: Channel | None = None
    # The thread the turn answers in (its root's id; ``store.threads``).
    thread_id: str | None = None
    # The task this turn is a run of (team mode): such a turn is never run
    # again on its own after a restart, its task's attempt is ended instead.
    task_id: str | None = None
    # The W3C traceparent of the message's trace (``telemetry.tracing``).
    trace: str | None = None
    phase: TurnPhase = TurnPhase.REQUESTED
    end: TurnEnd | None = None
    created_at: float = Field(default_factory=time.time)

    @property
    def finished(self) -> bool:
        return self.phase is TurnPhase.FINISHED

    @property
    def interrupted(self) -> bool:
        return self.end is TurnEnd.INTERRUPTED

    def static_json(self) -> str:
        """The record without its phase and end, which the backends keep apart."""
        return self.model_dump_json(exclude={"phase", "end"})

    @classmethod
    def restore(cls, static: str, phase: str, end: str | None) -> TurnRecord:
        """A record from its static JSON and the phase and end stored beside it."""
        record = cls.model_validate_json(static)
        record.phase = TurnPhase(phase)
        record.end = TurnEnd(end) if end else None
        return record


def finish_frames(frame: EventFrame | None, after: EventFrame | None) -> list[EventFrame]:
    """The frames a turn's finish appends, in order: its result, then ``after``.

    ``after`` (the VP's last status) belongs to the result: it is appended
    only with one.
    """
    if frame is None:
        if after is not None:
            raise ValueError("a frame to append after the result needs a result")
        return []
    return [frame] if after is None else [frame, after]
