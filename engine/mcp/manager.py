"""Every MCP server of one process, and the engine tools they offer a turn.

One :class:`McpManager` lives in each VP host process, shared by its VPs
(and one in the gateway, for the listing). It holds a
:class:`ServerConnection` per configured server (per VP for a server of
``scope: vp``), opened in the background ahead of use and shared by every
turn after. :meth:`McpManager.toolset` gives a turn the tools of the
servers it may use, as engine :class:`~engine.tools.registry.Tool` objects
named ``server__tool`` with the server's own JSON Schema, read at each step:
a server that is still starting or cannot be reached offers nothing (a turn
never waits for it) and is named in :meth:`McpToolset.missing`, so a call to
one of its tools gets an error that says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from engine.mcp.config import SEPARATOR, McpConfig, ServerSpec, StdioServer
from engine.mcp.status import (
    ConnectionReport,
    ServerDied,
    ServerState,
    ServerStatus,
    ServerUnavailable,
)
from engine.tools.registry import (
    CONVERSATION_MODES,
    JsonArguments,
    Tool,
    ToolContext,
    ToolOutcome,
)

if TYPE_CHECKING:
    # The SDK is imported when a server is configured (``_connect``), not before.
    import mcp_types

    from engine.mcp.connection import ServerConnection

# Providers accept function names of at most 64 of these characters.
MAX_TOOL_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# A list in a persona or a group's settings that holds this means every server.
ALL = "*"


def select_servers(
    configured: Iterable[str], persona: Sequence[str], group: Sequence[str]
) -> list[str]:
    """The servers a VP may use in a group: configured, allowed by both lists."""

    def allows(choice: Sequence[str], name: str) -> bool:
        return ALL in choice or name in choice

    return [n for n in configured if allows(persona, n) and allows(group, n)]


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``."""
    return f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"[:MAX_TOOL_NAME]


def _schema(tool: mcp_types.Tool) -> dict[str, Any]:
    schema = dict(tool.input_schema or {})
    # Providers want an object schema even for a tool without parameters.
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


class McpToolset:
    """The MCP tools of one turn, read afresh at every step of it.

    A turn never waits for a server: it is offered the tools of the servers
    that are ready when each model call is made, so a server that comes up
    during the turn joins at its next step, and one that cannot be reached
    costs nothing (a call to one of its tools is answered with why).
    """

    def __init__(self, manager: McpManager, servers: Sequence[str], vp_id: str | None) -> None:
        self._manager = manager
        self._servers = tuple(servers)
        self._vp_id = vp_id

    def tools(self) -> tuple[Tool, ...]:
        """The tools of the servers that are ready now (or were, and are reconnecting);
        the others are opened meanwhile."""
        out: list[Tool] = []
        for conn in self._connections():
            if self._offers(conn):
                out.extend(self._manager.tools_of(conn))
        return tuple(out)

    @property
    def unavailable(self) -> dict[str, str]:
        """Each server of the turn that offers no tools now, and why."""
        return {c.name: _why_not(c) for c in self._connections() if not self._offers(c)}

    def _connections(self) -> list[ServerConnection]:
        conns = (self._manager.connection(name, self._vp_id) for name in self._servers)
        return [c for c in conns if c is not None]

    def _offers(self, conn: ServerConnection) -> bool:
        """Whether ``conn``'s tools are offered now (asking also opens it when it may).

        A server listed before keeps its tools while it reconnects: a call
        to one waits for the connection (the model chose that server).
        """
        return self._manager.usable_now(conn) or bool(conn.generation)

    def _server_of(self, tool: str) -> ServerConnection | None:
        """The connection of the turn's server that ``tool`` is named after, if any."""
        server = tool.split(SEPARATOR, 1)[0] if SEPARATOR in tool else None
        if server is None or server not in self._servers:
            return None
        return self._manager.connection(server, self._vp_id)

    async def resolve(self, name: str) -> Tool | None:
        """The tool ``name`` once its server, still starting, is up; None if it is not one.

        The model named it (from an earlier turn, or a guess): waiting for
        its server is waiting for a server the turn called, bounded by the
        connect timeout like any call's.
        """
        conn = self._server_of(name)
        if conn is None or conn.state is ServerState.CLOSED:
            return None
        try:
            await conn.ensure()
        except ServerUnavailable:
            return None
        return next((t for t in self._manager.tools_of(conn) if t.name == name), None)

    def missing(self, name: str) -> str | None:
        """Why ``name`` is not a tool now, when it belongs to a server that offers none."""
        conn = self._server_of(name)
        if conn is None or conn.ready or conn.generation:
            return None
        return f"{name} cannot be called: {_why_not(conn)}"


