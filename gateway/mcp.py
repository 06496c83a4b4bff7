"""The MCP servers as the gateway lists them: ``GET /api/mcp/servers`` and ``mcp_servers_list``.

The VP hosts hold the connections their turns use, and each reports their
states (``VPHost.mcp_reports``): the listing shows a server as the VPs see
it, per host and in sum. The gateway also keeps its own
:class:`~engine.mcp.McpManager` over the same configuration, to list each
server's tools for people (and its state before any VP host has tried it).
Listing ``connect=True`` opens the servers nobody opened yet here, each
bounded by the configured connect timeout, which is why the WebSocket answer
is sent from a task of its own instead of holding up the connection's
receive loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from engine.mcp import (
    ConnectionReport,
    McpConfig,
    McpManager,
    ServerState,
    ServerStatus,
    StdioServer,
    tool_name,
)
from protocol import (
    ErrorCode,
    ErrorFrame,
    McpHostInfo,
    McpServerInfo,
    McpServersListFrame,
    McpToolInfo,
)

if TYPE_CHECKING:
    from gateway.mcp_admin import McpServersFile

log = logging.getLogger(__name__)

# What the VP hosts report: each host's name and its connections (Runtime.mcp_reports).
HostReports = Callable[[], Awaitable[list[tuple[str, list[ConnectionReport]]]]]
# The worst state first: what a listing shows for a server its hosts disagree on.
_WORST = (ServerState.FAILED, ServerState.CONNECTING, ServerState.READY, ServerState.CLOSED)


def server_info(status: ServerStatus, target: str) -> McpServerInfo:
    """The wire form of one server's status (no env, no headers)."""
    tools = [
        McpToolInfo(
            name=tool_name(status.name, t.name),
            tool=t.name,
            description=t.description or "",
            input_schema=dict(t.input_schema or {}),
        )
        for t in status.tools
    ]
    transport = status.transport if status.transport in ("stdio", "http") else "unknown"
    return McpServerInfo(
        name=status.name,
        transport=transport,  # type: ignore[arg-type]
        state=status.state.value,
        target=target,
        tools=tools,
        error=status.error,
        retry_in=round(status.retry_in, 1) if status.retry_in is not None else None,
    )


class McpCatalog:
    """This gateway process's view of the configured MCP servers.

    ``file`` is where they are written down, when this process may change
    them (``gateway.mcp_admin``); None: they cannot be changed from here.
    """

    def __init__(
        self,
        config: McpConfig,
        file: McpServersFile | None = None,
        hosts: HostReports | None = None,
    ) -> None:
        self.config = config
        self.file = file
        self.hosts = hosts
        self.manager = McpManager(config)
        self._answers: set[asyncio.Task[None]] = set()

    async def replace(self, config: McpConfig) -> None:
        """List ``config``'s servers from now on (those unchanged keep their connection)."""
        self.config = config
        await self.manager.reconfigure(config)

    async def listing(
        self, connect: bool = False, request_id: str | None = None
    ) -> McpServersListFrame:
        statuses, reported = await asyncio.gather(
            self.manager.statuses(connect=connect), self._host_reports()
        )
        servers = []
        for status in statuses:
            if status.owner is not None:
                continue  # the gateway has no VPs; a VP's own connection is a host's
            spec = self.config.servers.get(status.name)
            info = server_info(status, spec.describe() if spec is not None else "")
            if spec is not None:
                # The names of its secrets, never their values.
                values = spec.env if isinstance(spec, StdioServer) else spec.headers
                info.secret_keys = sorted(values)
                _with_hosts(info, reported.get(status.name, []))
            servers.append(info)
        return McpServersListFrame(servers=servers, request_id=request_id)

    async def _host_reports(self) -> dict[str, list[McpHostInfo]]:
        """Each server's connections on the VP hosts, by server name."""
        if self.hosts is None:
            return {}
        try:
            answers = await self.hosts()
        except Exception:
            log.warning("the VP hosts' MCP connections could not be read", exc_info=True)
            return {}
        out: dict[str, list[McpHostInfo]] = {}
        for host, reports in answers:
            for r in reports:
                retry = round(r.retry_in, 1) if r.retry_in is not None else None
                info = McpHostInfo(
                    host=host,
                    vp=r.owner,
                    state=r.state.value,
                    error=r.error,
                    retry_in=retry,
                    tools=r.tools,
                )
                out.setdefault(r.server, []).append(info)
        return out

    def answer(
        self,
        send: Callable[[McpServersListFrame | ErrorFrame], object],
        connect: bool,
        request_id: str | None,
    ) -> None:
        """Send the listing through ``send`` once it is ready, from a task of its own.

        A listing that fails is answered with an ``internal`` error frame.
        """

        async def run() -> None:
            try:
                send(await self.listing(connect, request_id))
            except Exception:
                log.exception("MCP listing failed")
                message = "the MCP servers could not be listed"
                send(ErrorFrame(code=ErrorCode.INTERNAL, message=message, request_id=request_id))

        task = asyncio.create_task(run(), name="mcp-listing")
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def aclose(self) -> None:
        for task in list(self._answers):
            task.cancel()
        await asyncio.gather(*self._answers, return_exceptions=True)
        await self.manager.aclose()


def _with_hosts(info: McpServerInfo, hosts: list[McpHostInfo]) -> None:
    """Show ``info`` as the VP hosts see it: their worst state, with its error."""
    info.hosts = sorted(hosts, key=lambda h: (h.host, h.vp or ""))
    if not hosts:
        return
    worst = min(hosts, key=lambda h: _WORST.index(ServerState(h.state)))
    info.state = worst.state
    info.error = worst.error
    info.retry_in = worst.retry_in
