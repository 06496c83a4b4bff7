"""Translating a group's envelopes into AG-UI events (``gateway.agui`` streams them).

A :class:`RunTranslator` follows the turns one person's message started (the
VP and turn ids ``GroupService.ingest`` answered) and turns each of their
``yeaft_output`` envelopes into the standard AG-UI events, built with the
``ag-ui-protocol`` package's models:

* a turn is a step named after its VP (``STEP_STARTED`` at its first
  envelope, ``STEP_FINISHED`` at its ``result``);
* its text is a ``TEXT_MESSAGE_START / CONTENT / END`` message whose
  ``name`` is the VP; the first message of a turn has the turn id as its
  ``messageId``, text written after a tool call opens another
  (``<turnId>.2``, ...);
* thinking is a ``REASONING_START``, ``REASONING_MESSAGE_*``,
  ``REASONING_END`` span;
* a tool call is ``TOOL_CALL_START`` (its ``parentMessageId`` the turn's
  current message), one ``TOOL_CALL_ARGS`` with the arguments as JSON, and
  ``TOOL_CALL_END``; the tool's answer is ``TOOL_CALL_RESULT``;
* a question to the people (``ask_user_question``, an approval say) is a
  ``CUSTOM`` event named ``yeaft.ask_user_question`` with the question; it
  is answered the usual way (``ask_user_answer`` or the HTTP route).

Whatever is open when a turn ends is closed first, so the stream always
nests the way AG-UI's verifier checks. Envelopes of other turns (another
person's message, say) are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from gateway.run_follow import ChainFollower, TaskFollower
from protocol.common import is_id

ASK_USER_EVENT = "yeaft.ask_user_question"


@dataclass
class TurnStream:
    """What is open in one VP's turn while its envelopes are translated."""

    vp_id: str
    turn_id: str
    started: bool = False
    ended: bool = False
    messages: int = 0
    text_id: str | None = None
    reasoning_id: str | None = None
    reasonings: int = 0
    last_message_id: str | None = None
    last_tool_call: str | None = None
    # The open question the turn waits on (its ask_user_question envelope).
    waiting: dict[str, Any] | None = None
    # Message ids of a resumed run's turn carry the run id: the first run took the plain ones.
    suffix: str = ""
    step: str = ""
    outcome: dict[str, Any] = field(default_factory=dict)

    def next_message_id(self) -> str:
        self.messages += 1
        base = f"{self.turn_id}{self.suffix}"
        return base if self.messages == 1 else f"{base}.{self.messages}"


