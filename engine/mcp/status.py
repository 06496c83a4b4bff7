"""What is known of an MCP server without its SDK: its state and the errors of its use.

Kept apart from ``engine.mcp.connection`` so that a process with no server
configured (the default) never imports the MCP SDK, which costs a VP actor
most of a second of start-up and tens of megabytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp_types


class ServerState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


class ServerUnavailable(Exception):
    """The server cannot be used now; the message says why (shown to the model)."""


class ServerDied(Exception):
    """The connection ended while a call was waiting for its answer."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """What a listing shows of one server."""

    name: str
    transport: str
    state: ServerState
    tools: tuple[mcp_types.Tool, ...] = ()
    error: str | None = None
    # Seconds until the next attempt may start, while failed.
    retry_in: float | None = None
