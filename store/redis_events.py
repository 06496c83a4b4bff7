"""The Redis store's event log: appends, blocking reads and the head.

Keys (beside those in ``store.redis``; ``{G}`` is the group's hash tag):

=======================  ======  ===============================================
``P:g:{G}:events``       stream  one entry per event, id ``<seq>-0`` (fields below)
``P:g:{G}:eseq``         string  the last event seq assigned
=======================  ======  ===============================================

An event entry holds ``d``, the frame's JSON text with its seq, and the
header fields a subscriber filter reads without decoding it: ``t`` (frame
type), ``v`` (``vpId``) and ``k`` (``data.type`` of ``yeaft_output``); ``v``
and ``k`` are absent when the frame has none. Entries written before headers
were stored have only ``d``; their header is read from the JSON instead.

The event append takes the next seq and XADDs it with the exact MAXLEN
retention in one Lua script (``store.redis_scripts``), so seqs are gap-free
however many writers there are; a message's announcement and a turn's events
are appended by the message and turn scripts with the same arguments. A
blocking read is XREAD BLOCK on a connection pool kept apart from the one
ordinary commands use, so readers parked for seconds never starve writers
of connections.

redis-py gives every reply a socket timeout (5 s by default). A blocking
read that is still parked when it fires is not an empty read to redis-py but
a ``TimeoutError`` and a dropped connection, so each XREAD BLOCK is kept
well below the blocking pool's socket timeout (20 s unless the URL sets
``socket_timeout``), and a longer wait is several blocks in a row.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from protocol import EventFrame
from store.appends import Append, AppendQueue, Outcome
from store.base import StoreError
from store.events import (
    EncodedEvent,
    EventBatch,
    EventHeader,
    StoredEvent,
    encode_event,
    make_batch,
)
from store.redis_errors import redis_errors as _redis_errors

EVENT_KINDS = ("events", "eseq")

# The longest single XREAD BLOCK, and the socket timeout of the blocking
# pool's connections unless the URL sets one: twice the block, so a busy
# server has as long again to answer a block that just ended.
_MAX_BLOCK_S = 10.0
BLOCKING_SOCKET_TIMEOUT_S = 2 * _MAX_BLOCK_S


def longest_block(socket_timeout: object) -> float:
    """The longest XREAD BLOCK a connection with ``socket_timeout`` survives, with room to spare."""
    if not isinstance(socket_timeout, int | float):
        return _MAX_BLOCK_S  # None: replies have no timeout
    return min(_MAX_BLOCK_S, socket_timeout / 2)


def _seq_of(entry_id: str) -> int:
    return int(entry_id.split("-", 1)[0])


class RedisEvents:
    """``store.base.EventLog`` on Redis (mixed into RedisStore).

    ``max_block_s`` is the longest single XREAD BLOCK: at most half the
    blocking connections' socket timeout, so a parked read always ends on
    the server before redis-py gives up on the socket.
    """

    event_retention: int
    max_block_s: float
    _r: aioredis.Redis
    _blocking: aioredis.Redis
    _closed: bool
    _appends: AppendQueue
    _append_event: AsyncScript
    _read_events: AsyncScript
    # Per group a blocking read was made of here: the head it last reached.
    _reached: dict[str, int]

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        self._check_open()
        return (await self._appends.append(group_id, [encode_event(frame)]))[0]

    async def append_events(self, group_id: str, frames: Sequence[EventFrame]) -> list[int]:
        self._check_open()
        encoded = [encode_event(frame) for frame in frames]
        if not encoded:
            return []
        return await self._appends.append(group_id, encoded)

    async def _write_appends(self, appends: Sequence[Append]) -> list[Outcome]:
        """A batch of appends in one round trip (``AppendQueue``); each succeeds or fails alone.

        MULTI keeps other writers' entries from coming between the events of
        one append (and of the batch).
        """
        if len(appends) == 1 and len(appends[0][1]) == 1:
            # Alone: one script call, not a MULTI/EXEC pipeline around it.
            (group_id, [encoded]) = appends[0]
            with _redis_errors():
                seq = await self._append_event(
                    keys=self._event_keys(group_id),
                    args=self._event_args(encoded),
                )
            return [[int(seq)]]
        with _redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                for group_id, events in appends:
                    keys = self._event_keys(group_id)
                    for encoded in events:
                        await self._append_event(
                            keys=keys,
                            args=self._event_args(encoded),
                            client=pipe,
                        )
                replies = iter(await pipe.execute(raise_on_error=False))
        outcomes: list[Outcome] = []
        for _, events in appends:
            got = [next(replies) for _ in events]
            failed = next((r for r in got if isinstance(r, Exception)), None)
            if failed is None:
                outcomes.append([int(seq) for seq in got])
            else:
                outcomes.append(StoreError(f"redis store: {failed}"))
        return outcomes

    def _event_args(self, encoded: EncodedEvent) -> list[str | int]:
        """The APPEND_EVENT script's arguments for one event (also the tail of APPEND_MESSAGE's)."""
        return [encoded.body, self.event_retention, *header_fields(encoded)]

    async def read_events(
        self, group_id: str, after_seq: int, *, limit: int = 500, wait: float = 0.0
    ) -> EventBatch:
        self._check_open()
        after_seq = max(0, after_seq)
        limit = max(1, limit)
        if wait <= 0:
            return await self._snapshot(group_id, after_seq, limit)
        batch: EventBatch | None = None
        # A blocking read from the head the last one reached (a gateway tail
        # back from delivering a batch) would mostly find nothing: it blocks
        # at once. Nothing is missed, as XREAD answers at once for an entry
        # appended since.
        if self._reached.get(group_id) != after_seq:
            batch = await self._tail_snapshot(group_id, after_seq, limit)
            if batch.events:
                return batch
        deadline = time.monotonic() + wait
        stream = self._key(group_id, "events")
        while not self._closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if batch is not None:
                    return batch
                return await self._tail_snapshot(group_id, after_seq, limit)
            block_ms = max(1, int(min(remaining, self.max_block_s) * 1000))
            # XREAD with an explicit id answers at once when a newer entry
            # already exists, so nothing appended since the snapshot is missed.
            with _redis_errors():
                woke = await self._blocking.xread(
                    {stream: f"{after_seq}-0"}, count=1, block=block_ms
                )
            if not woke:
                continue  # a block ended with nothing new: block again until the deadline
            # Re-read through the snapshot script so gap and first/last seq
            # are computed the same way as for a non-blocking read.
            batch = await self._tail_snapshot(group_id, after_seq, limit)
            if batch.events:
                return batch
        return batch if batch is not None else EventBatch(last_seq=after_seq)

    async def _tail_snapshot(self, group_id: str, after_seq: int, limit: int) -> EventBatch:
        """A blocking read's snapshot; remembers the head when it reached it."""
        batch = await self._snapshot(group_id, after_seq, limit)
        if (head := batch.head_reached(after_seq)) is not None:
            self._reached[group_id] = head
        else:
            self._reached.pop(group_id, None)
        return batch

    async def _snapshot(self, group_id: str, after_seq: int, limit: int) -> EventBatch:
        with _redis_errors():
            last, first, entries = await self._read_events(
                keys=self._event_keys(group_id),
                args=[f"{after_seq + 1}-0", limit],
            )
        events = [_stored(eid, fields) for eid, fields in entries]
        return make_batch(after_seq, events, int(first), int(last))

    async def head(self, group_id: str) -> int:
        self._check_open()
        with _redis_errors():
            last = await self._r.get(self._key(group_id, "eseq"))
        return int(last) if last else 0

    def _event_keys(self, group_id: str) -> list[str]:
        return [self._key(group_id, "eseq"), self._key(group_id, "events")]


def _stored(entry_id: str, flat: list[str]) -> StoredEvent:
    """A stream entry (id and flat ``[name, value, ...]`` fields) as a StoredEvent."""
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    text = fields.get("d")
    if text is None:
        raise StoreError(f"event stream entry {entry_id} has no field 'd'")
    kind = fields.get("t")
    if kind is None:
        # Appended before headers were stored: decode it (such entries age out
        # with retention, so this path fades away).
        header = EventHeader.of_envelope(json.loads(text))
    else:
        header = EventHeader(kind, fields.get("v"), fields.get("k"))
    return StoredEvent.from_header(_seq_of(entry_id), text, header)


def header_fields(encoded: EncodedEvent) -> list[str]:
    """The header of an event as the flat stream-entry fields stored beside its text."""
    header = encoded.header
    fields = ["t", header.type]
    if header.vp_id is not None:
        fields += ["v", header.vp_id]
    if header.data_type is not None:
        fields += ["k", header.data_type]
    return fields


def body_and_header(frame: EventFrame | None) -> tuple[str, list[str]]:
    """A frame's text and header fields for a turn script ('' and none without a frame)."""
    if frame is None:
        return "", []
    encoded = encode_event(frame)
    return encoded.body, header_fields(encoded)
