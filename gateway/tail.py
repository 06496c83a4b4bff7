"""Tailing group event logs once per process and fanning envelopes out to clients.

The :class:`Hub` keeps one :class:`GroupTail` per watched group: a single
task that blocks on ``store.read_events(group, position, wait=...)`` and
hands every envelope to each :class:`Subscription` of that group, however
many clients watch it. An envelope is serialised once, by the store when it
is appended: its stored text goes to every client as is, and the VP filter
reads the header stored beside it, so the tail decodes no JSON. Handing over
never waits: a subscriber whose bounded queue is full is told so (its
connection then closes with 4409), so a slow client can never stall the tail
or the other clients. The tail stops when its last subscriber leaves.

Replay without gap or duplicate (``subscribe {groupId, lastSeq}``):

1. the subscription registers with the tail first, in state ``REPLAYING``:
   live envelopes from then on are buffered on the subscription;
2. once the tail knows its position ``P`` (every envelope after ``P`` is
   certain to reach the buffer), the envelopes after ``lastSeq`` are read
   from the store and sent, up to at least ``P``;
3. the buffer is flushed, dropping envelopes at or below the last replayed
   seq, and the subscription goes ``LIVE``.

Everything after ``lastSeq`` is therefore sent exactly once and in order.
A ``lastSeq`` beyond the newest seq of the log gets a ``conflict`` error and
the replay starts at the newest seq instead (see ``Hub._resume_point``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Protocol

from gateway.errors import GatewayError, IllegalTransition
from gateway.metrics import Metrics
from gateway.settings import GatewaySettings
from gateway.views import group_update
from protocol import ErrorCode, ErrorFrame, dumps
from store.base import EventLog
from store.events import StoredEvent

log = logging.getLogger(__name__)

# Envelopes a vpIds filter never hides: what the whole group must know.
_ALWAYS_SHOWN_DATA = frozenset({"result", "system"})
# Frame types no vpIds filter hides: a VP's question to the people, and the
# group's messages (a person's message, a hand-off), whoever wrote them.
_ALWAYS_SHOWN_TYPES = frozenset(
    {
        "ask_user_question",
        "group_message",
        "message_changed",
        "message_reactions",
        "message_pins",
        "message_edited",
        "reply_versions",
        "task_changed",
    }
)
_SYSTEM_VP = "system"


class Sink(Protocol):
    """The client side of a subscription (a WebSocket connection)."""

    username: str

    def offer(self, text: str, *, envelope: bool) -> bool:
        """Queue a frame without waiting; False when the client is gone or overflowed."""
        ...

    async def put(self, text: str, *, envelope: bool) -> None:
        """Queue a frame, waiting for room (used by replay, which may be large)."""
        ...

    def overflow(self) -> None:
        """The client cannot keep up: close it (4409) so it reconnects with lastSeq."""
        ...

    def attach(self, subscription: Subscription) -> None:
        """A subscription of this client started."""
        ...

    def detach(self, subscription: Subscription) -> None:
        """A subscription of this client ended (unsubscribed, revoked, deleted)."""
        ...


class SubscriptionState(Enum):
    REPLAYING = "replaying"
    LIVE = "live"
    ENDED = "ended"


_NEXT: dict[SubscriptionState, frozenset[SubscriptionState]] = {
    SubscriptionState.REPLAYING: frozenset({SubscriptionState.LIVE, SubscriptionState.ENDED}),
    SubscriptionState.LIVE: frozenset({SubscriptionState.ENDED}),
    SubscriptionState.ENDED: frozenset(),
}


def gap_frame(group_id: str, first_seq: int) -> str:
    """The ``error`` frame that says envelopes were trimmed before the client read them."""
    return dumps(
        ErrorFrame(
            code=ErrorCode.GAP,
            message=(
                f"envelopes of group {group_id} before seq {first_seq} are no longer kept; "
                "reload the history and continue from here"
            ),
            detail={
                "groupId": group_id,
                "firstSeq": first_seq,
                "historyUrl": f"/api/groups/{group_id}/messages",
            },
        )
    )


def ahead_frame(group_id: str, last_seq: int, head: int) -> str:
    """The ``error`` frame for a ``lastSeq`` beyond the newest seq of the group's log."""
    return dumps(
        ErrorFrame(
            code=ErrorCode.CONFLICT,
            message=(
                f"lastSeq {last_seq} is beyond the newest envelope of group {group_id} "
                f"(seq {head}): your view is not from this log; reload the history, "
                "envelopes after that seq follow"
            ),
            field="lastSeq",
            detail={
                "groupId": group_id,
                "lastSeq": head,
                "historyUrl": f"/api/groups/{group_id}/messages",
            },
        )
    )