def _why_not(conn: ServerConnection) -> str:
    """Why a server offers no tools now, as the model and the listing read it."""
    if conn.state is ServerState.CONNECTING and conn.error is not None:
        # Trying again after a failure: the failure is what is known.
        return f"MCP server '{conn.name}' is unavailable: {conn.error}"
    if conn.state in (ServerState.IDLE, ServerState.CONNECTING):
        return (
            f"MCP server '{conn.name}' is still starting; its tools are offered "
            "as soon as it is ready"
        )
    if conn.state is ServerState.CLOSED:
        return f"MCP server '{conn.name}' is shut down"
    wait = conn.retry_in()
    later = f"; next attempt in {wait:.0f}s" if wait >= 1 else ""
    return f"MCP server '{conn.name}' is unavailable: {conn.error}{later}"


Key = tuple[str, str | None]


class McpManager:
    """The connections of one process to every configured MCP server.

    One connection per server serves every VP of the process; a server of
    ``scope: vp`` has one per VP instead (keyed by the VP's id). Connections
    are made on first use and opened in the background: :meth:`start` asks
    for them ahead (a VP host does at start, a VP when it is made), and a
    turn's :class:`McpToolset` offers whichever are ready.
    """

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self._connections: dict[Key, ServerConnection] = {}
        self._opening: dict[Key, asyncio.Task[None]] = {}
        # The engine tools of each connection, for the generation they were listed in.
        self._tools: dict[Key, tuple[int, list[Tool]]] = {}

    def _key(self, name: str, vp_id: str | None) -> Key:
        spec = self.config.servers[name]
        return (name, vp_id if spec.scope == "vp" and vp_id is not None else None)

    async def reconfigure(self, config: McpConfig) -> None:
        """Use ``config`` from now on: servers removed or changed are closed, new ones added.

        A server whose entry is the same keeps its open connections, so a
        turn using one is not disturbed; the others are opened on next use.
        """
        old = self._connections
        self.config = config
        self._connections = {
            key: conn
            for key, conn in old.items()
            if key[0] in config.servers
            and not config.servers[key[0]].disabled
            and _same(conn.spec, config.servers[key[0]])
        }
        gone = [conn for key, conn in old.items() if self._connections.get(key) is not conn]
        for key in [k for k in self._tools if k not in self._connections]:
            del self._tools[key]
        await asyncio.gather(*(c.aclose() for c in gone), return_exceptions=True)

    def __repr__(self) -> str:
        return f"McpManager({self.servers})"

    @property
    def servers(self) -> list[str]:
        """The servers that can be connected."""
        return self.config.usable()

    def connection(self, name: str, vp_id: str | None = None) -> ServerConnection | None:
        """The connection ``vp_id`` uses for ``name`` (made, not opened, on first ask)."""
        spec = self.config.servers.get(name)
        if spec is None or spec.disabled:
            return None
        key = self._key(name, vp_id)
        conn = self._connections.get(key)
        if conn is None:
            conn = self._connections[key] = self._connect(name, spec, key[1])
        return conn

    def _connect(self, name: str, spec: ServerSpec, owner: str | None) -> ServerConnection:
        from engine.mcp.connection import ServerConnection

        return ServerConnection(
            name,
            spec,
            connect_timeout_s=self.config.connect_timeout_s,
            backoff_s=self.config.backoff_s,
            owner=owner,
        )

    # -- opening in the background ------------------------------------------------
    def start(self, servers: Iterable[str], vp_id: str | None = None) -> None:
        """Open ``servers`` in the background, where not open or opening already."""
        for name in servers:
            conn = self.connection(name, vp_id)
            if conn is not None:
                self.usable_now(conn)

    def usable_now(self, conn: ServerConnection) -> bool:
        """Whether ``conn`` is ready; if not, it is opened in the background when it may be."""
        if conn.ready:
            return True
        key = (conn.name, conn.owner)
        busy = self._opening.get(key)
        if conn.state is ServerState.CLOSED or (busy is not None and not busy.done()):
            return False
        if conn.state is ServerState.FAILED and conn.retry_in() > 0:
            return False
        task = asyncio.get_running_loop().create_task(_open_quietly(conn), name=f"mcp-open:{key}")
        self._opening[key] = task
        return False

    async def open(self, servers: Iterable[str], vp_id: str | None = None) -> None:
        """Open ``servers`` now and wait for each to be ready or to fail (none waits on another)."""
        conns = [c for c in (self.connection(n, vp_id) for n in servers) if c is not None]
        await asyncio.gather(*(c.ensure() for c in conns), return_exceptions=True)

    async def settled(self) -> None:
        """Wait until every server being opened in the background is ready or has failed."""
        opening = [t for t in self._opening.values() if not t.done()]
        await asyncio.gather(*opening, return_exceptions=True)

    def toolset(self, servers: Iterable[str], vp_id: str | None = None) -> McpToolset:
        """The tools ``vp_id`` may use of ``servers``, as a turn reads them step by step."""
        wanted = [n for n in servers if self.connection(n, vp_id) is not None]
        self.start(wanted, vp_id)
        return McpToolset(self, wanted, vp_id)

    def tools_of(self, conn: ServerConnection) -> list[Tool]:
        """The engine tools of an open connection (made once per listing of its tools)."""
        key = (conn.name, conn.owner)
        cached = self._tools.get(key)
        if cached is not None and cached[0] == conn.generation:
            return cached[1]
        timeout = self.config.call_timeout(conn.name)
        seen: set[str] = set()
        out = []
        for tool in conn.tools:
            name = tool_name(conn.name, tool.name)
            if name in seen:
                continue
            seen.add(name)
            out.append(
                Tool(
                    name,
                    f"[MCP {conn.name}] {tool.description or tool.title or tool.name}",
                    JsonArguments,
                    _caller(conn, tool.name, name, timeout),
                    modes=CONVERSATION_MODES,
                    # The handler keeps its own deadline; this one is a backstop.
                    timeout=timeout + 5.0,
                    input_schema=_schema(tool),
                    server=conn.name,
                )
            )
        self._tools[key] = (conn.generation, out)
        return out

    # -- what a listing shows ----------------------------------------------------
    async def statuses(self, connect: bool = False) -> list[ServerStatus]:
        """Every configured server with its state and tools; ``connect`` opens idle ones.

        Connections of ``scope: vp`` servers are listed once each, with their VP.
        """
        for name in self.servers:
            self.connection(name)
        if connect:
            idle = [c for c in self._connections.values() if c.state is ServerState.IDLE]
            await asyncio.gather(*(c.ensure() for c in idle), return_exceptions=True)
        out = [c.status() for c in self._connections.values()]
        for name, spec in self.config.servers.items():
            if spec.disabled:
                transport = "stdio" if spec.type == "stdio" else "http"
                out.append(ServerStatus(name, transport, ServerState.CLOSED, error="disabled"))
        for name, reason in self.config.invalid.items():
            out.append(ServerStatus(name, "unknown", ServerState.FAILED, error=reason))
        return sorted(out, key=lambda s: (s.name, s.owner or ""))

    def reports(self) -> list[ConnectionReport]:
        """The connections this process has tried (the VP side of a listing)."""
        return [
            ConnectionReport.of(c.status())
            for c in self._connections.values()
            if c.state is not ServerState.IDLE
        ]

    # -- closing -----------------------------------------------------------------
    async def release(self, vp_id: str) -> None:
        """Close the connections that are ``vp_id``'s own (its ``scope: vp`` servers)."""
        mine = [key for key in self._connections if key[1] == vp_id]
        conns = [self._connections.pop(key) for key in mine]
        for key in mine:
            self._tools.pop(key, None)
        await asyncio.gather(*(c.aclose() for c in conns), return_exceptions=True)

    async def aclose(self) -> None:
        """Close every connection (stdio servers are stopped)."""
        opening = [t for t in self._opening.values() if not t.done()]
        await asyncio.gather(
            *(c.aclose() for c in self._connections.values()), return_exceptions=True
        )
        for task in opening:
            task.cancel()
        await asyncio.gather(*opening, return_exceptions=True)


