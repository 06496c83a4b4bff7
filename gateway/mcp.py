"""The MCP servers as the gateway lists them: ``GET /api/mcp/servers`` and ``mcp_servers_list``.

The VP actors hold the connections their turns use; the gateway keeps its
own :class:`~engine.mcp.McpManager` over the same configuration, only to
list each server's tools and state for people (so the listing shows what
this process can reach, not a particular actor's connection). Listing
``connect=True`` opens the servers nobody opened yet, each bounded by the
configured connect timeout, which is why the WebSocket answer is sent from a
task of its own instead of holding up the connection's receive loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.mcp import McpConfig, McpManager, ServerStatus, StdioServer, tool_name
from protocol import ErrorCode, ErrorFrame, McpServerInfo, McpServersListFrame, McpToolInfo

if TYPE_CHECKING:
    from gateway.mcp_admin import McpServersFile

log = logging.getLogger(__name__)


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

    def __init__(self, config: McpConfig, file: McpServersFile | None = None) -> None:
        self.config = config
        self.file = file
        self.manager = McpManager(config)
        self._answers: set[asyncio.Task[None]] = set()

    async def replace(self, config: McpConfig) -> None:
        """List ``config``'s servers from now on (those unchanged keep their connection)."""
        self.config = config
        await self.manager.reconfigure(config)

    async def listing(
        self, connect: bool = False, request_id: str | None = None
    ) -> McpServersListFrame:
        statuses = await self.manager.statuses(connect=connect)
        servers = []
        for status in statuses:
            spec = self.config.servers.get(status.name)
            info = server_info(status, spec.describe() if spec is not None else "")
            if spec is not None:
                # The names of its secrets, never their values.
                values = spec.env if isinstance(spec, StdioServer) else spec.headers
                info.secret_keys = sorted(values)
            servers.append(info)
        return McpServersListFrame(servers=servers, request_id=request_id)

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
