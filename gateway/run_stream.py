"""One request's view of a group's envelopes: what the AG-UI and A2A edges stream from.

Both edges run a person's message in a group and stream the VPs' turns as
they are written. Each subscribes a :class:`RunSink` to the group's tail
(``gateway.tail.Hub``) *before* it sends anything, so every envelope the
message causes is seen, then reads :func:`envelopes` until its turns have
ended. What ends the read early is a :class:`StreamEnded`: the client fell
too far behind, a gap (envelopes trimmed before they were read), the group
was deleted or the caller left it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Generic, TypeVar

from starlette.requests import Request

from gateway.tail import Subscription

log = logging.getLogger(__name__)

T = TypeVar("T")

# What ends the queue: the subscription overflowed or was ended by the hub.
_CLOSED = object()


class StreamEnded(Exception):
    """The group's stream cannot go on; ``code`` says how, the message says it to a person."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RunSink:
    """The hub's client for one request: envelopes queue here until the stream reads them."""

    def __init__(self, username: str, limit: int) -> None:
        self.username = username
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.limit = limit
        self.failure: str | None = None

    def offer(self, text: str, *, envelope: bool) -> bool:
        if self.failure is not None:
            return False
        if self.queue.qsize() >= self.limit:
            self.overflow()
            return False
        self.queue.put_nowait(text if envelope else _Notice(text))
        return True

    async def put(self, text: str, *, envelope: bool) -> None:
        self.offer(text, envelope=envelope)

    def overflow(self) -> None:
        self._end("the run's stream fell too far behind the group; read the group's history")

    def attach(self, subscription: Subscription) -> None:
        pass

    def detach(self, subscription: Subscription) -> None:
        self._end("the group's stream ended (the group was deleted or you left it)")

    def _end(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
            self.queue.put_nowait(_CLOSED)


class _Notice(str):
    """A frame that is no envelope: a gap, a revocation, a deletion."""


def _notice_text(notice: str) -> str:
    try:
        frame = json.loads(notice)
    except ValueError:
        return "the group's stream was interrupted"
    message = frame.get("message") if isinstance(frame, dict) else None
    return str(message or "the group's stream was interrupted")


async def envelopes(sink: RunSink, group_id: str) -> AsyncGenerator[dict[str, Any]]:
    """The sink's envelopes, decoded, as they arrive; :class:`StreamEnded` when they stop.

    Never ends on its own: the caller stops reading once its turns are over.
    """
    while True:
        item = await sink.queue.get()
        if item is _CLOSED:
            raise StreamEnded("stream_ended", sink.failure or "the stream ended")
        if isinstance(item, _Notice):
            # A gap or a revocation: the turns' ends may never be seen.
            raise StreamEnded("stream_interrupted", _notice_text(item))
        try:
            envelope = json.loads(str(item))
        except ValueError:
            log.warning("run stream: an envelope of %s is not JSON", group_id)
            continue
        if isinstance(envelope, dict):
            yield envelope


class TimedReader(Generic[T]):
    """An async iterator read with an optional bound on each wait.

    A read that times out leaves the iterator as it was: the next read goes
    on waiting for the same item. The AG-UI and A2A edges read a group's
    envelopes with it (a run whose turns have all ended waits a bounded time
    for word of where a reply went on, ``reply_routed``); :func:`keep_alive`
    reads an SSE stream with it.
    """

    def __init__(self, source: AsyncIterator[T]) -> None:
        self._source = source
        self._pending: asyncio.Future[T] | None = None

    async def next(self, within: float | None = None) -> T | None:
        """The next item; None when ``within`` seconds passed first.

        The source's end (``StopAsyncIteration``) and its errors are raised.
        """
        if self._pending is None:
            self._pending = asyncio.ensure_future(anext(self._source))
        done, _ = await asyncio.wait({self._pending}, timeout=within)
        if not done:
            return None
        pending, self._pending = self._pending, None
        return pending.result()

    async def aclose(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._pending.cancel()
            await asyncio.gather(self._pending, return_exceptions=True)
        self._pending = None
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()


def envelope_reader(sink: RunSink, group_id: str) -> TimedReader[dict[str, Any]]:
    """:func:`envelopes` of a run's sink, read with a bound on each wait (StreamEnded raised)."""
    return TimedReader(envelopes(sink, group_id))


ROUTING_WAIT_S = 30.0
"""How long a run whose turns have ended waits for word of where a reply went on."""

KEEP_ALIVE = ": keep-alive\n\n"


async def keep_alive(source: AsyncIterator[str], every_s: float) -> AsyncIterator[str]:
    """``source``'s chunks, with an SSE comment after each ``every_s`` of silence.

    A turn can think or wait on a tool for minutes without writing; proxies
    and load balancers close a connection idle for about a minute, and a
    client cannot tell a quiet run from a dead one. Clients ignore comments.
    """
    reader = TimedReader(source)
    try:
        while True:
            try:
                chunk = await reader.next(every_s)
            except StopAsyncIteration:
                return
            yield KEEP_ALIVE if chunk is None else chunk
    finally:
        await reader.aclose()


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, read no further than one byte past ``limit`` (the caller refuses it)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)