async def _open_quietly(conn: ServerConnection) -> None:
    """Open ``conn``; a failure is kept as its state, which listings and turns read."""
    with contextlib.suppress(Exception):
        await conn.ensure(wait_backoff_s=0)


def _same(a: ServerSpec, b: ServerSpec) -> bool:
    # SecretStr compares by value; the entries are frozen models.
    return type(a) is type(b) and a.model_dump() == b.model_dump() and _secrets(a) == _secrets(b)


def _secrets(spec: ServerSpec) -> dict[str, str]:
    values = spec.env if isinstance(spec, StdioServer) else spec.headers
    return {k: v.get_secret_value() for k, v in values.items()}


def _caller(conn: ServerConnection, real: str, exposed: str, timeout: float) -> Any:
    from mcp import MCPError

    from engine.mcp.results import map_result

    async def call(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        try:
            async with asyncio.timeout(timeout):
                result = await conn.call(real, arguments, timeout)
        except TimeoutError:
            return ToolOutcome(
                f"{exposed} timed out after {timeout:g}s: MCP server '{conn.name}' did not "
                "answer in time, and the call was cancelled",
                is_error=True,
            )
        except ServerUnavailable as exc:
            return ToolOutcome(str(exc), is_error=True)
        except ServerDied:
            return ToolOutcome(
                f"MCP server '{conn.name}' stopped during the call to {exposed}; "
                "it is restarted on the next call",
                is_error=True,
            )
        except MCPError as exc:
            return ToolOutcome(f"{exposed} failed: {exc.message}", is_error=True)
        return map_result(result)

    return call
