"""What a turn is, across the coordinator and a VP actor.

Plain frozen dataclasses and enums: they cross process boundaries as Ray
arguments and results, so each field is a plain value.

A turn moves through :class:`TurnState` by the transitions in ``_NEXT``; the
coordinator and the VP actor each keep a :class:`TurnTracker` and an illegal
move raises :class:`IllegalTransition` instead of going unnoticed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from actors.lanes import LaneStamp
from engine.events import StopReason
from engine.tools.approval import approval_marks
from protocol import Channel
from protocol.queueing import QueueMode
from protocol.settings import GroupSettings
from protocol.tasks import ToolUse
from store.base import GroupMessage
from store.threads import thread_of
from store.turns import TurnRecord
from team.delegation import Delegation


class IllegalTransition(RuntimeError):
    """A turn was asked to move to a state its current state does not lead to."""


class TurnState(StrEnum):
    """Where a turn is. Every turn ends ``FINISHED`` exactly once."""

    QUEUED = "queued"  # requested, waiting for its (group, VP) lane
    STARTED = "started"  # out of its lane's queue: context, memory, prompt
    RUNNING = "running"  # the engine is answering
    STORED = "stored"  # the reply, if any, is in the group log; the result is next
    FINISHED = "finished"  # the result envelope is claimed and sent; no other can follow


_NEXT: dict[TurnState, frozenset[TurnState]] = {
    TurnState.QUEUED: frozenset({TurnState.STARTED, TurnState.FINISHED}),
    TurnState.STARTED: frozenset({TurnState.RUNNING, TurnState.FINISHED}),
    TurnState.RUNNING: frozenset({TurnState.STORED, TurnState.FINISHED}),
    TurnState.STORED: frozenset({TurnState.FINISHED}),
    TurnState.FINISHED: frozenset(),
}


class TurnTracker:
    """The state of one turn; ``advance`` refuses moves the table does not allow."""

    __slots__ = ("state", "turn_id")

    def __init__(self, turn_id: str, state: TurnState = TurnState.QUEUED) -> None:
        self.turn_id = turn_id
        self.state = state

    def advance(self, new: TurnState) -> None:
        if new not in _NEXT[self.state]:
            raise IllegalTransition(
                f"turn {self.turn_id} cannot go from {self.state.value} to {new.value}"
            )
        self.state = new

    @property
    def finished(self) -> bool:
        return self.state is TurnState.FINISHED


def channel_of(message: GroupMessage) -> Channel | None:
    """How a person's message came in, as its ``meta`` keeps it; None when not kept."""
    value = message.meta.get("channel")
    try:
        return Channel(value) if isinstance(value, str) else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class TurnOrigin:
    """Why a turn runs: the message that triggered it and the chain it belongs to.

    ``caused_by`` lists the group-log ids that led to ``trigger_id``, the
    person's message first; ``chain_id`` is that message's id, which the loop
    guard counts hops under. ``user_id`` is the person whose message started
    the chain: every turn of the chain, forwarded ones included, acts for them
    (their memory scope, for one). ``approvals`` are the tools that person's
    message allowed with ``!approve`` marks (``engine.tools.approval``): they
    hold for every turn of the chain, and for no other message's.
    ``channel`` is how that person's message came in (web, terminal, API),
    None when nobody knows (a message stored before channels were kept).
    ``thread_id`` is the thread the person's message was written in (its
    root's id; ``store.threads``): every turn of the chain answers there.
    """

    trigger_id: str
    chain_id: str
    caused_by: tuple[str, ...] = ()
    user_id: str | None = None
    approvals: tuple[str, ...] = ()
    channel: Channel | None = None
    thread_id: str | None = None

    def next_hop(self, trigger_id: str) -> TurnOrigin:
        """The origin of a turn caused by this turn's output ``trigger_id``."""
        return TurnOrigin(
            trigger_id=trigger_id,
            chain_id=self.chain_id,
            caused_by=(*self.caused_by, self.trigger_id),
            user_id=self.user_id,
            approvals=self.approvals,
            channel=self.channel,
            thread_id=self.thread_id,
        )

    @property
    def depth(self) -> int:
        """Hops from the person's message (0 for a turn it triggered directly)."""
        return len(self.caused_by)

    @classmethod
    def of_message(cls, message: GroupMessage) -> TurnOrigin:
        """The origin of a turn that answers a person's message itself."""
        return cls(
            trigger_id=message.id,
            chain_id=message.id,
            user_id=message.author,
            approvals=approval_marks(message.text),
            channel=channel_of(message),
            thread_id=thread_of(message.meta),
        )

    @classmethod
    def of_record(cls, record: TurnRecord) -> TurnOrigin:
        """The origin a durable turn record keeps."""
        return cls(
            record.trigger_id,
            record.chain_id,
            tuple(record.caused_by),
            record.user_id,
            tuple(record.approvals),
            record.channel,
            record.thread_id,
        )


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """What a turn on a person's message does when its (group, VP) lane is busy.

    From the group's settings, the mode overridden by the message's prefix
    (``protocol.queueing``). ``debounce_s`` and ``cap`` apply to ``collect``.
    """

    mode: QueueMode = QueueMode.COLLECT
    debounce_s: float = 1.0
    cap: int = 20

    @classmethod
    def of(cls, settings: GroupSettings, mode: QueueMode | None = None) -> QueuePolicy:
        """The group's policy, with ``mode`` (a message's own choice) in place of its mode."""
        return cls(mode or settings.queue_mode, settings.queue_debounce_s, settings.queue_cap)


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """A VP's ``route_forward`` call, as the coordinator receives it."""

    group_id: str
    from_vp: str
    to: str
    text: str
    reason: str | None
    origin: TurnOrigin


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn the coordinator asks a VP actor to run.

    ``coordinator`` is the actor name of the coordinator that sent it: the VP
    asks it to remember a tool a person allowed for good and, when
    ``can_forward`` (a group with more than one VP), hands work on through it
    with ``route_forward``.
    A name rather than a handle: the VP keeps one handle per coordinator,
    because a handle unpickled with every turn costs a lookup before its
    first call. None runs the turn on its own (tests).
    """

    group_id: str
    vp_id: str
    turn_id: str
    origin: TurnOrigin
    coordinator: str | None = None
    can_forward: bool = False
    # When the coordinator sent it (its wall clock): a cancel of the group
    # stamped later covers this turn even if the cancel arrives first.
    sent_at: float = 0.0
    # The reply this turn regenerates (``coordinator.regenerate``): the VP
    # rewinds its transcript to before the trigger and answers it afresh.
    regenerates: str | None = None
    # How the turn queues behind a busy lane; None: after it, in order
    # (every turn not started by a person's message).
    queue: QueuePolicy | None = None
    # The task run this turn does (``team.delegation``); None: plain chat.
    delegation: Delegation | None = None
    # The stored message that triggered the turn, when the coordinator has it
    # at hand (a person's message): the VP starts its memory recall with it,
    # beside its read of the group log instead of after it.
    trigger: GroupMessage | None = None
    # Its place in its (group, VP) lane (``coordinator.lane_stamps``): the VP
    # runs the lane's turns in this order, whatever order Ray delivers them in.
    lane: LaneStamp | None = None
    # The trace of the message it answers (a W3C ``traceparent``), kept in
    # its record so that a turn sent again after a restart stays in it.
    trace: str | None = None

    @staticmethod
    def new_turn_id(vp_id: str) -> str:
        return f"{uuid.uuid4().hex[:12]}:{vp_id}"

    def record(self) -> TurnRecord:
        """The durable record of this turn, as dispatched."""
        origin = self.origin
        return TurnRecord(
            turn_id=self.turn_id,
            group_id=self.group_id,
            vp_id=self.vp_id,
            trigger_id=origin.trigger_id,
            chain_id=origin.chain_id,
            caused_by=list(origin.caused_by),
            user_id=origin.user_id,
            approvals=list(origin.approvals),
            channel=origin.channel,
            thread_id=origin.thread_id,
            task_id=self.delegation.task_id if self.delegation else None,
            trace=self.trace,
        )


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended, once its ``result`` envelope is out.

    ``message_id`` is the reply's id in the group log (None when the VP said
    nothing or chose silence); ``mentions`` are the VPs the reply addresses.
    """

    turn_id: str
    vp_id: str
    group_id: str
    reason: StopReason
    text: str = ""
    message_id: str | None = None
    mentions: tuple[str, ...] = ()
    # Names the reply @mentions that match nobody in the group.
    unknown: tuple[str, ...] = ()
    skipped: bool = False
    error: str | None = None
    handoff: dict[str, object] | None = field(default=None)
    # The tools the turn called, in order, and how each went (task evidence).
    tools: tuple[ToolUse, ...] = ()


# Questions a VP asks carry their VP in their id, so an answer goes straight to
# the VP that asked: ``ask_<32 hex digits>_<vp id>``.
_QUESTION_PREFIX = "ask_"
_QUESTION_HEX = 32


def new_question_id(vp_id: str) -> str:
    return f"{_QUESTION_PREFIX}{uuid.uuid4().hex}_{vp_id}"


def question_vp(request_id: str) -> str | None:
    """The VP that asked question ``request_id``, or None when it is not one of ours."""
    head = len(_QUESTION_PREFIX) + _QUESTION_HEX
    if not request_id.startswith(_QUESTION_PREFIX) or len(request_id) <= head + 1:
        return None
    if request_id[head] != "_":
        return None
    return request_id[head + 1 :]
