"""The one producer of a group's event-log frames: turn envelopes, statuses, questions, notices.

Everything a client learns about a group arrives through its event log, and
every frame in it is built here as its ``protocol`` model and handed to the
store, which serialises it once. :class:`GroupEvents` writes the frames of a
group; :class:`TurnWriter` turns one VP turn's engine events into them.

A message stored in the group log by someone other than a turn's VP (a
person's message, a ``route_forward`` hand-off) is announced by its own
``group_message`` frame (:meth:`GroupEvents.message`), appended before any
turn it causes. A VP's own reply is not: its text has already streamed in
the turn's frames, so repeating it would double what every client reads.
Its id rides on the turn's ``result`` instead (``message_id``): the result
is the one frame that always ends a turn, written after the reply is
stored, and it costs no extra append, so a client learns which stored
message a bubble is, and which later turns answer it, at no cost to the
stream.

A turn's ``result`` goes out only when the turn's owner calls
:meth:`TurnWriter.finish`, never on the engine's stop event: whatever must be
in place before a client learns that a turn ended (the stored reply) is a
step the owner takes between the two. ``finish`` moves the turn's
:class:`~actors.turns.TurnTracker` to ``FINISHED`` before it writes anything,
so a second call raises instead of giving the turn a second result.

A result is appended by the store's ``finish_turn``, which marks the turn's
durable record finished in the same step and appends nothing for a turn that
is finished already: whoever ends a turn second in another process (its VP
after a shutdown ended it, a recovery, a retried write) adds no second
result either. Results and notices are retried while the store is
unreachable (``store.retry``).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

from actors.heartbeat import Heartbeat
from actors.turns import TurnState, TurnTracker
from engine.bridge import Payload, WebBridge, result_payload
from engine.events import (
    EngineEvent,
    NoticeEvent,
    NoticeKind,
    StopEvent,
    StopReason,
    TextDelta,
    ToolCallEvent,
)
from engine.messages import Usage
from personas.prompts import SKIP_TOKEN
from protocol import (
    AgentState,
    AgentStatus,
    AskUserQuestion,
    GroupMessageFrame,
    Handoff,
    MessageChanged,
    QueueOutcome,
    ReplyRouted,
    ResultData,
    SystemData,
    ToolApproval,
    YeaftOutput,
)
from protocol.attachments import message_attachments
from protocol.tasks import Task, TaskChanged
from store.base import GroupMessage, Store, StoreError
from store.chatviews import TurnUsage
from store.quotas import UsageKey
from store.retry import until_stored
from store.threads import THREAD_KEY, thread_of
from store.turns import TurnEnd, TurnRecord

log = logging.getLogger(__name__)

SYSTEM = "system"
"""The ``vpId`` of notices: what the group says, not any VP."""


def error_stop(reason: StopReason, message: str, kind: str, duration_ms: int = 0) -> StopEvent:
    """The stop event of a turn that ended before (or instead of) its engine run.

    ``duration_ms`` is how long the turn had been going when it was ended
    from outside (a shutdown, a lost actor); 0 when it never began.
    """
    return StopEvent(
        reason=reason,
        usage=Usage(),
        cost_usd=0.0,
        duration_ms=max(0, duration_ms),
        error=message,
        error_kind=kind,
    )


class GroupEvents:
    """Builds and appends every frame of one group's event log.

    With ``thread_id`` (a turn answering in a thread, ``store.threads``) its
    turn frames, statuses, questions and notices carry it, and its notices
    are stored in the thread.
    """

    def __init__(self, store: Store, group_id: str, thread_id: str | None = None) -> None:
        self.store = store
        self.group_id = group_id
        self.thread_id = thread_id

    def _frame(self, vp_id: str, turn_id: str, data: Payload) -> YeaftOutput:
        return YeaftOutput(
            conversation_id=self.group_id,
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            data=data,
            thread_id=self.thread_id,
        )

    async def output(
        self, vp_id: str, turn_id: str, data: Payload, status: AgentStatus | None = None
    ) -> int:
        """Append one payload of a turn; ``status``, if given, goes just before it, in one write."""
        frame = self._frame(vp_id, turn_id, data)
        if status is None:
            return await self.store.append_event(self.group_id, frame)
        return (await self.store.append_events(self.group_id, [status, frame]))[-1]

    async def result(
        self,
        vp_id: str,
        turn_id: str,
        data: ResultData,
        end: TurnEnd,
        after: AgentStatus | None = None,
        usage: TurnUsage | None = None,
    ) -> bool:
        """End the turn with this result, unless it has ended already; True if this did.

        ``after`` (the VP's last status) follows the result in the same write,
        and ``usage`` is added to the group's totals with it (see
        ``TurnLog.finish_turn``). Retried until the store takes it: a turn
        whose result is lost never ends.
        """
        frame = self._frame(vp_id, turn_id, data)
        seq = await until_stored(
            lambda: self.store.finish_turn(
                self.group_id, turn_id, frame, end, after=after, usage=usage
            ),
            f"the result of turn {turn_id}",
        )
        return seq is not None

    async def status(
        self,
        vp_id: str,
        turn_id: str,
        state: AgentState,
        trigger_id: str | None = None,
        queue: QueueOutcome | None = None,
        other_turn_id: str | None = None,
    ) -> int:
        frame = self._status(vp_id, turn_id, state, trigger_id)
        if queue is not None:
            frame = frame.model_copy(update={"queue": queue, "other_turn_id": other_turn_id})
        return await self.store.append_event(self.group_id, frame)

    def status_frame(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None = None
    ) -> AgentStatus:
        return self._status(vp_id, turn_id, state, trigger_id)

    def _status(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None
    ) -> AgentStatus:
        return AgentStatus(
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            state=state,
            trigger_id=trigger_id,
            thread_id=self.thread_id,
        )

    async def begin(
        self, vp_id: str, turn_id: str, state: AgentState, trigger_id: str | None = None
    ) -> bool:
        """Mark the turn started with its first status; False when it has already ended."""
        frame = self._status(vp_id, turn_id, state, trigger_id)
        return await self.store.start_turn(self.group_id, turn_id, frame)

    async def store_message(
        self, message: GroupMessage, turns: Sequence[TurnRecord] = ()
    ) -> tuple[GroupMessage, bool]:
        """Store a message in the group log and show it to every member, in one write.

        Returns the stored message and whether it is new (see
        ``GroupLog.append_message``). Its ``group_message`` frame is appended
        with it, so the event log has every stored message, always before the
        replies to it (its turns are dispatched after this returns), and a
        retried write can neither lose nor repeat the frame.
        """
        return await self.store.append_message(
            self.group_id, message, turns, announce=message_frame(self.group_id, message)
        )

    async def changed(self, frame: MessageChanged) -> int:
        """Tell every member a stored message changed (deleted, superseded); returns its seq."""
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame), f"change of {frame.message_id}"
        )

    async def reply_routed(self, frame: ReplyRouted) -> int:
        """Tell every member where a VP's reply went on (``protocol.reply_routes``); its seq."""
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame),
            f"routing of {frame.message_id}",
        )

    async def task_changed(self, task: Task) -> int:
        """Tell every member a task changed (its card); returns its seq.

        The card is the task without its runs' outputs: each output is a
        reply in the group log already, and the task's REST view has them,
        so the log does not repeat every output at every change of a run.
        """
        card = task.model_copy(deep=True)
        for attempt in card.attempts:
            for run in attempt.runs:
                run.output = ""
        frame = TaskChanged(group_id=self.group_id, task=card)
        return await until_stored(
            lambda: self.store.append_event(self.group_id, frame), f"change of task {task.id}"
        )

    async def question(
        self,
        vp_id: str,
        turn_id: str,
        request_id: str,
        prompt: str,
        choices: list[str] | None,
        expires_at: float,
        tool: ToolApproval | None = None,
        *,
        multi_select: bool = False,
        allow_other: bool = False,
    ) -> int:
        frame = AskUserQuestion(
            tool=tool,
            request_id=request_id,
            prompt=prompt,
            choices=choices,
            multi_select=multi_select,
            allow_other=allow_other,
            group_id=self.group_id,
            vp_id=vp_id,
            turn_id=turn_id,
            expires_at=expires_at,
            thread_id=self.thread_id,
        )
        return await self.store.append_event(self.group_id, frame)

    async def notice(self, message: str, chain_id: str, rule: str, **detail: object) -> None:
        """Tell every client something about the group, and keep it in the group log."""
        data = SystemData(subtype="notice", message=message, detail={"rule": rule, **detail})
        await until_stored(lambda: self.output(SYSTEM, chain_id, data), f"a {rule} notice")
        stored = GroupMessage(
            author=SYSTEM,
            role="system",
            text=message,
            meta={"notice": {"rule": rule, **detail}, "chainId": chain_id},
        )
        if self.thread_id is not None:
            stored.meta[THREAD_KEY] = self.thread_id
        # The same message id on every attempt: a retry of a write that did
        # land is then a repeat the group log ignores.
        await until_stored(
            lambda: self.store.append_message(self.group_id, stored), f"a {rule} notice"
        )

    def turn(
        self,
        vp_id: str,
        turn_id: str,
        tracker: TurnTracker | None = None,
        trigger_id: str | None = None,
        heartbeat_s: float = 0.0,
    ) -> TurnWriter:
        return TurnWriter(self, vp_id, turn_id, tracker, trigger_id, heartbeat_s)


