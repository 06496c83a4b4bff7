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
    waited = 0.0  # time spent waiting on the provider, counted against ``total``
    try:
        while True:
            limit = timeouts.first_token if received == 0 else timeouts.stall
            left = timeouts.total - waited
            deadline = asyncio.timeout(min(limit, left))
            began = loop.time()
            try:
                async with deadline:
                    item = await anext(stream)
                waited += loop.time() - began
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not deadline.expired():
                    raise  # the provider's own TimeoutError, not this deadline
                if left <= limit:
                    why = f"the call to {model} ran past its {timeouts.total:g} s limit"
                else:
                    why = _silence(model, limit, received)
                raise ModelError(ErrorKind.TIMEOUT, why, provider=vendor, model=name) from None
            received += 1
            if not isinstance(item, ProgressItem):
                yield item
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


def _silence(model: str, limit: float, received: int) -> str:
    if received == 0:
        return f"no first token from {model} within {limit:g} s"
    chunks = "chunk" if received == 1 else "chunks"
    return f"the stream from {model} stalled: nothing for {limit:g} s after {received} {chunks}"
