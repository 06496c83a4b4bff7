"""Every MCP server of one process, and the engine tools they offer a turn.

One :class:`McpManager` lives in each VP actor (and one in the gateway, for
the listing). It holds a :class:`ServerConnection` per configured server,
opened the first time a turn needs that server and shared by every turn
after it. :meth:`McpManager.toolset` gives a turn the tools of the servers it
may use, as engine :class:`~engine.tools.registry.Tool` objects named
``server__tool`` with the server's own JSON Schema; a server that cannot be
reached is left out and named in :meth:`McpToolset.missing`, so a call to
one of its tools gets an error that says why.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.mcp.config import SEPARATOR, McpConfig, ServerSpec, StdioServer
from engine.mcp.status import ServerDied, ServerState, ServerStatus, ServerUnavailable
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


@dataclass(frozen=True, slots=True)
class McpToolset:
    """The MCP tools of one turn, and the servers that could not offer theirs."""

    tools: tuple[Tool, ...] = ()
    unavailable: dict[str, str] = field(default_factory=dict)

    def missing(self, name: str) -> str | None:
        """Why ``name`` is not a tool this turn, when it belongs to an unavailable server."""
        server = name.split(SEPARATOR, 1)[0] if SEPARATOR in name else None
        if server is not None and server in self.unavailable:
            return f"{name} cannot be called: {self.unavailable[server]}"
        return None


class McpManager:
    """The connections of one process to every configured MCP server."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self._connections = {
            name: self._connect(name, spec)
            for name, spec in config.servers.items()
            if not spec.disabled
        }

    def _connect(self, name: str, spec: ServerSpec) -> ServerConnection:
        from engine.mcp.connection import ServerConnection

        return ServerConnection(
            name,
            spec,
            connect_timeout_s=self.config.connect_timeout_s,
            backoff_s=self.config.backoff_s,
        )

    async def reconfigure(self, config: McpConfig) -> None:
        """Use ``config`` from now on: servers removed or changed are closed, new ones added.

        A server whose entry is the same keeps its open connection, so a turn
        using it is not disturbed; the others are opened on first use, as at
        start.
        """
        old = self._connections
        self.config = config
        keep = {
            name: conn
            for name, conn in old.items()
            if name in config.servers
            and not config.servers[name].disabled
            and _same(conn.spec, config.servers[name])
        }
        fresh = {
            name: self._connect(name, spec)
            for name, spec in config.servers.items()
            if not spec.disabled and name not in keep
        }
        self._connections = {**keep, **fresh}
        gone = [conn for name, conn in old.items() if keep.get(name) is not conn]
        await asyncio.gather(*(c.aclose() for c in gone), return_exceptions=True)

    def __repr__(self) -> str:
        return f"McpManager({sorted(self._connections)})"

    @property
    def servers(self) -> list[str]:
        """The servers that can be connected."""
        return sorted(self._connections)

    def connection(self, name: str) -> ServerConnection | None:
        return self._connections.get(name)

    async def toolset(self, servers: Iterable[str]) -> McpToolset:
        """The tools of ``servers``, each opened if needed, all at once."""
        wanted = [self._connections[n] for n in servers if n in self._connections]
        if not wanted:
            return McpToolset()
        results = await asyncio.gather(*(c.ensure() for c in wanted), return_exceptions=True)
        tools: list[Tool] = []
        unavailable: dict[str, str] = {}
        for conn, outcome in zip(wanted, results, strict=True):
            if isinstance(outcome, BaseException):
                unavailable[conn.name] = (
                    str(outcome)
                    if isinstance(outcome, ServerUnavailable)
                    else f"MCP server '{conn.name}' is unavailable: {outcome}"
                )
                continue
            tools.extend(self._tools_of(conn))
        return McpToolset(tuple(tools), unavailable)

    def _tools_of(self, conn: ServerConnection) -> list[Tool]:
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
                )
            )
        return out

    async def statuses(self, connect: bool = False) -> list[ServerStatus]:
        """Every configured server with its state and tools; ``connect`` opens idle ones."""
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
        return sorted(out, key=lambda s: s.name)

    async def aclose(self) -> None:
        """Close every connection (stdio servers are stopped)."""
        await asyncio.gather(
            *(c.aclose() for c in self._connections.values()), return_exceptions=True
        )


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
