"""One MCP server's connection: opened on first use, shared, restarted with back-off.

A :class:`ServerConnection` belongs to one process (a VP actor) and serves
every turn of it. The SDK's client is an async context manager whose task
group must be entered and left by one task, so each connection has an owner
task that opens the client, lists the tools, and holds the connection until
it is closed or the server goes away; calls come from any task and share it
(JSON-RPC carries many requests at once).

States: ``idle`` (never opened) → ``connecting`` → ``ready``; a server that
cannot be started, or that dies, is ``failed`` with the reason, and the next
use after its back-off opens it again; ``closed`` is final. Each server has
its own lock, held only while it is being opened, so a slow or dead server
never holds up another one, and calls are never serialised. Closing never
waits for an opening: a server still answering its handshake (or waiting
out its back-off) is given up at once, so removing a silent server, or
stopping the process that holds it, takes no longer than a healthy one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage

from engine.mcp.config import HttpServer, ServerSpec, StdioServer
from engine.mcp.status import ServerDied, ServerState, ServerStatus, ServerUnavailable

log = logging.getLogger(__name__)

# Pages of a tool listing read at most (a server whose cursor never ends).
MAX_TOOL_PAGES = 20


class _WatchedReadStream:
    """A transport's read stream that reports when the server's side ended."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]):
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _RefusalNoting(httpx2.AsyncBaseTransport):
    """An HTTP transport that notes when a request could not reach the server at all.

    A request refused at connect time never reached the server, so a call
    that fails that way found the server already down; it did not stop
    during the call.
    """

    def __init__(self, on_refused: Callable[[], None]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._on_refused = on_refused

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.ConnectError:
            self._on_refused()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def _watched(
    spec: ServerSpec, on_end: Callable[[], None], on_refused: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    """The SDK transport for ``spec``, with a read stream that reports the server's end."""
    if isinstance(spec, StdioServer):
        params = StdioServerParameters(
            command=spec.command,
            args=list(spec.args),
            env={k: v.get_secret_value() for k, v in spec.env.items()} or None,
            cwd=spec.cwd,
        )
        async with stdio_client(params) as (read, write):
            yield _WatchedReadStream(read, on_end), write
        return
    assert isinstance(spec, HttpServer)
    headers = {k: v.get_secret_value() for k, v in spec.headers.items()}
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        transport=_RefusalNoting(on_refused),
    )
    async with http, streamable_http_client(spec.url, http_client=http) as (read, write):
        yield _WatchedReadStream(read, on_end), write


def describe_error(exc: BaseException, command: str | None = None) -> str:
    """A short, secret-free account of why a server could not be used.

    ``command`` is a stdio server's command: what was not found, however
    the process was spawned (some spawners do not name the file).
    """
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {command or exc.filename or exc}"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e, command) for e in exc.exceptions)
    if isinstance(exc, httpx2.ConnectError):
        return "connection refused"
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


class ServerConnection:
    """The shared connection to one server (see the module notes)."""

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        *,
        connect_timeout_s: float,
        backoff_s: tuple[float, float],
        owner: str | None = None,
    ) -> None:
        self.name = name
        self.owner = owner
        self.spec = spec
        self.connect_timeout_s = connect_timeout_s
        self.backoff_s = backoff_s
        self.state = ServerState.IDLE
        self.error: str | None = None
        self.tools: tuple[mcp_types.Tool, ...] = ()
        self.failures = 0
        self._retry_at = 0.0
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        # Owners of earlier connections still winding down (a dead server's
        # process being reaped); a new connection does not wait for them.
        self._retiring: set[asyncio.Task[None]] = set()
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        # Set by aclose: an opening or a back-off wait under way gives up at once.
        self._closed = asyncio.Event()
        # The outcome of the opening under way, which aclose can end early.
        self._opening: asyncio.Future[Client] | None = None
        self.generation = 0
        # When a request last could not reach the server (HTTP, connect refused).
        self._refused_at = 0.0

    def __repr__(self) -> str:
        return f"ServerConnection({self.name!r}, {self.spec.type}, {self.state})"

    @property
    def transport(self) -> str:
        return "stdio" if isinstance(self.spec, StdioServer) else "http"

    def status(self) -> ServerStatus:
        retry = self.retry_in() if self.state is ServerState.FAILED else None
        return ServerStatus(
            self.name, self.transport, self.state, self.tools, self.error, retry, self.owner
        )

    @property
    def ready(self) -> bool:
        """Open and usable now (a server that went away since is marked failed here)."""
        return self._live() is not None

    def retry_in(self) -> float:
        """Seconds until the next attempt to open a failed server may start (0: now)."""
        if self.state is not ServerState.FAILED:
            return 0.0
        return max(0.0, self._retry_at - time.monotonic())

    # -- opening -----------------------------------------------------------------
    async def ensure(self, wait_backoff_s: float = 5.0) -> Client:
        """The open client, opening it first when needed.

        A server in back-off is waited for when its next attempt is at most
        ``wait_backoff_s`` away; otherwise this raises :class:`ServerUnavailable`.
        """
        client = self._live()
        if client is not None:
            return client
        async with self._lock:
            client = self._live()
            if client is not None:
                return client
            if self.state is ServerState.CLOSED:
                raise self._shut_down()
            wait = self._retry_at - time.monotonic()
            if wait > wait_backoff_s:
                raise ServerUnavailable(
                    f"MCP server '{self.name}' is unavailable ({self.error}); "
                    f"next attempt in {wait:.0f}s"
                )
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), wait)
                if self.state is ServerState.CLOSED:
                    raise self._shut_down()
            return await self._open()

    def _live(self) -> Client | None:
        if self.state is ServerState.READY and not self._ended.is_set():
            return self._client
        if self.state is ServerState.READY:
            # The server went away while nobody was calling it.
            self._mark_failed("the server stopped")
        return None

    async def _open(self) -> Client:
        self._retire()
        self.state = ServerState.CONNECTING
        self._stop = asyncio.Event()
        self._ended = asyncio.Event()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # Read the outcome even when nobody waits for it any more (a timeout).
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._opening = ready
        self._owner = asyncio.create_task(
            self._own(ready, self._stop, self._ended), name=f"mcp:{self.name}"
        )
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                client = await asyncio.shield(ready)
        except TimeoutError:
            self._retire(cancel=True)
            raise self._gave_up(f"no answer within {self.connect_timeout_s:g}s") from None
        except Exception as exc:
            self._retire(cancel=True)
            command = self.spec.command if isinstance(self.spec, StdioServer) else None
            raise self._gave_up(describe_error(exc, command)) from None
        finally:
            self._opening = None
        if self.state is ServerState.CLOSED:
            # Closed just as it came up: aclose stops the owner once this returns.
            raise self._shut_down()
        self._client = client
        self.state = ServerState.READY
        self.error = None
        self.generation += 1
        log.info("MCP server %s ready with %d tools", self.name, len(self.tools))
        return client

    def _shut_down(self) -> ServerUnavailable:
        return ServerUnavailable(f"MCP server '{self.name}' is shut down")

    def _gave_up(self, reason: str) -> ServerUnavailable:
        """The error of an opening that failed for ``reason`` (or ended by aclose)."""
        if self.state is ServerState.CLOSED:
            return self._shut_down()
        self._mark_failed(reason)
        return ServerUnavailable(f"MCP server '{self.name}' is unavailable: {self.error}")

    async def _own(
        self, ready: asyncio.Future[Client], stop: asyncio.Event, ended: asyncio.Event
    ) -> None:
        """The owner task: open the client, list the tools, hold it until told to stop."""
        try:
            async with Client(_watched(self.spec, ended.set, self._refused)) as client:
                self.tools = await self._list_tools(client)
                if not ready.done():
                    ready.set_result(client)
                waits = {asyncio.create_task(stop.wait()), asyncio.create_task(ended.wait())}
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.debug("MCP server %s connection ended: %s", self.name, describe_error(exc))
        finally:
            ended.set()

    @staticmethod
    async def _list_tools(client: Client) -> tuple[mcp_types.Tool, ...]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(tools)

    def _refused(self) -> None:
        self._refused_at = time.monotonic()

    def _mark_failed(self, reason: str) -> None:
        """Failed now; the next attempt waits the back-off of this many failures in a row."""
        self.failures += 1
        first, most = self.backoff_s
        # The first failure after a healthy run reconnects at once; a server
        # that never came up waits the first back-off before its next try.
        n = self.failures - (1 if self.generation else 0)
        delay = 0.0 if n == 0 else min(most, first * 2 ** (n - 1))
        self._retry_at = time.monotonic() + delay
        self.state = ServerState.FAILED
        self.error = reason
        self._client = None
        log.warning("MCP server %s failed: %s", self.name, reason)

    # -- calls -------------------------------------------------------------------
    async def call(
        self, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> mcp_types.CallToolResult:
        """Call ``tool``; raises ServerUnavailable, ServerDied, TimeoutError or MCPError.

        A server found down when the call was sent (its HTTP endpoint refused
        the connection) is unavailable, not a server that stopped during the call.
        """
        client = await self.ensure()
        generation = self.generation
        sent = time.monotonic()
        try:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED or self._ended.is_set():
                raise self._lost(generation, exc.message, sent) from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.TransportError) as e:
            raise self._lost(generation, describe_error(e), sent) from None
        self.failures = 0
        return result

    def _lost(self, generation: int, reason: str, sent: float) -> Exception:
        """The error of a call whose connection ended: down before it, or during it."""
        if self._refused_at >= sent:
            self._died(generation, "not reachable (connection refused)")
            return ServerUnavailable(
                f"MCP server '{self.name}' is not reachable (connection refused): it was "
                "already down when the call was made; it is tried again on the next call"
            )
        self._died(generation, f"the server stopped ({reason})")
        return ServerDied(self.name)

    def _died(self, generation: int, reason: str) -> None:
        # Several calls may see the same death; it counts once.
        if generation == self.generation and self.state is ServerState.READY:
            self._mark_failed(reason)
            self._stop.set()

    # -- closing -----------------------------------------------------------------
    def _retire(self, cancel: bool = False) -> None:
        """Tell the current owner to stop, and let it finish in the background.

        ``cancel`` is for an owner still opening the client (a server that
        never answers the handshake), which would not see the stop event;
        the SDK's shutdown of the server process runs shielded either way.
        """
        owner, self._owner = self._owner, None
        if owner is None or owner.done():
            return
        self._stop.set()
        if cancel:
            owner.cancel()
        self._retiring.add(owner)
        owner.add_done_callback(self._retiring.discard)

    async def _stop_owner(self) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        try:
            async with asyncio.timeout(10):
                await asyncio.shield(owner)
        except TimeoutError:
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
        except Exception:
            pass

    async def aclose(self) -> None:
        """Close the connection for good (the server process, if any, is stopped).

        An opening under way is not waited for: it ends now, as shut down,
        and its owner is cancelled with the others.
        """
        self.state = ServerState.CLOSED
        self._closed.set()
        opening = self._opening
        if opening is not None and not opening.done():
            opening.set_exception(self._shut_down())
        async with self._lock:
            self.state = ServerState.CLOSED
            self._client = None
            await self._stop_owner()
            retiring = list(self._retiring)
            for owner in retiring:
                owner.cancel()
            await asyncio.gather(*retiring, return_exceptions=True)
