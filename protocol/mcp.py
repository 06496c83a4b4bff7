"""The ``mcp_servers_list`` frames: a client asks, the server lists its MCP servers.

Both directions share the seed's wire name: the client's frame (strict, like
every client frame) asks for the list, optionally opening servers nobody has
used yet so their tools are known; the server's frame answers with each
configured server, its transport, state, tools and, when it failed, why.
Nothing in it carries a server's ``env`` or ``headers``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from protocol.common import ClientModel, Id, ServerModel

McpState = Literal["idle", "connecting", "ready", "failed", "closed"]


class McpServersList(ClientModel):
    """Ask for the MCP servers; ``connect`` opens the ones not opened yet."""

    type: Literal["mcp_servers_list"] = "mcp_servers_list"
    connect: bool = False
    request_id: Id | None = None


class McpToolInfo(ServerModel):
    """One tool of a server: its name as the model sees it, and its own."""

    name: str
    tool: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)


class McpHostInfo(ServerModel):
    """One VP host process's connection to a server: what the VPs there see."""

    host: str
    # The VP whose own connection this is (a server of ``scope: vp``); None: shared.
    vp: str | None = None
    state: McpState
    error: str | None = None
    retry_in: float | None = None
    tools: int = 0


class McpServerInfo(ServerModel):
    """One configured server: its state where the VPs use it, and its tools.

    ``state`` and ``error`` are the VP hosts' (the worst of them: failed,
    then connecting, then ready) once any host has tried the server, and
    this gateway's own connection's before; ``hosts`` has each host's.
    """

    name: str
    transport: Literal["stdio", "http", "unknown"]
    state: McpState
    target: str = ""
    tools: list[McpToolInfo] = Field(default_factory=list)
    error: str | None = None
    retry_in: float | None = None
    # The names of its env variables (stdio) or headers (HTTP); values are secrets.
    secret_keys: list[str] = Field(default_factory=list)
    hosts: list[McpHostInfo] = Field(default_factory=list)


class McpServersListFrame(ServerModel):
    """The answer to ``mcp_servers_list``."""

    type: Literal["mcp_servers_list"] = "mcp_servers_list"
    servers: list[McpServerInfo] = Field(default_factory=list)
    request_id: str | None = None
