"""The MCP servers over HTTP: list them (everyone), add and remove them (administrators).

``GET /api/mcp/servers`` lists every configured server, its tools and state
(see ``gateway.mcp``). ``POST /api/mcp/servers`` adds one and ``DELETE
/api/mcp/servers/{name}`` removes one (see ``gateway.mcp_admin``); the change
is in the servers file and in use by every VP actor before the answer. No
answer carries a value of a server's ``env`` or ``headers``, only their names,
and neither does the audit log's entry of the change (``gateway.audit``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from engine.mcp import McpConfig
from gateway.audit import mcp_detail, record
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.http import Ctx, User
from gateway.mcp_admin import McpServerBody, McpServersFile
from gateway.roles import is_admin, require_admin
from protocol.common import ErrorCode
from store.audit import AuditAction

router = APIRouter()


@router.get("/api/mcp/servers")
async def list_mcp_servers(user: User, ctx: Ctx, connect: bool = False) -> dict[str, Any]:
    """Every configured MCP server, its tools and state; ``?connect=true`` opens idle ones."""
    frame = await ctx.mcp.listing(connect=connect)
    return {
        "servers": [s.model_dump(by_alias=True) for s in frame.servers],
        "canEdit": await _may_edit(user, ctx),
    }


@router.post("/api/mcp/servers", status_code=201)
async def add_mcp_server(body: McpServerBody, user: User, ctx: Ctx) -> dict[str, Any]:
    """Add a server (administrators only); its tools are listed on first use."""
    config = await (await _file(user, ctx)).add(body)
    await _apply(ctx, config)
    detail = mcp_detail(body)
    await record(
        ctx.runtime, AuditAction.MCP_SERVER_ADDED, actor=user, target=body.name, detail=detail
    )
    frame = await ctx.mcp.listing()
    (info,) = [s for s in frame.servers if s.name == body.name]
    return info.model_dump(by_alias=True)


@router.delete("/api/mcp/servers/{name}", status_code=204)
async def remove_mcp_server(name: str, user: User, ctx: Ctx) -> None:
    """Remove a server (administrators only); its connections are closed."""
    config = await (await _file(user, ctx)).remove(name)
    await _apply(ctx, config)
    await record(ctx.runtime, AuditAction.MCP_SERVER_REMOVED, actor=user, target=name)


async def _may_edit(user: str, ctx: GatewayContext) -> bool:
    store = await ctx.runtime.store()
    return ctx.mcp.file is not None and await is_admin(store, ctx.settings, user)


async def _file(user: str, ctx: GatewayContext) -> McpServersFile:
    if ctx.mcp.file is None:
        raise GatewayError(ErrorCode.FORBIDDEN, "the MCP servers cannot be changed here")
    store = await ctx.runtime.store()
    await require_admin(store, ctx.settings, user, "add or remove MCP servers")
    return ctx.mcp.file


async def _apply(ctx: GatewayContext, config: McpConfig) -> None:
    await ctx.mcp.replace(config)
    await ctx.runtime.set_mcp(config)