class Subscription:
    """One client watching one group, optionally only some VPs."""

    def __init__(
        self, sink: Sink, group_id: str, vp_ids: list[str] | None, buffer_limit: int
    ) -> None:
        self.sink = sink
        self.group_id = group_id
        self.vp_ids = frozenset(v.casefold() for v in vp_ids) if vp_ids is not None else None
        self.state = SubscriptionState.REPLAYING
        self.cutoff = -1
        self._buffer: list[tuple[int, str, bool]] = []
        self._buffer_limit = buffer_limit

    @property
    def ended(self) -> bool:
        return self.state is SubscriptionState.ENDED

    def transition(self, new: SubscriptionState) -> None:
        if new not in _NEXT[self.state]:
            raise IllegalTransition(
                f"subscription cannot go from {self.state.value} to {new.value}"
            )
        self.state = new

    def wants(self, event: StoredEvent) -> bool:
        """Whether the VP filter lets ``event`` through (read from its header).

        Messages, notices, results and questions always pass: a client
        watching one VP must still see what people say, the group's notices,
        and know when every turn ended.
        """
        if self.vp_ids is None or event.type in _ALWAYS_SHOWN_TYPES:
            return True
        vp = event.vp_id
        if vp is None or vp == _SYSTEM_VP or vp.casefold() in self.vp_ids:
            return True
        return event.data_type in _ALWAYS_SHOWN_DATA

    def deliver(self, seq: int, text: str, *, envelope: bool = True) -> bool:
        """Hand over one live frame; False when the subscriber must be dropped."""
        if self.state is SubscriptionState.ENDED:
            return False
        if self.state is SubscriptionState.REPLAYING:
            self._buffer.append((seq, text, envelope))
            if len(self._buffer) > self._buffer_limit:
                # A replay that cannot keep up with the live stream is a client
                # that cannot keep up: it comes back later with lastSeq.
                self.sink.overflow()
                return False
            return True
        if envelope and seq <= self.cutoff:
            return True
        return self.sink.offer(text, envelope=envelope)

    def go_live(self, cutoff: int) -> bool:
        """Flush what was buffered during replay, skipping seqs up to ``cutoff``."""
        self.cutoff = cutoff
        buffered, self._buffer = self._buffer, []
        self.transition(SubscriptionState.LIVE)
        for seq, text, envelope in buffered:
            if envelope and seq <= cutoff:
                continue
            if not self.sink.offer(text, envelope=envelope):
                return False
        return True


class GroupTail:
    """The one reader of a group's event log in this process."""

    def __init__(self, hub: Hub, group_id: str) -> None:
        self.hub = hub
        self.group_id = group_id
        self.position: int | None = None
        self.ready = asyncio.Event()
        self.subscriptions: dict[Subscription, None] = {}
        self.task = asyncio.create_task(self._run(), name=f"tail:{group_id}")

    async def _run(self) -> None:
        settings = self.hub.settings
        backoff = 0.1
        while True:
            try:
                store = await self.hub.store()
                if self.position is None:
                    self.position = await store.head(self.group_id)
                    self.ready.set()
                    continue
                batch = await store.read_events(
                    self.group_id, self.position, limit=self.hub.batch, wait=settings.tail_wait_s
                )
            except Exception:
                # The store may be restarting (Redis) or busy (SQLite): keep
                # the subscribers and try again, a little later each time.
                log.warning("tail of %s: read failed", self.group_id, exc_info=True)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            if batch.gap:
                log.warning("tail of %s fell behind retention", self.group_id)
                self._fan_out_gap(batch.first_seq)
            self._fan_out(batch.events)

    def _fan_out(self, events: list[StoredEvent]) -> None:
        # No await in here: the position and the set of subscriptions stay
        # consistent with each other, which the replay hand-off relies on.
        metrics = self.hub.metrics
        for event in events:
            self.position = event.seq
            metrics.observe_envelope(event)
            for sub in list(self.subscriptions):
                if sub.wants(event) and not sub.deliver(event.seq, event.text):
                    self.hub.drop(sub)
            if event.data_type == "result" and self.hub.on_result is not None:
                self.hub.on_result(self.group_id, event)

    def _fan_out_gap(self, first_seq: int) -> None:
        text = gap_frame(self.group_id, first_seq)
        for sub in list(self.subscriptions):
            if not sub.deliver(first_seq, text, envelope=False):
                self.hub.drop(sub)


