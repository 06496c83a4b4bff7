"""Deadlines on a model call: connecting, the first output, and every silence after it.

Without them a provider that accepts a request and then says nothing, or
stops halfway through a reply, holds the turn (and the group's turns queued
behind it) for as long as the SDK's read timeout, retried several times.

Four limits, in :class:`StreamTimeouts`:

- ``connect``: opening the connection. The SDK enforces it (its httpx connect
  timeout), so it is applied where the providers are made
  (:mod:`engine.providers.registry`).
- ``first_token``: from sending the request to the model's first output. It
  covers the wait for the response and the model's reading of the prompt,
  which is why it is the longest.
- ``stall``: the longest silence between two pieces of output once the first
  has arrived.
- ``total``: the whole call, however steadily it streams, so a model that
  drips one token every few seconds cannot hold a turn for good.

The last three are enforced here, once for every provider, by :func:`watch`,
which wraps a provider's stream and ends it with a :class:`ModelError` of kind
TIMEOUT, retried and failed over like any other timeout. What counts as
output is any item the provider yields: text, thinking, a tool call, or a
:class:`~engine.providers.base.ProgressItem` for a tool call still being
written. Events that are no output (Anthropic's ``message_start`` and pings,
OpenAI's opening role chunk) produce no item and so do not stop the clock.

The clock runs only while the engine waits on the provider: time spent
forwarding an item to clients is the engine's, not the model's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from engine.errors import ErrorKind, ModelError
from engine.providers.base import ProgressItem, StreamItem


@dataclass(frozen=True, slots=True)
class StreamTimeouts:
    """Seconds allowed to connect, to the first output, and between outputs; all positive."""

    connect: float = 10.0
    first_token: float = 60.0
    stall: float = 30.0
    total: float = 600.0

    def __post_init__(self) -> None:
        for name in ("connect", "first_token", "stall", "total"):
            if not getattr(self, name) > 0:
                raise ValueError(f"the {name} timeout must be a positive number of seconds")

    @property
    def sdk_read(self) -> float:
        """The SDK's own per-read timeout, a backstop behind :func:`watch`.

        Longer than either stream deadline, so the engine's error, which says
        which deadline passed, always comes first.
        """
        return self.first_token + self.stall


async def watch(
    stream: AsyncIterator[StreamItem], timeouts: StreamTimeouts, model: str
) -> AsyncGenerator[StreamItem, None]:
    """``stream``'s items, ended by a TIMEOUT :class:`ModelError` once it falls silent.

    ``model`` (``provider:name``) names the model in the error. Progress items
    restart the clock and are not passed on. ``stream`` is closed however
    this ends, a timeout included, so its connection is released at once.
    """
    vendor, _, name = model.partition(":")
    received = 0
    loop = asyncio.get_running_loop()
    dog = _Watchdog(loop)
    waited = 0.0  # time spent waiting on the provider, counted against ``total``
    try:
        while True:
            limit = timeouts.first_token if received == 0 else timeouts.stall
            left = timeouts.total - waited
            began = loop.time()
            dog.begin(began + min(limit, left))
            try:
                item = await anext(stream)
            except BaseException as exc:
                if not dog.end(exc):
                    if isinstance(exc, StopAsyncIteration):
                        return
                    raise  # the provider's own error (a TimeoutError too), or a cancel
                if left <= limit:
                    why = f"the call to {model} ran past its {timeouts.total:g} s limit"
                else:
                    why = _silence(model, limit, received)
                raise ModelError(ErrorKind.TIMEOUT, why, provider=vendor, model=name) from None
            dog.end(None)
            waited += loop.time() - began
            received += 1
            if not isinstance(item, ProgressItem):
                yield item
    finally:
        dog.close()
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class _Watchdog:
    """The deadline of each wait on a stream, with one timer for all of them.

    ``asyncio.timeout`` per wait makes and cancels a timer for every item
    (about 5 us of CPU each on the development machine). Here a wait
    only notes when it is due; the timer, set for the earliest due it has
    been told of, looks when it fires: a wait past its due is cancelled (and
    :meth:`end` turns that cancel into the timeout), else the timer is set
    again for the due now in force. A steady stream thus sets it once per
    ``stall`` seconds, not once per item. The cancel is handled as
    ``asyncio.Timeout`` handles its own: a cancel that came from elsewhere
    too is passed on.
    """

    __slots__ = ("_cancelling", "_loop", "_timer", "_timer_at", "_waiting", "due", "expired")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._waiting: asyncio.Task[object] | None = None
        self._cancelling = 0
        self.due = 0.0
        self.expired = False

    def begin(self, due: float) -> None:
        """A wait starts, due at ``due`` (loop time)."""
        task = asyncio.current_task()
        assert task is not None, "a stream is read in a task"
        self._waiting, self._cancelling, self.due = task, task.cancelling(), due
        if self._timer is None or self._timer_at > due:
            self._arm(due)

    def end(self, exc: BaseException | None) -> bool:
        """The wait ended (with ``exc``, if it raised); True if it ran past its due."""
        task, self._waiting = self._waiting, None
        if not self.expired or task is None:
            return False
        self.expired = False
        return task.uncancel() <= self._cancelling and isinstance(exc, asyncio.CancelledError)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting = None

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = self._loop.call_at(at, self._fire), at

    def _fire(self) -> None:
        self._timer = None
        task = self._waiting
        if task is None:
            return  # between waits: the next one sets the timer again
        if self._loop.time() < self.due:
            self._arm(self.due)
            return
        self.expired = True
        task.cancel()


def _silence(model: str, limit: float, received: int) -> str:
    if received == 0:
        return f"no first token from {model} within {limit:g} s"
    chunks = "chunk" if received == 1 else "chunks"
    return f"the stream from {model} stalled: nothing for {limit:g} s after {received} {chunks}"
