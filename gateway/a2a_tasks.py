"""A person's message as an A2A task: its id, and its state read from the group's envelopes.

An A2A task is one message a person sent through ``/a2a`` and the turns it
started, one per addressed VP. Its id says where to read it again from the
store alone (so ``GetTask`` works after a reconnect, and on any gateway of
a deployment): ``<messageId>-<seq>``, the stored message and the group's
event-log position just before it. Nothing is kept in one process's memory.

A :class:`TaskTracker` follows the envelopes of those turns and says what
each one becomes in A2A terms:

* each VP's reply is one artifact, its id the turn's, its name the VP's id;
  the reply's text streams as ``TaskArtifactUpdateEvent`` chunks (the first
  opens it, each next one has ``append``, the turn's end has ``lastChunk``);
* a tool call is a ``working`` status update naming the VP and the tool;
* a question to the people (``ask_user_question``: a tool approval, say) is
  ``input-required`` once every running turn waits on one; the status
  message carries the question, and a message to the task answers it;
* the task ends ``completed`` once every turn has, ``canceled`` when a turn
  was stopped, ``failed`` when every turn ended in an error;
* a message the team takes (``/task``, team mode) is followed through its
  task's cards: each card is a ``working`` status update carrying it (a
  data part), each run the card names is an artifact like a VP's reply,
  and the task ends with the attempt (``failed`` when it failed,
  ``canceled`` when the task was abandoned, else ``completed``: the
  people then accept or revise it in the group).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from gateway.run_follow import ChainFollower, TaskFollower
from protocol.common import is_id

# What a task's stream yields besides the task itself.
TaskEvent = TaskArtifactUpdateEvent | TaskStatusUpdateEvent

TERMINAL = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)


@dataclass(frozen=True, slots=True)
class TaskRef:
    """Where a task lives: its group, the person's message, and the log position before it."""

    group_id: str
    message_id: str
    after_seq: int

    @property
    def id(self) -> str:
        return f"{self.message_id}-{self.after_seq}"

    @classmethod
    def parse(cls, group_id: str, task_id: str) -> TaskRef | None:
        """The reference a task id names in ``group_id``; None when it is none of ours."""
        message_id, _, seq = task_id.rpartition("-")
        if not message_id or not is_id(message_id) or not seq.isdigit() or len(seq) > 18:
            return None
        return cls(group_id, message_id, int(seq))


def _struct(values: dict[str, Any]) -> Struct:
    out = Struct()
    out.update({k: v for k, v in values.items() if v is not None})
    return out


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(time.time_ns())
    return stamp


@dataclass
class TurnArtifact:
    """One VP's turn of the task as it has been seen so far."""

    vp_id: str
    turn_id: str
    text: list[str] = field(default_factory=list)
    opened: bool = False
    ended: bool = False
    # The question the turn waits on (its ask_user_question envelope).
    waiting: dict[str, Any] | None = None
    outcome: dict[str, Any] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        return {"vpId": self.vp_id, "turnId": self.turn_id, **self.outcome}

    def artifact(self, parts: list[Part]) -> Artifact:
        return Artifact(
            artifact_id=self.turn_id,
            name=self.vp_id,
            description=f"{self.vp_id}'s reply",
            parts=parts,
            metadata=_struct(self.metadata()),
        )