class Hub:
    """All tails of this process, and the subscribe/unsubscribe protocol."""

    def __init__(
        self,
        store: Callable[[], Awaitable[EventLog]],
        settings: GatewaySettings,
        metrics: Metrics,
    ) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.tails: dict[str, GroupTail] = {}
        # A batch is handed to every queue at once, without yielding, so it
        # must fit in a client's queue or a healthy client would overflow.
        self.batch = min(settings.tail_batch, settings.client_queue_size)
        # Told of every turn's ``result`` once it is handed out (``gateway.quota_meter``).
        self.on_result: Callable[[str, StoredEvent], None] | None = None

    async def subscribe(
        self,
        sink: Sink,
        group_id: str,
        last_seq: int | None,
        vp_ids: list[str] | None,
        pinned: Callable[[], object] | None = None,
    ) -> Subscription:
        """Start watching a group: replay after ``last_seq`` (if given), then live.

        ``pinned`` runs once the tail's position is fixed, before anything is
        sent: a client told "subscribed" there may act at once (send a
        message through another gateway, say) and still sees all it causes,
        since every envelope after that position reaches the subscription,
        held back until the replay is done.
        """
        tail = self.tails.get(group_id)
        if tail is None:
            tail = self.tails[group_id] = GroupTail(self, group_id)
            self.metrics.tails.set(len(self.tails))
        sub = Subscription(sink, group_id, vp_ids, self.settings.client_queue_size)
        tail.subscriptions[sub] = None
        sink.attach(sub)
        try:
            try:
                await asyncio.wait_for(tail.ready.wait(), timeout=self.settings.tail_wait_s * 2)
            except TimeoutError:
                raise GatewayError(
                    ErrorCode.INTERNAL, "the event log is not answering; try again"
                ) from None
            if pinned is not None:
                pinned()
            cutoff = -1
            if last_seq is not None and not sub.ended:
                last_seq = await self._resume_point(sub, tail, last_seq)
                cutoff = await self._replay(sub, tail, last_seq)
            if not sub.ended and not sub.go_live(cutoff):
                self.drop(sub)
        except BaseException:
            self.drop(sub)
            raise
        return sub

    async def _resume_point(self, sub: Subscription, tail: GroupTail, last_seq: int) -> int:
        """Where the replay starts: ``last_seq``, or the log's head if it is beyond it.

        Seqs only grow, so a ``lastSeq`` past the newest seq the store ever
        assigned cannot come from this log (the store was reset and numbers
        from 1 again, or the client mixed up groups). Taken as it is, it
        would become the cut-off and hide every live envelope up to it. The
        client is told, with a ``conflict`` error on ``lastSeq`` that gives
        the head, and then continues after the head, like after a ``gap``:
        clamping without a word would leave it believing its view complete,
        and refusing would leave it with no stream at all.

        The tail's position may lag the store (another process may have
        shown the client newer envelopes), so only the store's head decides.
        """
        if last_seq <= (tail.position or 0):
            return last_seq
        head = await (await self.store()).head(sub.group_id)
        if last_seq <= head:
            return last_seq
        await sub.sink.put(ahead_frame(sub.group_id, last_seq, head), envelope=False)
        return head

    async def _replay(self, sub: Subscription, tail: GroupTail, last_seq: int) -> int:
        """Send the stored envelopes after ``last_seq`` up to the tail's position.

        Returns the last seq replayed (``last_seq`` when there was nothing).
        """
        store = await self.store()
        target = tail.position or 0
        after = last_seq
        while after < target and not sub.ended:
            batch = await store.read_events(sub.group_id, after, limit=self.batch)
            if sub.ended:
                break
            if batch.gap:
                await sub.sink.put(gap_frame(sub.group_id, batch.first_seq), envelope=False)
            if not batch.events:
                break
            for event in batch.events:
                if sub.wants(event):
                    await sub.sink.put(event.text, envelope=True)
                after = event.seq
        return after

    def drop(self, sub: Subscription) -> None:
        """End a subscription (idempotent) and stop its tail if nobody is left."""
        if not sub.ended:
            sub.transition(SubscriptionState.ENDED)
        sub.sink.detach(sub)
        tail = self.tails.get(sub.group_id)
        if tail is None or sub not in tail.subscriptions:
            return
        del tail.subscriptions[sub]
        if not tail.subscriptions:
            tail.task.cancel()
            del self.tails[sub.group_id]
            self.metrics.tails.set(len(self.tails))

    def group_deleted(self, group_id: str) -> None:
        """Tell this process's watchers of a group that it is gone, and stop its tail."""
        text = dumps(group_update({"id": group_id}, "deleted"))
        for sub in self._subscriptions(group_id):
            sub.sink.offer(text, envelope=False)
            self.drop(sub)

    def revoke(self, group_id: str, username: str) -> None:
        """End ``username``'s subscriptions to a group they are no longer a member of."""
        text = dumps(
            ErrorFrame(
                code=ErrorCode.NOT_FOUND,
                message=f"you are no longer a member of group {group_id}",
                detail={"groupId": group_id},
            )
        )
        for sub in self._subscriptions(group_id):
            if sub.sink.username == username:
                sub.sink.offer(text, envelope=False)
                self.drop(sub)

    def group_subscriptions(self, group_id: str) -> list[Subscription]:
        """This process's subscriptions to a group (``gateway.people`` ends some)."""
        return self._subscriptions(group_id)

    def user_subscriptions(self, username: str) -> list[Subscription]:
        """This process's subscriptions of one person, to any group."""
        return [
            sub
            for tail in list(self.tails.values())
            for sub in list(tail.subscriptions)
            if sub.sink.username == username
        ]

    def _subscriptions(self, group_id: str) -> list[Subscription]:
        tail = self.tails.get(group_id)
        return list(tail.subscriptions) if tail is not None else []

    async def close(self) -> None:
        """Stop every tail (server shutdown)."""
        tails, self.tails = list(self.tails.values()), {}
        for tail in tails:
            tail.task.cancel()
        for tail in tails:
            with contextlib.suppress(asyncio.CancelledError):
                await tail.task
        self.metrics.tails.set(0)
