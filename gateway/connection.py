"""One WebSocket connection: its state machine, its outbound queue and its close codes.

Close codes (the ``code`` of the WebSocket close frame):

====  =====================================================================
4400  the handshake named a ``client`` that is not ``web``, ``terminal`` or
      ``api`` (``/ws?client=...``)
4401  unauthorised: missing, malformed, forged or expired token, or a user
      that no longer exists; sent after ``accept`` and before any data
4403  a cookie-authenticated handshake from another site's page (Origin)
4408  idle: the client sent no frame for ``YEAFT_IDLE_TIMEOUT`` seconds
      (clients send ``{"type":"ping"}`` every 25 s)
4409  slow consumer: the client's queue overflowed; reconnect and
      ``subscribe`` with ``lastSeq`` to get what was missed
4429  abuse: more than ``YEAFT_ABUSE_MAX_ERRORS`` error replies within
      ``YEAFT_ABUSE_WINDOW_S`` seconds (garbage or rate-limit floods; ``busy``
      and rate limits while the server read late do not count)
1001  the server is shutting down (also 1012, sent by uvicorn)
1007  a text message that is not valid UTF-8 (WebSocket layer; logged on
      one line, without a traceback, see ``gateway.server``)
1009  a message above ``YEAFT_WS_MAX_MESSAGE_BYTES`` (WebSocket layer)
1011  no answer to the server's WebSocket ping within ``YEAFT_PING_TIMEOUT``
      (sent by uvicorn), or the server could not check the token
====  =====================================================================

Every frame to the client goes through one bounded queue drained by one
writer task, so frames leave in the order they were queued and a client that
does not read fills only its own queue. Offering to a full queue never waits:
it closes the connection with 4409.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from enum import Enum, IntEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel
from starlette.websockets import WebSocket

from gateway.errors import IllegalTransition
from gateway.metrics import Metrics
from gateway.settings import GatewaySettings
from protocol import Channel, ErrorCode, ErrorFrame, dumps

if TYPE_CHECKING:
    from gateway.tail import Subscription

log = logging.getLogger(__name__)


class CloseCode(IntEnum):
    """Close codes this gateway sends; see the module docstring."""

    NORMAL = 1000
    GOING_AWAY = 1001
    INTERNAL_ERROR = 1011
    BAD_REQUEST = 4400
    UNAUTHORIZED = 4401
    BAD_ORIGIN = 4403
    IDLE = 4408
    SLOW_CONSUMER = 4409
    ABUSE = 4429


class ConnectionState(Enum):
    CONNECTING = "connecting"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


_NEXT: dict[ConnectionState, frozenset[ConnectionState]] = {
    ConnectionState.CONNECTING: frozenset({ConnectionState.OPEN, ConnectionState.CLOSING}),
    ConnectionState.OPEN: frozenset({ConnectionState.CLOSING}),
    ConnectionState.CLOSING: frozenset({ConnectionState.CLOSED}),
    ConnectionState.CLOSED: frozenset(),
}


class Connection:
    """The transport side of a client: queueing, writing, idling and closing."""

    def __init__(self, websocket: WebSocket, settings: GatewaySettings, metrics: Metrics) -> None:
        self.websocket = websocket
        self.settings = settings
        self.metrics = metrics
        self.state = ConnectionState.CONNECTING
        self.username = ""
        # The sign-in session the handshake's token belongs to (gateway.sessions).
        self.session = ""
        # How this client reaches Yeaft (web, terminal, API), set at the handshake.
        self.channel = Channel.API
        self.subscriptions: dict[str, Subscription] = {}
        self.close_code: int | None = None
        self.close_reason = ""
        self._queue: asyncio.Queue[tuple[str, bool]] = asyncio.Queue(settings.client_queue_size)
        self._close_requested = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self.last_frame_at = self._loop.time()

    # -- state -----------------------------------------------------------------
    def transition(self, new: ConnectionState) -> None:
        """Move to ``new``; raises :class:`IllegalTransition` when that is not allowed."""
        if new not in _NEXT[self.state]:
            raise IllegalTransition(f"connection cannot go from {self.state.value} to {new.value}")
        self.state = new

    @property
    def is_open(self) -> bool:
        return self.state is ConnectionState.OPEN

    def request_close(self, code: int, reason: str) -> None:
        """Ask for the connection to close with ``code``; later requests are ignored."""
        if self.state in (ConnectionState.CONNECTING, ConnectionState.OPEN):
            self.close_code = code
            self.close_reason = reason
            self.transition(ConnectionState.CLOSING)
            self._close_requested.set()

    # -- the Sink side (used by the hub) ----------------------------------------
    def offer(self, text: str, *, envelope: bool) -> bool:
        """Queue a frame without waiting; a full queue closes the connection (4409)."""
        if not self.is_open:
            return False
        try:
            self._queue.put_nowait((text, envelope))
        except asyncio.QueueFull:
            self.overflow()
            return False
        return True

    async def put(self, text: str, *, envelope: bool) -> None:
        """Queue a frame, waiting for room; does nothing once the connection is closing."""
        if self.is_open:
            await self._queue.put((text, envelope))

    def overflow(self) -> None:
        if self.is_open:
            log.info("closing %s's connection: its queue overflowed", self.username)
        self.request_close(CloseCode.SLOW_CONSUMER, "too slow: reconnect with lastSeq")

    def attach(self, subscription: Subscription) -> None:
        self.subscriptions[subscription.group_id] = subscription

    def detach(self, subscription: Subscription) -> None:
        if self.subscriptions.get(subscription.group_id) is subscription:
            del self.subscriptions[subscription.group_id]

    def send(self, frame: BaseModel) -> bool:
        """Queue a server frame (an ack, an error, a reply); never raises.

        ``dumps`` already makes text UTF-8 can encode; a frame that cannot be
        serialised at all is our bug, and the client gets an ``internal``
        error in its place rather than a connection dropped mid-handler.
        """
        try:
            text = dumps(frame)
        except Exception:
            log.exception(
                "a %s frame for %s could not be serialised", type(frame).__name__, self.username
            )
            text = dumps(
                ErrorFrame(code=ErrorCode.INTERNAL, message="the server could not encode its reply")
            )
        return self.offer(text, envelope=False)

    # -- running -----------------------------------------------------------------
    async def serve(
        self,
        authenticate: Callable[[], Awaitable[tuple[str | None, int, str]]],
        on_frame: Callable[[str | bytes], Awaitable[None]],
        on_close: Callable[[], None],
    ) -> None:
        """Accept, authenticate, then read, write and watch until something closes.

        ``authenticate`` returns ``(username, 0, "")`` or ``(None, code, reason)``.
        ``on_close`` runs once when the connection ends, whatever ended it.
        """
        await self.websocket.accept()
        try:
            username, code, reason = await authenticate()
        except Exception:
            # The store could not be asked (Redis down, say): not the client's
            # fault, so not 4401; the client retries later.
            log.exception("authenticating a WebSocket failed")
            username, code, reason = None, CloseCode.INTERNAL_ERROR, "server error; try again"
        if username is None:
            # Closed after accept, so a browser sees the code, and before any
            # data, so nothing leaks to an unauthenticated peer.
            self.request_close(code, reason)
            await self._send_close()
            self.transition(ConnectionState.CLOSED)
            self.metrics.closes.labels(code=str(code)).inc()
            return
        self.username = username
        if self.state is ConnectionState.CONNECTING:
            self.transition(ConnectionState.OPEN)
        # Otherwise a close was asked for while it authenticated (its session
        # ended, its account was disabled): the closer below ends it at once,
        # through the same clean-up as any other close.
        self.metrics.connections.inc()
        tasks = [
            asyncio.create_task(self._read_loop(on_frame), name="ws-read"),
            asyncio.create_task(self._write_loop(), name="ws-write"),
            asyncio.create_task(self._watch_idle(), name="ws-idle"),
            asyncio.create_task(self._close_requested.wait(), name="ws-close"),
        ]
        reader, writer, idle, closer = tasks
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in (reader, idle, closer):
                task.cancel()
            if self.close_code not in (None, CloseCode.SLOW_CONSUMER) and not writer.done():
                # What was queued before a close we chose (typically the error
                # that caused it) still goes out, unless the writer dies first
                # or the close timeout passes.
                drained = asyncio.create_task(self._queue.join())
                await asyncio.wait(
                    [drained, writer],
                    timeout=self.settings.close_timeout,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                drained.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.state is ConnectionState.OPEN:
                # Nobody asked to close: the peer went away (or we were cancelled).
                self.transition(ConnectionState.CLOSING)
            try:
                on_close()
            finally:
                if self.close_code is not None:
                    await self._send_close()
                self.transition(ConnectionState.CLOSED)
                self.metrics.connections.dec()
                self.metrics.closes.labels(code=str(self.close_code or "peer")).inc()

    async def _read_loop(self, on_frame: Callable[[str | bytes], Awaitable[None]]) -> None:
        while self.is_open:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            self.last_frame_at = self._loop.time()
            text = message.get("text")
            await on_frame(text if text is not None else message.get("bytes") or b"")

    async def _write_loop(self) -> None:
        send = self.websocket.send_text
        count = self.metrics.envelopes_sent
        while True:
            text, envelope = await self._queue.get()
            await send(text)
            self._queue.task_done()
            if envelope:
                count.inc()

    async def _watch_idle(self) -> None:
        timeout = self.settings.idle_timeout
        while True:
            remaining = self.last_frame_at + timeout - self._loop.time()
            if remaining <= 0:
                self.request_close(CloseCode.IDLE, f"idle for {timeout:g} s")
                return
            await asyncio.sleep(remaining)

    async def _send_close(self) -> None:
        """Send the close frame, giving up on a peer that does not read."""
        # A peer that stopped reading leaves the transport's buffer full, and
        # the close frame queues behind it; it goes out if the peer ever
        # reads again, and the wait here is bounded either way.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self.websocket.close(self.close_code or CloseCode.NORMAL, self.close_reason[:120]),
                timeout=self.settings.close_timeout,
            )
