"""What a person's message does when its (group, VP) lane is busy (``QueueMode``).

The VP actor asks :class:`BusyLanes` on arrival of a turn whose lane is held
by another. Depending on the turn's :class:`~actors.turns.QueuePolicy`:

- ``steer``: the message is offered to the running turn's :class:`SteerInbox`.
  The engine takes it at the next model-call boundary; the new turn then ends
  at once (``steered``), its message answered by the running turn. If the
  running turn ends without taking it, the new turn waits for the lane.
- ``followup``: the new turn waits for the lane (``queued``).
- ``collect``: the first such turn carries a :class:`CollectBatch`; turns that
  arrive while it waits join the batch and end at once (``merged``). Once the
  carrier has the lane and no message has come for the quiet window, it
  answers the newest message: the VP reads every one since its last turn as
  it always does, the oldest shortened to one line each beyond the cap.
- ``interrupt``: the group's other turns on this VP are aborted (the running
  one keeps what it said so far) and the new turn runs next (``interrupted``).

Every turn still ends with exactly one ``result``: a steered or merged turn
ends with an empty one, after an ``agent_status`` naming the turn that
answers its message (``otherTurnId``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable

from actors.group_events import GroupEvents
from actors.turns import TurnOutcome, TurnRequest, TurnTracker
from actors.visibility import group_view
from actors.writer import TurnWriter
from engine.events import StopEvent, StopReason
from engine.messages import Message, Usage
from protocol import AgentState, QueueMode, QueueOutcome
from store.base import GroupMessage, Store, StoreError
from store.threads import thread_of

log = logging.getLogger(__name__)

# How much of the group log a steered message is looked up in.
STEER_READ = 200
# An overflowed message is kept as one line of at most this many characters.
OVERFLOW_LINE_CHARS = 160


Opener = Callable[[list[Message]], Awaitable[list[Message]]]
"""Reads the files of messages in (``actors.attachments.open_files`` with a store)."""


@dataclasses.dataclass(slots=True)
class _Offer:
    messages: list[Message]
    upto: str
    taken: asyncio.Future[bool]


class SteerInbox:
    """The messages offered to one running turn (an ``engine.steer.SteerSource``).

    ``seen`` is the newest group-log id the turn has read (its trigger, then
    the newest it took in): the turn's cursor when it saves its transcript.
    """

    def __init__(self, turn_id: str, seen: str, thread_id: str | None = None) -> None:
        self.turn_id = turn_id
        self.seen = seen
        # Where the turn answers: only messages of the same place join it (actors.threads).
        self.thread_id = thread_id
        self.open = True
        self._offered = seen
        self._pending: list[_Offer] = []
        # Offers are prepared one at a time, so they join in log order even
        # when reading one's files takes longer than the next one's.
        self._lock = asyncio.Lock()

    async def offer(
        self, log: list[GroupMessage], vp_id: str, upto: str, opener: Opener | None = None
    ) -> asyncio.Future[bool] | None:
        """Offer the group messages after those offered so far, up to ``upto``.

        ``opener`` reads the files of the messages (``actors.attachments``)
        before they are offered, as for a turn's own context. Returns a
        future that says whether the turn took them (False: the turn ended
        first), or None when the inbox is closed or ``upto`` is not in ``log``.
        """
        async with self._lock:
            if not self.open:
                return None
            taken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            if upto <= self.seen:
                taken.set_result(True)
                return taken
            messages: list[Message] = []
            if upto > self._offered:
                context, trigger = group_view(log, vp_id, self._offered, upto)
                if trigger is None:
                    return None
                messages = [*context, trigger]
                if opener is not None:
                    messages = await opener(messages)
                    if not self.open:  # the turn ended while the files were read
                        return None
                self._offered = upto
            self._pending.append(_Offer(messages, upto, taken))
            return taken

    def take(self, closing: bool) -> list[Message]:
        if not self._pending:
            if closing:
                self.open = False
            return []
        joined: list[Message] = []
        for offer in self._pending:
            joined.extend(offer.messages)
            self.seen = max(self.seen, offer.upto)
            offer.taken.set_result(True)
        self._pending.clear()
        return joined

    def close(self) -> None:
        """No more messages join; those offered and not taken are refused."""
        self.open = False
        for offer in self._pending:
            offer.taken.set_result(False)
        self._pending.clear()
        self._offered = self.seen


class CollectBatch:
    """Messages that one waiting turn (the carrier) will answer together."""

    def __init__(
        self, carrier: str, trigger: str, now: float, thread_id: str | None = None
    ) -> None:
        self.carrier = carrier
        # Only messages of the same thread (or of the main timeline) join one batch.
        self.thread_id = thread_id
        self.triggers = [trigger]
        self.last = now
        self.open = True
        self._members: list[asyncio.Future[bool]] = []

    def join(self, trigger: str, now: float) -> asyncio.Future[bool]:
        taken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.triggers.append(trigger)
        self.last = now
        self._members.append(taken)
        return taken

    def close(self, answered: bool) -> list[str]:
        """Close the batch; its messages, oldest first. Idempotent."""
        if self.open:
            self.open = False
            for member in self._members:
                member.set_result(answered)
        return sorted(self.triggers)


def shorten_overflow(context: list[Message], overflow: frozenset[str]) -> list[Message]:
    """``context`` with the ``overflow`` messages replaced by one line each, in one message."""
    if not overflow:
        return context
    dropped = [m for m in context if m.meta.get("group_message_id") in overflow]
    if not dropped:
        return context
    lines = [f"- {m.content[:OVERFLOW_LINE_CHARS]}" for m in dropped]
    summary = Message.user(
        f"[{len(dropped)} earlier messages while you were busy, shortened]\n" + "\n".join(lines),
        meta={"internal": True, "queue_overflow": len(dropped)},
    )
    shortened: list[Message] = []
    for m in context:
        if m.meta.get("group_message_id") not in overflow:
            shortened.append(m)
        elif m is dropped[0]:
            shortened.append(summary)
    return shortened


AbortOthers = Callable[[str, str], Awaitable[list[str]]]


class BusyLanes:
    """The queue modes of one VP actor's lanes. ``clock`` and ``sleep`` time the debounce."""

    def __init__(
        self,
        vp_id: str,
        store: Store,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        opener: Opener | None = None,
    ) -> None:
        self.vp_id = vp_id
        self.store = store
        self.opener = opener
        self.clock = clock
        self.sleep = sleep
        self.inboxes: dict[str, SteerInbox] = {}
        self.batches: dict[str, CollectBatch] = {}

    def answering(self, group_id: str) -> bool:
        """Whether the group's busy lane is answering, rather than ending a turn.

        A turn whose model has finished (its inbox closed) only stores and
        saves before it frees the lane: a message that comes then waits those
        milliseconds for the lane, not a queue mode (no debounce, no "queued").
        """
        batch = self.batches.get(group_id)
        if batch is not None and batch.open:
            return True
        inbox = self.inboxes.get(group_id)
        return inbox is None or inbox.open

    async def arrive(
        self, req: TurnRequest, tracker: TurnTracker, abort_others: AbortOthers
    ) -> TurnOutcome | CollectBatch | None:
        """Apply the turn's queue mode to a busy lane.

        Returns the outcome of a turn that ended here (steered, merged), the
        batch a collecting turn carries, or None: the turn waits for the lane.
        """
        assert req.queue is not None
        group, trigger = req.group_id, req.origin.trigger_id
        mode = req.queue.mode
        running = self.inboxes.get(group)
        place = req.origin.thread_id
        if mode is QueueMode.STEER and running is not None and running.open:
            log_ = await self.store.read_messages(group, limit=STEER_READ)
            if running.thread_id != place:
                log_ = []  # another place's turn: this message waits for the lane
            # The running turn takes in only what was said where it answers.
            log_ = [m for m in log_ if thread_of(m.meta) == place]
            taken = await running.offer(log_, self.vp_id, trigger, self.opener)
            if taken is not None and await taken:
                return await self._fold(req, tracker, QueueOutcome.STEERED, running.turn_id)
        elif mode is QueueMode.COLLECT:
            batch = self.batches.get(group)
            if batch is not None and batch.open:
                if batch.thread_id == place and await batch.join(trigger, self.clock()):
                    return await self._fold(req, tracker, QueueOutcome.MERGED, batch.carrier)
            else:
                batch = CollectBatch(req.turn_id, trigger, self.clock(), place)
                self.batches[group] = batch
                await self._status(req, AgentState.QUEUED, QueueOutcome.QUEUED, None)
                return batch
        elif mode is QueueMode.INTERRUPT:
            stopped = await abort_others(group, req.turn_id)
            holder = running.turn_id if running is not None else None
            other = holder if holder in stopped else (stopped[0] if stopped else None)
            await self._status(req, AgentState.QUEUED, QueueOutcome.INTERRUPTED, other)
            return None
        await self._status(req, AgentState.QUEUED, QueueOutcome.QUEUED, None)
        return None

    async def collected(
        self, req: TurnRequest, batch: CollectBatch, abort: asyncio.Event
    ) -> tuple[TurnRequest, frozenset[str]]:
        """Wait out the quiet window, close the batch; the turn that answers it and the overflow."""
        assert req.queue is not None
        while not abort.is_set():
            left = batch.last + req.queue.debounce_s - self.clock()
            if left <= 0:
                break
            await self.sleep(left)
        if self.batches.get(req.group_id) is batch:
            del self.batches[req.group_id]
        triggers = batch.close(answered=True)
        cap = req.queue.cap
        overflow = frozenset(triggers[:-cap]) if len(triggers) > cap else frozenset()
        newest = triggers[-1]
        if newest != req.origin.trigger_id:
            req = dataclasses.replace(
                req, origin=dataclasses.replace(req.origin, trigger_id=newest)
            )
        return req, overflow

    def drop_batch(self, group_id: str, batch: CollectBatch) -> None:
        """A carrier that did not answer its batch: its members wait for the lane themselves."""
        batch.close(answered=False)
        if self.batches.get(group_id) is batch:
            del self.batches[group_id]

    def open_inbox(self, req: TurnRequest) -> SteerInbox:
        """The inbox of the turn that now holds its lane."""
        inbox = SteerInbox(req.turn_id, req.origin.trigger_id, req.origin.thread_id)
        self.inboxes[req.group_id] = inbox
        return inbox

    def close_inbox(self, group_id: str, inbox: SteerInbox) -> None:
        inbox.close()
        if self.inboxes.get(group_id) is inbox:
            del self.inboxes[group_id]

    async def _status(
        self, req: TurnRequest, state: AgentState, how: QueueOutcome, other: str | None
    ) -> None:
        events = GroupEvents(self.store, req.group_id, req.origin.thread_id)
        try:
            trigger = req.origin.trigger_id
            await events.status(
                self.vp_id, req.turn_id, state, trigger, queue=how, other_turn_id=other
            )
        except StoreError as exc:
            # Only the indicator is lost; the turn goes on.
            log.warning("queue status of turn %s not written: %s", req.turn_id, exc)

    async def _fold(
        self, req: TurnRequest, tracker: TurnTracker, how: QueueOutcome, into: str
    ) -> TurnOutcome:
        """End a turn whose message another turn answers: a status naming it, an empty result."""
        await self._status(req, AgentState.IDLE, how, into)
        writer = TurnWriter(
            GroupEvents(self.store, req.group_id, req.origin.thread_id),
            self.vp_id,
            req.turn_id,
            tracker,
            req.origin.trigger_id,
        )
        await writer.finish(StopEvent(StopReason.END_TURN, Usage(), 0.0, 0))
        return TurnOutcome(req.turn_id, self.vp_id, req.group_id, StopReason.END_TURN, skipped=True)
