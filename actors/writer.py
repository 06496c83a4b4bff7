"""One VP turn's frames: its engine events as envelopes, its statuses, its one result.

:class:`TurnWriter` turns one VP turn's engine events into the group's
event-log frames, through :class:`actors.group_events.GroupEvents`. A VP's
reply is not announced by a ``group_message`` frame: its text has already
streamed in the turn's frames. Its id rides on the turn's ``result``
(``message_id``): the result is the one frame that always ends a turn,
written after the reply is stored, and it costs no extra append, so a
client learns which stored message a bubble is, and which later turns
answer it, at no cost to the stream.

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
result either. Results are retried while the store is unreachable
(``store.retry``).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

from actors.group_events import GroupEvents, error_stop
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
    ResultData,
    SystemData,
)
from store.base import StoreError
from store.chatviews import TurnUsage
from store.quotas import UsageKey
from store.turns import TurnEnd

log = logging.getLogger(__name__)


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
