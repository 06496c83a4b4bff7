"""The audit log over HTTP, for administrators: read it a page at a time, or export it.

- ``GET /api/admin/audit``: entries newest first, ``{entries, next}``;
  ``next`` (None on the last page) is the ``before`` of the next page;
- ``GET /api/admin/audit.jsonl``: every matching entry, newest first, one
  JSON object a line (``application/x-ndjson``, as a file to save).

Both take the same filters, each optional and all of them applying at once:
``actor`` (a username), ``action`` (one ``store.audit.AuditAction``),
``target`` (a group id, a username or an MCP server's name), ``since`` and
``until`` (epoch seconds, inclusive), ``limit`` (a page's size, 1 to 1000,
100 by default; for the export, how many entries at most, all by default)
and ``before`` (an entry id: only older entries).

Administrators only, by the check every admin route makes (``gateway.roles``): anyone else
signed in gets 403 ``forbidden``, no session 401 ``unauthorized``; a
``before`` that is no entry id is a 422 ``invalid_request`` on ``before``.
What is recorded, and that no secret is, is ``gateway.audit``'s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from gateway.admin_http import View
from gateway.errors import GatewayError
from gateway.http import Ctx, User
from gateway.roles import require_admin
from protocol.common import ErrorCode
from store.audit import (
    MAX_AUDIT_PAGE,
    AuditAction,
    AuditEntry,
    AuditLog,
    AuditQuery,
    BadAuditCursor,
)

router = APIRouter()

EXPORT_FILENAME = "yeaft-audit.jsonl"
_WHAT = "read the audit log"


class AuditEntryView(View):
    # Opaque, in the order of the log; a page's ``before``.
    id: str
    # Epoch seconds, by the clock of the gateway that recorded it.
    at: float
    # Who acted; null for an anonymous one (a failed sign-in) or the command line.
    actor: str | None
    action: AuditAction
    # A group id, a username or an MCP server's name.
    target: str | None
    # The client's address; null for the command line.
    address: str | None
    detail: dict[str, Any]


class AuditList(View):
    entries: list[AuditEntryView]
    # The ``before`` of the next page; null on the last one.
    next: str | None


async def _reader(user: User, ctx: Ctx) -> str:
    """The signed-in user, when an administrator (403 ``forbidden`` otherwise)."""
    await require_admin(await ctx.runtime.store(), ctx.settings, user, _WHAT)
    return user


Reader = Annotated[str, Depends(_reader)]


def _view(entry: AuditEntry) -> AuditEntryView:
    return AuditEntryView.model_validate(entry.model_dump())


def _filters(
    actor: Annotated[str | None, Query(max_length=200)] = None,
    action: AuditAction | None = None,
    target: Annotated[str | None, Query(max_length=200)] = None,
    since: float | None = None,
    until: float | None = None,
    before: Annotated[str | None, Query(max_length=64)] = None,
) -> AuditQuery:
    return AuditQuery(
        actor=actor, action=action, target=target, since=since, until=until, before=before
    )


Filters = Annotated[AuditQuery, Depends(_filters)]


async def _read(store: AuditLog, query: AuditQuery) -> tuple[list[AuditEntry], str | None]:
    try:
        page = await store.read_audit(query)
    except BadAuditCursor as exc:
        raise GatewayError(ErrorCode.INVALID_FRAME, str(exc), field="before") from exc
    return page.entries, page.next


@router.get("/api/admin/audit")
async def read_audit(
    query: Filters,
    user: Reader,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_PAGE)] = 100,
) -> AuditList:
    """A page of the audit log, newest first (administrators only)."""
    query = replace(query, limit=limit)
    entries, after = await _read(await ctx.runtime.store(), query)
    return AuditList(entries=[_view(e) for e in entries], next=after)


@router.get(
    "/api/admin/audit.jsonl",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def export_audit(
    query: Filters,
    user: Reader,
    ctx: Ctx,
    limit: Annotated[int | None, Query(ge=1)] = None,
) -> StreamingResponse:
    """Every matching entry as JSON lines, newest first, as a file (administrators only)."""
    store = await ctx.runtime.store()
    # The first page is read before the answer starts, so a bad cursor (or
    # a store that fails at once) is a proper error rather than a cut file.
    size = min(limit or MAX_AUDIT_PAGE, MAX_AUDIT_PAGE)
    first = await _read(store, replace(query, limit=size))
    lines = _lines(store, query, first, limit)
    return StreamingResponse(
        lines,
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{EXPORT_FILENAME}"'},
    )


async def _lines(
    store: AuditLog,
    query: AuditQuery,
    page: tuple[list[AuditEntry], str | None],
    limit: int | None,
) -> AsyncIterator[str]:
    left = limit
    while True:
        entries, after = page
        for entry in entries[:left]:
            yield _view(entry).model_dump_json(by_alias=True) + "\n"
        if left is not None:
            left -= len(entries)
        if after is None or (left is not None and left <= 0):
            return
        size = min(left or MAX_AUDIT_PAGE, MAX_AUDIT_PAGE)
        page = await _read(store, replace(query, limit=size, before=after))