class TaskTracker:
    """The A2A view of one task, fed the group's envelopes in order."""

    def __init__(self, ref: TaskRef, turns: list[tuple[str, str]], team: bool = False) -> None:
        # turns: (vpId, turnId) in dispatch order; team: the team took the
        # message (``/task``, team mode), and its runs are followed as its
        # cards name them (``gateway.run_follow``).
        self.ref = ref
        self.turns = {turn: TurnArtifact(vp, turn) for vp, turn in turns}
        self.team = TaskFollower(ref.message_id) if team else None
        # The turns the chain hands on to (replies naming VPs, route_forward) join the task.
        self.chain = ChainFollower(ref.message_id)
        self.state = TaskState.TASK_STATE_WORKING
        self.status_message: Message | None = None
        self.status_time = _now()
        # Set when the log no longer holds the task's start: the state then
        # comes from the turn records alone, and no reply text is known.
        self.incomplete = False
        if not self.turns and self.team is None:
            # No VP was addressed: nothing to wait for.
            self.state = TaskState.TASK_STATE_COMPLETED
            said = "sent; no VP was addressed, so none answers"
            self.status_message = _agent_message(ref, said, None)

    # -- what the stream asks ----------------------------------------------------
    @property
    def done(self) -> bool:
        return self.turns_over and self.chain.settled

    @property
    def turns_over(self) -> bool:
        """Whether every turn known so far (and the team's attempt) has ended."""
        if not all(t.ended for t in self.turns.values()):
            return False
        return self.team is None or self.team.over

    def give_up_routing(self) -> list[TaskEvent]:
        """Stop waiting for word of where replies went on; the task's end, if that was all."""
        self.chain.awaiting.clear()
        return self._settle()

    @property
    def blocked(self) -> bool:
        """Whether every turn still running waits on a question to the people."""
        running = [t for t in self.turns.values() if not t.ended]
        return bool(running) and all(t.waiting is not None for t in running)

    def questions(self) -> list[dict[str, Any]]:
        """The open questions of the task's turns, in dispatch order."""
        return [t.waiting for t in self.turns.values() if t.waiting and not t.ended]

    def task(self, history: list[Message] | None = None) -> Task:
        """The task as it stands: status, one artifact per VP that wrote, the request."""
        artifacts = [
            t.artifact([new_text_part("".join(t.text))] if t.text else [])
            for t in self.turns.values()
            if t.text or t.ended
        ]
        return Task(
            id=self.ref.id,
            context_id=self.ref.group_id,
            status=self._status(),
            artifacts=artifacts,
            history=history or [],
            metadata=_struct(
                {
                    "groupId": self.ref.group_id,
                    "messageId": self.ref.message_id,
                    "turns": [{"vpId": t.vp_id, "turnId": t.turn_id} for t in self.turns.values()],
                    "incomplete": self.incomplete or None,
                }
            ),
        )

    def status_event(self) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(
            task_id=self.ref.id, context_id=self.ref.group_id, status=self._status()
        )

    # -- feeding -----------------------------------------------------------------
    def feed(self, envelope: dict[str, Any]) -> list[TaskEvent]:
        """The A2A events one envelope of the group's log becomes (often none)."""
        kind = envelope.get("type")
        if kind == "task_changed":
            return self._card(envelope)
        turn_id = str(envelope.get("turnId"))
        turn = self.turns.get(turn_id)
        events: list[TaskEvent] = []
        for vp, joined in self.chain.saw(envelope, known=turn is not None):
            events += self._join(vp, joined, self.chain.early(joined))
        turn = self.turns.get(turn_id)
        if turn is None and self.team is not None and envelope.get("turnId"):
            self.team.hold(envelope)
        if turn is None or turn.ended:
            return events + self._settle()
        if kind == "ask_user_question":
            turn.waiting = envelope
            if self.blocked:
                events.append(self._move(TaskState.TASK_STATE_INPUT_REQUIRED, self._question()))
            return events
        if kind != "yeaft_output":
            return events
        if turn.waiting is not None:
            turn.waiting = None
            if self.state is TaskState.TASK_STATE_INPUT_REQUIRED:
                events.append(self._move(TaskState.TASK_STATE_WORKING, None))
        data = envelope.get("data") or {}
        if data.get("type") == "assistant":
            for block in (data.get("message") or {}).get("content") or []:
                events += self._block(turn, block)
        elif data.get("type") == "result":
            events += self._end(turn, data)
        return events

    def answered(self, request_id: str | None) -> None:
        """The question ``request_id`` (None: every one) was answered; the task works on."""
        for turn in self.turns.values():
            asked = turn.waiting
            if asked is not None and request_id in (None, asked.get("requestId")):
                turn.waiting = None
        if self.state is TaskState.TASK_STATE_INPUT_REQUIRED and not self.blocked:
            self._move(TaskState.TASK_STATE_WORKING, None)

    def end_from_records(self, finished: dict[str, bool]) -> None:
        """Settle turns whose end the log no longer holds: ``finished`` by turn id."""
        self.incomplete = True
        for turn_id, over in finished.items():
            turn = self.turns.get(turn_id)
            if turn is not None and over and not turn.ended:
                turn.ended = True
                turn.outcome = {"unknown": True}
        if self.done:
            self.state = self._final_state()

    def _block(self, turn: TurnArtifact, block: dict[str, Any]) -> list[TaskEvent]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            chunk = str(block["text"])
            append = turn.opened
            turn.opened = True
            turn.text.append(chunk)
            return [self._chunk(turn, [new_text_part(chunk)], append=append, last=False)]
        if kind == "tool_use" and block.get("name"):
            said = f"{turn.vp_id} calls {block['name']}"
            detail = {"vpId": turn.vp_id, "turnId": turn.turn_id, "tool": str(block["name"])}
            return [self._move(self.state, _agent_message(self.ref, said, detail))]
        return []

    def _settle(self) -> list[TaskEvent]:
        """The task's end, once the last word it waited for (a routing) has come."""
        if self.done and self.state not in TERMINAL:
            return [self._move(self._final_state(), self._summary())]
        return []

    def _join(self, vp: str, turn_id: str, early: list[dict[str, Any]]) -> list[TaskEvent]:
        """A turn joins the task (a hand-off): what it wrote so far, as A2A events."""
        if turn_id in self.turns:
            return []
        self.turns[turn_id] = TurnArtifact(vp, turn_id)
        events: list[TaskEvent] = []
        for envelope in early:
            events += self.feed(envelope)
        return events

    def _card(self, envelope: dict[str, Any]) -> list[TaskEvent]:
        """A card of the team's task: a status update carrying it, and its new runs followed."""
        seen = self.team.card(envelope) if self.team is not None else None
        if seen is None or self.team is None:
            return []
        card, runs = seen
        said = f"task “{card.get('title') or card.get('id')}”: {card.get('status')}"
        events: list[TaskEvent] = []
        for vp, turn_id in runs:
            events += self._join(vp, turn_id, self.team.early(turn_id))
        state = self._final_state() if self.done else self.state
        events.append(self._move(state, _agent_message(self.ref, said, {"task": card})))
        return events

    def _end(self, turn: TurnArtifact, data: dict[str, Any]) -> list[TaskEvent]:
        turn.ended = True
        turn.outcome = {
            "messageId": data.get("message_id"),
            "isError": bool(data.get("is_error")),
            "stopReason": data.get("stop_reason"),
            "error": data.get("error"),
        }
        events: list[TaskEvent] = [self._chunk(turn, [], append=turn.opened, last=True)]
        turn.opened = True
        if self.done:
            events.append(self._move(self._final_state(), self._summary()))
        return events

    def _final_state(self) -> TaskState:
        if self.team is not None:
            return self._team_state()
        ends = [t.outcome for t in self.turns.values()]
        if any(o.get("stopReason") == "aborted" for o in ends):
            return TaskState.TASK_STATE_CANCELED
        if ends and all(o.get("isError") for o in ends):
            return TaskState.TASK_STATE_FAILED
        return TaskState.TASK_STATE_COMPLETED

    def _team_state(self) -> TaskState:
        """A finished attempt: failed, stopped (the task abandoned) or ready for review."""
        cards = list(self.team.tasks.values()) if self.team is not None else []
        if any(c.get("status") == "abandoned" for c in cards):
            return TaskState.TASK_STATE_CANCELED
        last = [(c.get("attempts") or [{}])[-1] for c in cards]
        if last and all(a.get("failed") for a in last):
            return TaskState.TASK_STATE_FAILED
        return TaskState.TASK_STATE_COMPLETED

    def _summary(self) -> Message | None:
        failed = [t for t in self.turns.values() if t.outcome.get("isError")]
        if not failed:
            return None
        said = "; ".join(
            f"{t.vp_id}: {t.outcome.get('error') or 'ended with an error'}" for t in failed
        )
        return _agent_message(self.ref, said, None)

    def _question(self) -> Message:
        asked = self.questions()
        said = "\n".join(str(q.get("prompt", "")) for q in asked)
        keys = (
            "requestId",
            "vpId",
            "turnId",
            "prompt",
            "choices",
            "multiSelect",
            "allowOther",
            "tool",
        )
        keys = (*_QUESTION_KEYS, "tool")
        data = [{k: q[k] for k in keys if q.get(k) is not None} for q in asked]
        return _agent_message(self.ref, said, {"questions": data})

    def _chunk(
        self, turn: TurnArtifact, parts: list[Part], *, append: bool, last: bool
    ) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.ref.id,
            context_id=self.ref.group_id,
            artifact=turn.artifact(parts),
            append=append,
            last_chunk=last,
        )

    def _move(self, state: TaskState, message: Message | None) -> TaskStatusUpdateEvent:
        self.state = state
        self.status_message = message
        self.status_time = _now()
        return self.status_event()

    def _status(self) -> TaskStatus:
        status = TaskStatus(state=self.state, timestamp=self.status_time)
        if self.status_message is not None:
            status.message.CopyFrom(self.status_message)
        return status


_QUESTION_KEYS = ("requestId", "vpId", "turnId", "prompt", "choices", "multiSelect", "allowOther")


def _agent_message(ref: TaskRef, text: str, data: dict[str, Any] | None) -> Message:
    parts = [new_text_part(text)]
    if data is not None:
        parts.append(new_data_part(data))
    return Message(
        message_id=f"{ref.id}.{time.time_ns():x}",
        context_id=ref.group_id,
        task_id=ref.id,
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def user_message(ref: TaskRef, text: str) -> Message:
    """The person's message of a task, for its history."""
    return Message(
        message_id=ref.message_id,
        context_id=ref.group_id,
        task_id=ref.id,
        role=Role.ROLE_USER,
        parts=[new_text_part(text)],
    )
