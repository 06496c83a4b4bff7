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
    # The VP whose own connection this is (a server of ``scope: vp``); None: shared.
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionReport:
    """One connection of a VP host process, as the servers listing shows it.

    Plain values only (no SDK types): it crosses from the VP host to the
    gateway through Ray.
    """

    server: str
    state: ServerState
    error: str | None = None
    retry_in: float | None = None
    tools: int = 0
    # The VP whose own connection this is; None: shared by the process's VPs.
    owner: str | None = None

    @classmethod
    def of(cls, status: ServerStatus) -> ConnectionReport:
        return cls(
            status.name,
            status.state,
            status.error,
            status.retry_in,
            len(status.tools),
            status.owner,
        )
