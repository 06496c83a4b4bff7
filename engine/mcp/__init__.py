"""MCP client: servers from the ``mcpServers`` configuration as engine tools.

``config`` reads the configuration, ``connection`` keeps one server's
connection (the only module, with ``results``, that imports the SDK: a
process without servers never loads it), ``status`` names its states,
``manager`` holds every server of a process and builds a turn's tools,
``results`` turns a tool result into what the model reads.
"""

from engine.mcp.config import (
    HttpServer,
    McpConfig,
    McpConfigError,
    StdioServer,
    load_mcp_config,
    parse_mcp_config,
)
from engine.mcp.manager import ALL, McpManager, McpToolset, select_servers, tool_name
from engine.mcp.status import ConnectionReport, ServerState, ServerStatus

__all__ = [
    "ALL",
    "ConnectionReport",
    "HttpServer",
    "McpConfig",
    "McpConfigError",
    "McpManager",
    "McpToolset",
    "ServerState",
    "ServerStatus",
    "StdioServer",
    "load_mcp_config",
    "parse_mcp_config",
    "select_servers",
    "tool_name",
]