def message_frame(group_id: str, message: GroupMessage) -> GroupMessageFrame:
    """The ``group_message`` frame of a stored group-log message.

    Its fields come from the message's ``meta`` as the coordinator wrote
    them: ``clientMessageId`` of a person's message, ``causedBy`` and
    ``chainId`` of a hand-off, and the ``route_forward`` fields. A person's
    message starts its own chain, so its chain id is its own id.
    """
    meta = message.meta
    handoff = None
    if meta.get("injectedBy") == "route_forward":
        # ``from`` is a Python keyword, so the model is built from wire names.
        handoff = Handoff.model_validate(
            {
                "from": meta.get("senderVpId") or message.author,
                "to": meta.get("routeForwardTarget") or "",
                "reason": meta.get("reason"),
            }
        )
    chain_id = meta.get("chainId") or (message.id if message.role == "user" else None)
    return GroupMessageFrame(
        group_id=group_id,
        message_id=message.id,
        author=message.author,
        role=message.role,
        text=message.text,
        ts=message.ts,
        mentions=list(message.mentions),
        people=list(message.people) or None,
        client_message_id=meta.get("clientMessageId"),
        caused_by=meta.get("causedBy"),
        chain_id=chain_id,
        handoff=handoff,
        attachments=message_attachments(group_id, meta.get("attachments")),
        thread_id=thread_of(meta),
    )


