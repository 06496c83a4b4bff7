"""The workspace files of a group or a conversation over HTTP: list and download.

``GET /api/groups/{id}/files`` and ``GET /api/conversations/{id}/files`` list
the files of the workspace the VPs of that group or conversation work in
(``store.workspaces.files_of``); ``.../files/{path}`` downloads one. Only a
member of the group (the owner of a conversation) gets anything; anyone else
gets 404, as for the group itself. Paths go through the same containment
check as the VPs' own tools (``engine.tools.files.FileArea``), and a file is
always sent as an attachment of type ``application/octet-stream``, so an HTML
file a VP wrote is downloaded, never rendered on this origin.

The folder is under the data directory of the runtime config, the one the VP
actors use. With the Redis store that is still a local folder: the gateway
and the VP actors must share it (one machine, or a shared volume).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from fastapi.responses import FileResponse

from engine.tools.files import FileArea, FileLimits, FileToolError
from gateway.errors import GatewayError
from gateway.http import Ctx, User
from protocol import ErrorCode
from store.base import Group
from store.workspaces import files_of

router = APIRouter()

MAX_LISTED = 1000


def _area(ctx: Ctx, group: Group) -> FileArea:
    folder = files_of(ctx.runtime.config.store.data_dir, group)
    return FileArea(folder, FileLimits(max_entries=MAX_LISTED))


def _listing(area: FileArea) -> dict[str, Any]:
    entries, cut = area.listing(".", recursive=True)
    files = [
        {"path": e.path, "size": e.size, "modified": e.modified} for e in entries if not e.is_dir
    ]
    return {"files": files, "truncated": cut}


def _download(area: FileArea, path: str) -> FileResponse:
    try:
        target = area.locate(path)
    except FileToolError as exc:
        raise GatewayError(ErrorCode.NOT_FOUND, str(exc), field="path") from exc
    if not target.is_file():
        raise GatewayError(ErrorCode.NOT_FOUND, f"no file {path!r} in this workspace", field="path")
    name = Path(path).name
    return FileResponse(
        target,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )


@router.get("/api/groups/{group_id}/files")
async def group_files(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The files of the group's workspace (every folder), by path."""
    group = await ctx.groups.member_group(user, group_id)
    return await asyncio.to_thread(_listing, _area(ctx, group))


@router.get("/api/groups/{group_id}/files/{path:path}")
async def group_file(group_id: str, path: str, user: User, ctx: Ctx) -> FileResponse:
    group = await ctx.groups.member_group(user, group_id)
    return await asyncio.to_thread(_download, _area(ctx, group), path)


@router.get("/api/conversations/{conversation_id}/files")
async def conversation_files(conversation_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The files of the conversation's workspace (its owner's folder in it)."""
    group = await ctx.conversations.owned(user, conversation_id)
    return await asyncio.to_thread(_listing, _area(ctx, group))


@router.get("/api/conversations/{conversation_id}/files/{path:path}")
async def conversation_file(conversation_id: str, path: str, user: User, ctx: Ctx) -> FileResponse:
    group = await ctx.conversations.owned(user, conversation_id)
    return await asyncio.to_thread(_download, _area(ctx, group), path)
