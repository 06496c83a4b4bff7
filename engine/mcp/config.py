"""MCP server configuration: the ``mcpServers`` file desktop MCP clients use.

The file is JSON with one object, ``mcpServers``, naming each server::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "..."}},
        "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

An entry with ``command`` is a stdio server (``args``, ``env``, ``cwd``); an
entry with ``url`` is a streamable HTTP server (``headers``). Optional keys:
``type`` (``stdio``, ``http`` or ``streamable-http``), ``disabled``,
``timeout`` (seconds one tool call may take) and ``scope`` (``shared``: one
connection per process for all its VPs, the default; ``vp``: one per VP). Values of ``env`` and
``headers`` are secrets: they are kept as :class:`~pydantic.SecretStr`, so
no ``repr``, log line or frame shows them.

A broken entry does not stop the others: it is kept as an invalid server
with the reason, listed with that reason, and never connected. A file that
is not JSON, or has no ``mcpServers`` object, is an error naming the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

# A server name becomes the prefix of its tools' names (``server__tool``),
# which providers limit to letters, digits, ``_`` and ``-``.
SERVER_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
MAX_SERVER_NAME = 32
SEPARATOR = "__"


class McpConfigError(ValueError):
    """The configuration file cannot be used at all (not JSON, wrong shape)."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    disabled: bool = False
    # Seconds one tool call may take; None: the configuration's default.
    timeout: float | None = Field(default=None, gt=0, le=3600)
    # Who shares one connection: every VP of a process (``shared``), or each
    # VP its own (``vp``: a server that keeps state per caller, such as a
    # browser session, a scratch directory or a login).
    scope: Literal["shared", "vp"] = "shared"


class StdioServer(_Entry):
    """A server the VP actor starts as a child process and talks to over stdin/stdout."""

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, SecretStr] = Field(default_factory=dict)
    cwd: str | None = None

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


class HttpServer(_Entry):
    """A server reached over streamable HTTP at ``url``."""

    type: Literal["http", "streamable-http", "streamableHttp"] = "http"
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)

    def describe(self) -> str:
        return self.url


ServerSpec = StdioServer | HttpServer


class McpConfig(BaseModel):
    """Every configured MCP server, plus the limits connections and calls run under.

    Frozen and picklable: it travels to each VP actor inside the
    ``RuntimeConfig``, so an actor never reads the file (or its node's
    environment) itself.
    """

    model_config = ConfigDict(frozen=True)

    servers: dict[str, ServerSpec] = Field(default_factory=dict)
    # Entries that could not be read, with the reason (listed, never connected).
    invalid: dict[str, str] = Field(default_factory=dict)
    source: str | None = None
    # Seconds to start a server and list its tools.
    connect_timeout_s: float = Field(default=15.0, gt=0)
    # Seconds one tool call may take unless its server sets ``timeout``.
    call_timeout_s: float = Field(default=60.0, gt=0)
    # Back-off between attempts to start a server that failed: doubling
    # from the first to the second value.
    backoff_s: tuple[float, float] = (0.5, 30.0)

    def names(self) -> list[str]:
        """Every configured name, usable or not, sorted."""
        return sorted({*self.servers, *self.invalid})

    def usable(self) -> list[str]:
        """The names of servers that may be connected (valid and not disabled)."""
        return sorted(n for n, s in self.servers.items() if not s.disabled)

    def call_timeout(self, name: str) -> float:
        spec = self.servers.get(name)
        return spec.timeout if spec is not None and spec.timeout else self.call_timeout_s


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a server, or None."""
    if len(name) > MAX_SERVER_NAME:
        return f"a server name has at most {MAX_SERVER_NAME} characters"
    if not SERVER_NAME.fullmatch(name):
        return (
            "a server name may only hold letters, digits, '-' and single '_' "
            "(it prefixes tool names as name__tool)"
        )
    return None


def _entry(raw: Any) -> ServerSpec:
    if not isinstance(raw, dict):
        raise ValueError("an entry must be an object")
    kind = raw.get("type")
    if kind == "sse":
        raise ValueError("the SSE transport is not supported; use streamable HTTP (url)")
    if kind == "stdio" or (kind is None and "command" in raw):
        return StdioServer.model_validate(raw)
    if kind in ("http", "streamable-http", "streamableHttp") or (kind is None and "url" in raw):
        return HttpServer.model_validate(raw)
    raise ValueError("an entry needs 'command' (stdio) or 'url' (streamable HTTP)")


def validation_reason(exc: Exception) -> str:
    """A bad entry's reason in one line: the first validation error and where it is."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(exc)


def parse_mcp_config(data: Any, source: str | None = None, **limits: Any) -> McpConfig:
    """Read the ``mcpServers`` shape; bad entries become invalid servers with a reason."""
    where = source or "MCP configuration"
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise McpConfigError(f"{where}: expected an object with an 'mcpServers' object")
    servers: dict[str, ServerSpec] = {}
    invalid: dict[str, str] = {}
    for name, raw in data.get("mcpServers", {}).items():
        problem = name_problem(name)
        if problem is not None:
            invalid[name[:64]] = problem
            continue
        try:
            servers[name] = _entry(raw)
        except (ValueError, ValidationError) as exc:
            invalid[name] = validation_reason(exc)
    return McpConfig(servers=servers, invalid=invalid, source=source, **limits)


def load_mcp_config(path: Path, **limits: Any) -> McpConfig:
    """The configuration in ``path``; an empty one when the file does not exist."""
    if not path.exists():
        return McpConfig(**limits)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise McpConfigError(f"{path}: cannot read the MCP configuration: {exc}") from exc
    return parse_mcp_config(data, str(path), **limits)