class TurnWriter:
    """Writes one turn's envelopes and ``agent_status`` transitions.

    Text that could still turn out to be the skip token is held back, so a VP
    that chooses silence shows nothing at all (``skipped``). The engine's
    stop event is kept, not sent: :meth:`finish` sends the ``result``, once.
    A status change goes out with the payload that follows it (the first
    text with ``streaming``, a tool call with ``tool``) in one append, or on
    its own once the event that caused it is handled.
    ``tracker`` is the turn's state (a fresh one when the writer is the
    turn's only record, as for a turn lost with its VP actor). ``trigger_id``
    is the group-log message the turn answers; every status names it.
    """

    def __init__(
        self,
        events: GroupEvents,
        vp_id: str,
        turn_id: str,
        tracker: TurnTracker | None = None,
        trigger_id: str | None = None,
        heartbeat_s: float = 0.0,
    ) -> None:
        self.events = events
        self.vp_id = vp_id
        self.turn_id = turn_id
        self.trigger_id = trigger_id
        self.tracker = tracker or TurnTracker(turn_id)
        # The result once it is in the event log (finish can fail after it).
        self.sent: StopEvent | None = None
        self.bridge = WebBridge(self._send, session_id=events.group_id)
        self.state = AgentState.IDLE
        self.text = ""
        self.skipped = False
        self.stop: StopEvent | None = None
        # Whether this writer's result ended the turn (False: none sent yet,
        # or the turn had already been ended by someone else).
        self.ended = False
        self._result_sent = False
        self._end = TurnEnd.ANSWERED
        # The id of the reply stored in the group log, named by the result.
        self._message_id: str | None = None
        self._mentions: tuple[str, ...] = ()
        # What goes with the result (``finish``): the last status and the usage.
        self._last: AgentStatus | None = None
        self._usage: TurnUsage | None = None
        self._held: list[TextDelta] = []
        self._released = False
        # A status change not yet in the log: it goes with the next payload.
        self._due: AgentStatus | None = None
        # The turn's start (``begin``) while it is being written beside the
        # engine's start: nothing the engine emits is written before it, and
        # nothing at all if the turn had ended elsewhere (it is then aborted).
        self.opening: asyncio.Future[bool] | None = None
        # ``busy`` with the phase every ``heartbeat_s`` from begin to finish (0: none).
        self.heartbeat = Heartbeat(heartbeat_s, self._beat, self._write_beat)

    async def _send(self, data: Payload) -> None:
        if isinstance(data, ResultData):
            await self._send_status()
            if self._message_id is not None:
                update: dict[str, object] = {"message_id": self._message_id}
                if self._mentions:
                    update["mentions"] = list(self._mentions)
                data = data.model_copy(update=update)
            self._result_sent = True
            last = self._last
            self.ended = await self.events.result(
                self.vp_id, self.turn_id, data, self._end, last, self._usage
            )
            if self.ended and last is not None:
                self.state = last.state
            return
        due, self._due = self._due, None
        await self.events.output(self.vp_id, self.turn_id, data, due)

    def _set_status(self, state: AgentState) -> None:
        """Change the state; the status frame waits for the next payload (or feed's end)."""
        if state is self.state:
            return
        self.state = state
        self._due = self.events.status_frame(self.vp_id, self.turn_id, state, self.trigger_id)

    async def _send_status(self) -> None:
        due, self._due = self._due, None
        if due is not None:
            await self.events.store.append_event(self.events.group_id, due)

    async def status(self, state: AgentState) -> None:
        """Change the state and write its status now."""
        self._set_status(state)
        await self._send_status()

    async def begin(self) -> bool:
        """The turn's first visible write: ``thinking``, and its record marked started.

        One store step, so from the first thing a client sees on, a restart
        ends this turn instead of running it again. False when the turn was
        ended elsewhere first (a shutdown, a recovery): it must not run.
        """
        started = await self.events.begin(
            self.vp_id, self.turn_id, AgentState.THINKING, self.trigger_id
        )
        if started:
            self.state = AgentState.THINKING
            self.heartbeat.start()
        return started

    def _beat(self) -> AgentStatus | None:
        if self.tracker.finished:
            return None
        frame = self.events.status_frame(self.vp_id, self.turn_id, AgentState.BUSY, self.trigger_id)
        return frame.model_copy(update={"phase": self.state, "heartbeat_s": self.heartbeat.every_s})

    async def _write_beat(self, frame: AgentStatus) -> None:
        await self.events.store.append_event(self.events.group_id, frame)

    async def feed(self, event: EngineEvent) -> None:
        """Take one engine event (the engine's ``emit``)."""
        # Shielded: a cancel of the engine's call must not cancel the start.
        if self.opening is not None and not await asyncio.shield(self.opening):
            return
        await self._feed(event)
        # A status whose payload the bridge holds back goes out on its own.
        await self._send_status()

    async def _feed(self, event: EngineEvent) -> None:
        if isinstance(event, StopEvent):
            self.stop = event
            if self._held and self.text.strip() == SKIP_TOKEN:
                self.skipped = True
                self._held.clear()
            elif self._held:
                await self._release()
            return
        if isinstance(event, TextDelta):
            self.text += event.text
            if not self._released:
                self._held.append(event)
                if SKIP_TOKEN.startswith(self.text.strip()):
                    return  # could still be the skip token: say nothing yet
                await self._release()
                return
            self._set_status(AgentState.STREAMING)
        elif self._held:
            # A reply that was only a prefix of the token, or a tool call
            # after it: what was held goes out first, in order.
            await self._release()
        if isinstance(event, ToolCallEvent):
            await self._change_status(AgentState.TOOL)
        if isinstance(event, NoticeEvent) and event.kind is NoticeKind.QUEUED:
            # Waiting for the provider lane, then back to thinking once a slot is free.
            waiting = bool(event.detail.get("waiting"))
            await self._change_status(AgentState.QUEUED if waiting else AgentState.THINKING)
        await self.bridge.feed(event)

    async def _change_status(self, state: AgentState) -> None:
        # A status that is still waiting was already passed by this one: it
        # goes out first, so every client sees each state in order.
        if state is not self.state:
            await self._send_status()
        self._set_status(state)

    async def _release(self) -> None:
        self._released = True
        self._set_status(AgentState.STREAMING)
        for held in self._held:
            await self.bridge.feed(held)
        self._held.clear()

    async def finish(
        self,
        stop: StopEvent | None = None,
        end: TurnEnd = TurnEnd.ANSWERED,
        message_id: str | None = None,
        usage: Usage | None = None,
        accounts: Sequence[str] = (),
        row: UsageKey | None = None,
        mentions: Sequence[str] = (),
    ) -> StopEvent:
        """Send the turn's ``result`` (``stop``, else the engine's) and its last status.

        ``message_id`` is the reply the turn stored in the group log, if any;
        the result names it, and ``mentions``, the VPs that reply addresses
        (a ``reply_routed`` frame follows: ``coordinator.shard.after_turn``).
        ``usage``, if given, is what the turn used: it is added to the
        group's totals, and charged to the budget ``accounts``, in the
        result's write, and to the usage record ``row`` (``store.quotas``).

        The turn is ``FINISHED`` from the first line on, before any await: a
        second call, whenever it comes, raises
        :class:`~actors.turns.IllegalTransition` and sends nothing. ``end``
        says how the turn ended, for its durable record. Text still held that
        the store refuses is given up, never the result: :attr:`ended` says
        whether this result ended the turn (False when it had ended elsewhere),
        and only a result that did is followed by the last status.
        """
        self.tracker.advance(TurnState.FINISHED)
        # No beat may follow the result's last status.
        await self.heartbeat.stop()
        final = stop or self.stop
        if final is None:
            final = error_stop(StopReason.ERROR, "the turn ended without a result", "internal")
        self._end = end
        self._message_id = message_id
        self._mentions = tuple(mentions)
        state = AgentState.ERROR if final.reason == StopReason.ERROR else AgentState.IDLE
        if state is not self.state:
            self._last = self.events.status_frame(self.vp_id, self.turn_id, state, self.trigger_id)
        if usage is not None:
            cost = final.cost_usd if math.isfinite(final.cost_usd) else 0.0
            self._usage = TurnUsage(
                self.turn_id, usage.input_tokens, usage.output_tokens, cost, tuple(accounts), row
            )
        try:
            await self.bridge.feed(final)
            await self.bridge.close()
        except StoreError as exc:
            log.warning("turn %s: could not write its last output: %s", self.turn_id, exc)
        if not self._result_sent:
            await self._send(
                result_payload(final, session_id=self.events.group_id, usage=self.bridge.usage)
            )
        self.sent = final
        return final

    async def system(self, message: str, **detail: object) -> None:
        await self._send(SystemData(subtype="notice", message=message, detail=detail))
