"""Upload and download of attachments over HTTP.

``POST /api/groups/{id}/attachments?name=FILE`` takes the file as the raw
request body, its type from ``Content-Type``; it answers 201 with the
file's ``id`` (to name in a message's ``attachments``), ``name``, ``mime``,
``size`` and download ``url``. A body over the per-file limit is refused
with 413 ``attachment_too_large`` as soon as it passes the limit.

``GET /api/groups/{id}/attachments/{attachmentId}`` returns the bytes.
Both need a session and membership of the group (or ownership of the
conversation); anything else is 404, as everywhere.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response

from gateway.attachments import too_large
from gateway.http import Ctx, User
from protocol.attachments import attachment_url
from protocol.common import MAX_NAME_LENGTH

router = APIRouter()

# Types a browser may show in the page; everything else is a download.
_INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@router.post("/api/groups/{group_id}/attachments", status_code=201)
async def upload(
    group_id: str,
    request: Request,
    user: User,
    ctx: Ctx,
    name: Annotated[str, Query(min_length=1, max_length=MAX_NAME_LENGTH)],
) -> dict[str, Any]:
    await ctx.conversations.chat_target(user, group_id)
    limit = ctx.attachments.limits.max_file_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(f"a file may have at most {limit} bytes", "body", limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(f"a file may have at most {limit} bytes", "body", limit)
        chunks.append(chunk)
    mime = request.headers.get("content-type", "").split(";")[0].strip().lower()
    record = await ctx.attachments.upload(user, group_id, name, mime, b"".join(chunks))
    return {**record.ref(), "url": attachment_url(group_id, record.id)}


@router.get("/api/groups/{group_id}/attachments/{attachment_id}")
async def download(group_id: str, attachment_id: str, user: User, ctx: Ctx) -> Response:
    await ctx.conversations.chat_target(user, group_id)
    record, data = await ctx.attachments.open(group_id, attachment_id)
    disposition = "inline" if record.mime in _INLINE_TYPES else "attachment"
    headers = {
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{quote(record.name)}",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, max-age=86400",
    }
    return Response(data, media_type=record.mime, headers=headers)
