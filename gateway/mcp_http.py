"""``GET /api/mcp/servers``: the MCP servers, their tools and state (see ``gateway.mcp``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.http import Ctx, User

router = APIRouter()


@router.get("/api/mcp/servers")
async def list_mcp_servers(user: User, ctx: Ctx, connect: bool = False) -> dict[str, Any]:
    """Every configured MCP server, its tools and state; ``?connect=true`` opens idle ones."""
    frame = await ctx.mcp.listing(connect=connect)
    return {"servers": [s.model_dump(by_alias=True) for s in frame.servers]}
