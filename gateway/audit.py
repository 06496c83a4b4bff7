"""Recording what people do in the audit log (``store.audit``), from every door.

:func:`record` appends one entry and never fails the action it records: a
store that cannot take the entry (closed, unreachable, slower than
``RECORD_TIMEOUT_S``) costs a warning in the log, and the sign-in, the
change or the deletion goes on as if the log had taken it.

Where a request came from is the client address uvicorn resolved (trusted
proxies' forwarding headers included). :class:`AuditOrigin`, an ASGI
middleware, puts it in the :data:`ORIGIN` context variable for every HTTP
request and WebSocket connection, so code shared by both doors
(``gateway.groups``) records it without each route and frame handler
passing it down; tasks a connection starts inherit it.

What goes into ``detail`` is chosen here and by the recorders, and never
holds a secret: :func:`mcp_detail` keeps the names of a server's ``env``
variables and headers, never their values, nor its command line or URL
(either may carry a token); only the URL's host is kept.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import time
from contextvars import ContextVar
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from coordinator.membership import GroupEdit
from gateway.mcp_admin import McpServerBody
from store.audit import AuditAction, AuditEntry, AuditLog

log = logging.getLogger(__name__)

RECORD_TIMEOUT_S = 5.0

ORIGIN: ContextVar[str | None] = ContextVar("yeaft_audit_origin", default=None)
"""The client address of the request or connection being served (None elsewhere)."""


class AuditOrigin:
    """ASGI middleware: :data:`ORIGIN` is the client's address while its request is served."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = ORIGIN.set(str(client[0]) if client else None)
        try:
            await self.app(scope, receive, send)
        finally:
            ORIGIN.reset(token)


class StoreSource(Protocol):
    """Anything that opens the store on demand (the runtime, a service)."""

    async def store(self) -> Any: ...


async def record(
    where: AuditLog | StoreSource,
    action: AuditAction,
    *,
    actor: str | None,
    target: str | None = None,
    detail: dict[str, Any] | None = None,
    address: str | None = None,
    cli: bool = False,
) -> None:
    """Append one entry; any failure is a warning, never the caller's error.

    ``address`` defaults to the :data:`ORIGIN` of the request being served;
    ``cli`` marks an action taken on the command line (no address; the
    operating system's user name in ``detail.osUser``).
    """
    try:
        async with asyncio.timeout(RECORD_TIMEOUT_S):
            log_ = await _log_of(where)
            entry = AuditEntry(
                at=time.time(),
                actor=actor,
                action=action,
                target=target,
                address=None if cli else (address if address is not None else ORIGIN.get()),
                detail={**(detail or {}), **(_cli_detail() if cli else {})},
            )
            await log_.append_audit(entry)
    except Exception as exc:
        log.warning("the audit log did not record %s by %s on %s: %s", action, actor, target, exc)


def _cli_detail() -> dict[str, Any]:
    """Who ran a command: the operating system's account, as far as it is known."""
    try:
        return {"via": "cli", "osUser": getpass.getuser()}
    except (KeyError, OSError):
        return {"via": "cli"}


async def _log_of(where: AuditLog | StoreSource) -> AuditLog:
    if hasattr(where, "append_audit"):
        return cast(AuditLog, where)
    return cast(AuditLog, await cast(StoreSource, where).store())


def mcp_detail(body: McpServerBody) -> dict[str, Any]:
    """What the log keeps of an added MCP server: no value of ``env`` or ``headers``."""
    if body.url is not None:
        detail: dict[str, Any] = {"transport": "http", "host": urlsplit(body.url).hostname}
        if body.headers:
            detail["headerNames"] = sorted(body.headers)
        return detail
    detail = {"transport": "stdio"}
    if body.env:
        detail["envNames"] = sorted(body.env)
    return detail


def edit_detail(edit: GroupEdit) -> dict[str, Any]:
    """What a settings change set: the new name, default VP and settings (none is a secret)."""
    detail: dict[str, Any] = {}
    if edit.name is not None:
        detail["name"] = edit.name
    if edit.default_vp is not None or edit.clear_default_vp:
        detail["defaultVpId"] = edit.default_vp
    if edit.settings is not None:
        detail["settings"] = edit.settings.model_dump(mode="json", by_alias=True, exclude_none=True)
    return detail
