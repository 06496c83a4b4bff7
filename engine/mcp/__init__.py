"""MCP client: servers from the ``mcpServers`` configuration as engine tools.

``config`` reads the configuration, ``connection`` keeps one server's
connection, ``manager`` holds every server of a process and builds a turn's
tools, ``results`` turns a tool result into what the model reads.
"""

from engine.mcp.config import (
    HttpServer,
    McpConfig,
    McpConfigError,
    StdioServer,
    load_mcp_config,
    parse_mcp_config,
)
from engine.mcp.connection import ServerState, ServerStatus
from engine.mcp.manager import ALL, McpManager, McpToolset, select_servers, tool_name

__all__ = [
    "ALL",
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