class RunTranslator:
    """The AG-UI events of the turns one message started, envelope by envelope."""

    def __init__(
        self,
        turns: dict[str, str],
        resumed_by: str | None = None,
        task_message: str | None = None,
        chain_id: str | None = None,
    ) -> None:
        # turns: vpId -> turnId, in dispatch order (``IngestResult.turns``);
        # resumed_by: the run id of a run that resumes these turns after interrupts;
        # task_message: the person's message started a team task (its id), whose
        # runs' turns the run follows as the task's cards name them.
        self.suffix = f".{resumed_by}" if resumed_by else ""
        self.turns = {turn: TurnStream(vp, turn, suffix=self.suffix) for vp, turn in turns.items()}
        self.team = TaskFollower(task_message) if task_message else None
        # chain_id: the person's message; the turns its chain hands on to join the run.
        self.chain = ChainFollower(chain_id) if chain_id else None

    @property
    def done(self) -> bool:
        """Whether every turn of the run, and the attempt of its task if any, has ended."""
        if not self.turns_over:
            return False
        return self.chain is None or self.chain.settled

    @property
    def turns_over(self) -> bool:
        """Whether every turn known so far (and the task's attempt) has ended."""
        if not all(t.ended for t in self.turns.values()):
            return False
        return self.team is None or self.team.over

    @property
    def blocked(self) -> bool:
        """Whether every turn still running waits on a question to the people."""
        running = [t for t in self.turns.values() if not t.ended]
        return bool(running) and all(t.waiting is not None for t in running)

    def suspend(self) -> list[BaseEvent]:
        """Close what the waiting turns have open, before the run ends in interrupts."""
        events: list[BaseEvent] = []
        for turn in self.turns.values():
            if turn.ended or not turn.started:
                continue
            events += self._close_text(turn) + self._close_reasoning(turn)
            events.append(StepFinishedEvent(step_name=turn.step))
        return events

    def interrupts(self) -> list[Interrupt]:
        """The open questions of the run as AG-UI interrupts (their ids say whose turn)."""
        out = []
        for turn in self.turns.values():
            asked = turn.waiting
            if turn.ended or asked is None:
                continue
            schema: dict[str, Any] = {"type": "object", "required": ["answer"]}
            choices = asked.get("choices")
            answer: dict[str, Any] = {"type": "string"}
            if choices and not asked.get("allowOther"):
                answer = {"enum": list(choices)}
            if asked.get("multiSelect"):
                answer = {"type": "array", "items": answer, "minItems": 1}
            schema["properties"] = {"answer": answer}
            out.append(
                Interrupt(
                    id=interrupt_id(str(asked["requestId"]), turn.vp_id, turn.turn_id),
                    reason="tool_approval" if asked.get("tool") else "input_required",
                    message=str(asked.get("prompt", "")),
                    tool_call_id=turn.last_tool_call,
                    response_schema=schema,
                )
            )
        return out

    def outcomes(self) -> list[dict[str, Any]]:
        """How each turn ended, in dispatch order (the run's ``result``)."""
        return [{"vpId": t.vp_id, "turnId": t.turn_id, **t.outcome} for t in self.turns.values()]

    def feed(self, envelope: dict[str, Any]) -> list[BaseEvent]:
        """The events one envelope of the group's log becomes (often none)."""
        kind = envelope.get("type")
        if kind == "task_changed":
            return self._task(envelope)
        turn_id = str(envelope.get("turnId"))
        turn = self.turns.get(turn_id)
        events: list[BaseEvent] = []
        if self.chain is not None:
            for vp, joined in self.chain.saw(envelope, known=turn is not None):
                events += self._join(vp, joined, self.chain.early(joined))
            turn = self.turns.get(turn_id)
        if turn is None and self.team is not None:
            self.team.hold(envelope)
            return events
        if turn is None or turn.ended:
            return events
        if not turn.started:
            turn.started = True
            # A step per turn, named by its VP; a VP with two turns at once (a
            # team's node and synthesis) names the second by its turn too.
            active = {t.step for t in self.turns.values() if t.started and not t.ended}
            turn.step = turn.vp_id if turn.vp_id not in active else f"{turn.vp_id} {turn.turn_id}"
            events.append(StepStartedEvent(step_name=turn.step))
        if kind == "yeaft_output":
            turn.waiting = None
            events += self._data(turn, envelope.get("data") or {})
        elif kind == "ask_user_question":
            turn.waiting = envelope
            events.append(CustomEvent(name=ASK_USER_EVENT, value=_question(envelope)))
        return events

    def _task(self, envelope: dict[str, Any]) -> list[BaseEvent]:
        """A card of the run's task: a state snapshot, and the turns of its runs followed."""
        seen = self.team.card(envelope) if self.team is not None else None
        if seen is None or self.team is None:
            return []
        events: list[BaseEvent] = [StateSnapshotEvent(snapshot={"tasks": dict(self.team.tasks)})]
        for vp, turn_id in seen[1]:
            events += self._join(vp, turn_id, self.team.early(turn_id))
        return events

    def _join(self, vp: str, turn_id: str, early: list[dict[str, Any]]) -> list[BaseEvent]:
        """A turn joins the run (a task's run, a hand-off): what it wrote so far, translated."""
        if turn_id in self.turns:
            return []
        self.turns[turn_id] = TurnStream(vp, turn_id, suffix=self.suffix)
        events: list[BaseEvent] = []
        for envelope in early:
            events += self.feed(envelope)
        return events

    def give_up_routing(self) -> None:
        """Stop waiting for word of where replies went on (it did not come in time)."""
        if self.chain is not None:
            self.chain.awaiting.clear()

    def _data(self, turn: TurnStream, data: dict[str, Any]) -> list[BaseEvent]:
        kind = data.get("type")
        if kind == "assistant":
            events: list[BaseEvent] = []
            for block in (data.get("message") or {}).get("content") or []:
                events += self._block(turn, block)
            return events
        if kind == "user":
            return [
                ToolCallResultEvent(
                    message_id=f"{block['tool_use_id']}.result",
                    tool_call_id=str(block["tool_use_id"]),
                    content=str(block.get("content", "")),
                    role="tool",
                )
                for block in (data.get("message") or {}).get("content") or []
                if block.get("type") == "tool_result" and block.get("tool_use_id")
            ]
        if kind == "result":
            return self._end(turn, data)
        return []

    def _block(self, turn: TurnStream, block: dict[str, Any]) -> list[BaseEvent]:
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text") or "")
            if not text:
                return []
            events = self._close_reasoning(turn)
            if turn.text_id is None:
                turn.text_id = turn.last_message_id = turn.next_message_id()
                events.append(
                    TextMessageStartEvent(
                        message_id=turn.text_id, role="assistant", name=turn.vp_id
                    )
                )
            events.append(TextMessageContentEvent(message_id=turn.text_id, delta=text))
            return events
        if kind == "thinking":
            thought = str(block.get("thinking") or "")
            if not thought:
                return []
            events = self._close_text(turn)
            if turn.reasoning_id is None:
                turn.reasonings += 1
                turn.reasoning_id = f"{turn.turn_id}.reasoning.{turn.reasonings}"
                events.append(ReasoningStartEvent(message_id=turn.reasoning_id))
                events.append(ReasoningMessageStartEvent(message_id=turn.reasoning_id))
            events.append(ReasoningMessageContentEvent(message_id=turn.reasoning_id, delta=thought))
            return events
        if kind == "tool_use" and block.get("id"):
            call = turn.last_tool_call = str(block["id"])
            events = self._close_text(turn) + self._close_reasoning(turn)
            events.append(
                ToolCallStartEvent(
                    tool_call_id=call,
                    tool_call_name=str(block.get("name", "")),
                    parent_message_id=turn.last_message_id,
                )
            )
            events.append(
                ToolCallArgsEvent(tool_call_id=call, delta=json.dumps(block.get("input") or {}))
            )
            events.append(ToolCallEndEvent(tool_call_id=call))
            return events
        return []

    def _end(self, turn: TurnStream, data: dict[str, Any]) -> list[BaseEvent]:
        events = self._close_text(turn) + self._close_reasoning(turn)
        events.append(StepFinishedEvent(step_name=turn.step))
        turn.ended = True
        turn.outcome = {
            "messageId": data.get("message_id"),
            "isError": bool(data.get("is_error")),
            "subtype": data.get("subtype"),
        }
        if data.get("error"):
            turn.outcome["error"] = data["error"]
        return events

    @staticmethod
    def _close_text(turn: TurnStream) -> list[BaseEvent]:
        if turn.text_id is None:
            return []
        message, turn.text_id = turn.text_id, None
        return [TextMessageEndEvent(message_id=message)]

    @staticmethod
    def _close_reasoning(turn: TurnStream) -> list[BaseEvent]:
        if turn.reasoning_id is None:
            return []
        message, turn.reasoning_id = turn.reasoning_id, None
        return [ReasoningMessageEndEvent(message_id=message), ReasoningEndEvent(message_id=message)]


def interrupt_id(request_id: str, vp_id: str, turn_id: str) -> str:
    """An interrupt's id: the question's, the VP's and the turn's.

    Question and VP ids never hold a dot, so the first two dots split it.
    """
    return f"{request_id}.{vp_id}.{turn_id}"


def parse_interrupt_id(value: str) -> tuple[str, str, str] | None:
    """``(requestId, vpId, turnId)`` of an interrupt id; None when it is not one of ours."""
    parts = value.split(".", 2)
    if len(parts) != 3 or not (is_id(parts[0]) and is_id(parts[1])):
        return None
    turn = parts[2]
    if not turn or len(turn) > 200 or not turn.isprintable() or " " in turn:
        return None
    return parts[0], parts[1], turn


def _question(envelope: dict[str, Any]) -> dict[str, Any]:
    keys = ("requestId", "vpId", "turnId", "prompt", "choices", "multiSelect", "allowOther")
    value = {k: envelope[k] for k in keys if k in envelope}
    if envelope.get("tool") is not None:
        value["tool"] = envelope["tool"]
    return value
