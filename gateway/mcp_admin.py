"""Adding and removing MCP servers at run time: the servers file, edited safely.

The servers file (``$YEAFT_DATA_DIR/mcp.json`` or ``YEAFT_MCP_CONFIG``) stays
the one place the servers are written down, in the ``mcpServers`` shape, so
a person can still edit it by hand. A change through the API reads the file,
changes one entry, checks the result with the same parser the server uses at
start, and replaces the file atomically (a temporary file in the same
directory, flushed, then renamed over it, readable by its owner only: values
of ``env`` and ``headers`` are secrets). Changes are serialised by a lock.

The new configuration is then applied without a restart: this process's
listing switches to it, and the runtime hands it to every coordinator shard
and running VP actor (``Runtime.set_mcp``).

Only administrators (``YEAFT_ADMINS``) may change the servers: a stdio
server is a command the server machine runs, so this is not a group owner's
choice. Groups choose among the servers with their ``mcpServers`` setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from engine.mcp import McpConfig, parse_mcp_config
from engine.mcp.config import MAX_SERVER_NAME, name_problem
from gateway.errors import GatewayError
from gateway.settings import GatewaySettings
from protocol.common import ErrorCode

MAX_ITEMS = 32


class McpServerBody(BaseModel):
    """One server to add: ``command`` (stdio) or ``url`` (streamable HTTP), not both.

    Strict like every request body (``gateway.http.Body``, not imported here:
    ``gateway.mcp`` names this module, and ``gateway.http`` leads back to it).
    """

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )

    name: str = Field(min_length=1, max_length=MAX_SERVER_NAME)
    command: str | None = Field(default=None, min_length=1, max_length=1000)
    args: list[str] = Field(default_factory=list, max_length=MAX_ITEMS)
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ITEMS)
    cwd: str | None = Field(default=None, max_length=1000)
    url: str | None = Field(default=None, max_length=2000, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_ITEMS)
    timeout: float | None = Field(default=None, gt=0, le=3600)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerBody:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (a stdio server) or 'url' (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' belong to a stdio server ('command')")
        if self.command is not None and self.headers:
            raise ValueError("'headers' belong to a streamable HTTP server ('url')")
        return self

    def entry(self) -> dict[str, Any]:
        """The server's entry in the ``mcpServers`` shape."""
        if self.url is not None:
            out: dict[str, Any] = {"type": "http", "url": self.url}
            if self.headers:
                out["headers"] = dict(self.headers)
        else:
            out = {"command": self.command}
            if self.args:
                out["args"] = list(self.args)
            if self.env:
                out["env"] = dict(self.env)
            if self.cwd:
                out["cwd"] = self.cwd
        if self.timeout is not None:
            out["timeout"] = self.timeout
        return out


class McpServersFile:
    """The servers file of this gateway, changed one entry at a time."""

    def __init__(self, path: Path, limits: dict[str, Any]) -> None:
        self.path = path
        self.limits = limits
        self._lock = asyncio.Lock()

    @classmethod
    def of(cls, settings: GatewaySettings) -> McpServersFile:
        limits = {
            "connect_timeout_s": settings.mcp_connect_timeout,
            "call_timeout_s": settings.mcp_call_timeout,
        }
        return cls(settings.mcp_path(), limits)

    async def add(self, body: McpServerBody) -> McpConfig:
        """Add ``body``'s server; ``conflict`` when the name is taken, ``invalid_frame`` if bad."""
        problem = name_problem(body.name)
        if problem is not None:
            raise GatewayError(ErrorCode.INVALID_FRAME, problem, field="name")
        async with self._lock:
            data = await asyncio.to_thread(self._read)
            servers = data.setdefault("mcpServers", {})
            if body.name in servers:
                raise GatewayError(
                    ErrorCode.CONFLICT,
                    f"there is already an MCP server named {body.name!r}: remove it first",
                    field="name",
                )
            servers[body.name] = body.entry()
            config = self._parse(data)
            reason = config.invalid.get(body.name)
            if reason is not None:
                raise GatewayError(ErrorCode.INVALID_FRAME, f"{body.name}: {reason}")
            await asyncio.to_thread(self._write, data)
            return config

    async def remove(self, name: str) -> McpConfig:
        """Remove server ``name``; ``not_found`` when there is none."""
        async with self._lock:
            data = await asyncio.to_thread(self._read)
            servers = data.get("mcpServers", {})
            if name not in servers:
                raise GatewayError(ErrorCode.NOT_FOUND, f"there is no MCP server named {name!r}")
            del servers[name]
            config = self._parse(data)
            await asyncio.to_thread(self._write, data)
            return config

    def _parse(self, data: dict[str, Any]) -> McpConfig:
        return parse_mcp_config(data, str(self.path), **self.limits)

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"mcpServers": {}}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise GatewayError(
                ErrorCode.CONFLICT,
                f"the MCP servers file cannot be read ({exc}); fix it by hand first",
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            raise GatewayError(
                ErrorCode.CONFLICT, "the MCP servers file has no 'mcpServers' object; fix it first"
            )
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".mcp-", suffix=".json", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=2, ensure_ascii=False)
                out.write("\n")
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
