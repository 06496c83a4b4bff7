"""HTTP operations on a group's messages beyond reading them: search, export,
delete, regenerate, read marks, the group list's summaries, usage totals and
the composer's limits.

Every route needs a session and, for one group, membership (a group the user
is not in is a 404, as everywhere). Deleting is allowed to a message's own
author only (403 otherwise); the deletion is stored (the message becomes a
tombstone) and announced as a ``message_changed`` event, so every tab,
replica and later reload hides it. Regenerating goes through the group's
coordinator (``coordinator.regenerate``).

Unread counts are kept on the server: a read mark per user per group (the
log position of the newest message read), moved by ``POST .../read``, so
they agree across devices. Mention counts follow the same mark; the
mentions themselves are listed by ``GET /api/mentions``. Changes of both
are pushed over the WebSocket too (``gateway.inbox_push``).
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import Field

from coordinator.commands import Regenerate
from gateway.errors import GatewayError, from_group_error, not_found
from gateway.export import ExportFormat, download, group_subject, usage_view
from gateway.http import Body, Ctx, User
from gateway.inbox_push import summary_view
from protocol import MAX_TEXT_LENGTH, ErrorCode, MessageChange, MessageChanged
from store.base import Group, Store
from store.budgets import day_account
from store.chatviews import MAX_SEARCH_HITS, SearchHit
from store.mentions import MAX_MENTIONS_LISTED
from store.retry import until_stored

log = logging.getLogger(__name__)

router = APIRouter()

# The longest query a search takes.
MAX_QUERY_LENGTH = 200


class ReadBody(Body):
    message_id: str = Field(min_length=1, max_length=200)


def _hit_view(hit: SearchHit, names: dict[str, str]) -> dict[str, Any]:
    return {
        "groupId": hit.group_id,
        "groupName": names.get(hit.group_id, hit.group_id),
        "messageId": hit.message_id,
        "author": hit.author,
        "role": hit.role,
        "ts": hit.ts,
        "snippet": hit.snippet,
        "threadId": hit.thread_id,
    }


@router.get("/api/search")
async def search(
    user: User,
    ctx: Ctx,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_LENGTH)],
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_HITS)] = 50,
) -> dict[str, Any]:
    """Messages of the user's groups matching every word of ``q``, newest first."""
    groups = await ctx.groups.list_for(user)
    names = {g.id: g.name for g in groups}
    store = await ctx.runtime.store()
    hits = await store.search_messages(list(names), q, limit=limit)
    return {"query": q, "hits": [_hit_view(h, names) for h in hits]}


@router.get("/api/groups/{group_id}/export")
async def export(
    group_id: str, user: User, ctx: Ctx, format: ExportFormat = "markdown"
) -> Response:
    """The group's whole log as a Markdown or JSON download."""
    group = await ctx.groups.member_group(user, group_id)
    return await download(await ctx.runtime.store(), group_subject(group), format)


@router.delete("/api/groups/{group_id}/messages/{message_id}")
async def delete_message(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Delete one of the user's own messages: a tombstone stays, every client hides it."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    message = await store.get_message(group.id, message_id)
    if message is None:
        raise not_found("message")
    if message.role != "user" or message.author != user:
        raise GatewayError(ErrorCode.FORBIDDEN, "only its author can delete a message")
    now = time.time()
    gone = await store.delete_message(group.id, message_id, by=user, ts=now)
    if gone is None:
        raise not_found("message")
    frame = MessageChanged(
        group_id=group.id,
        message_id=message_id,
        change=MessageChange.DELETED,
        by=user,
        ts=float(gone.meta.get("deletedAt", now)),
    )
    # Retried while the store is away: a member who missed it would go on
    # showing a message its author deleted.
    await until_stored(lambda: store.append_event(group.id, frame), f"deletion of {message_id}")
    return {"groupId": group.id, "messageId": message_id, "deleted": True}


@router.post("/api/groups/{group_id}/messages/{message_id}/regenerate", status_code=202)
async def regenerate(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Have a VP answer again the message its latest reply answered; a new turn streams."""
    group = await ctx.groups.member_group(user, group_id)
    try:
        result = await ctx.runtime.send(Regenerate(group.id, message_id, user))
    except Exception as exc:
        translated = from_group_error(exc)
        if translated is None:
            log.error("regenerate failed: %s", exc, exc_info=exc)
            raise GatewayError(ErrorCode.INTERNAL, "regenerating failed; try again") from exc
        raise translated from exc
    return {
        "groupId": group.id,
        "messageId": result.message_id,
        "vpId": result.vp_id,
        "turnId": result.turn_id,
        "triggerId": result.trigger_id,
    }


@router.post("/api/groups/{group_id}/read")
async def mark_read(group_id: str, body: ReadBody, user: User, ctx: Ctx) -> dict[str, Any]:
    """Move the user's read mark in the group up to ``messageId``; answers the new unread count."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    if not await store.mark_read(group.id, user, body.message_id):
        raise not_found("message")
    (summary,) = await store.summaries([group.id], user)
    return summary_view(summary)


@router.get("/api/inbox")
async def inbox(user: User, ctx: Ctx) -> dict[str, Any]:
    """Each of the user's groups with its last message, the user's unread and mention counts."""
    groups = await ctx.groups.list_for(user)
    store = await ctx.runtime.store()
    summaries = await store.summaries([g.id for g in groups], user)
    return {"groups": [summary_view(s) for s in summaries]}


@router.get("/api/mentions")
async def mentions(
    user: User,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=MAX_MENTIONS_LISTED)] = 50,
) -> dict[str, Any]:
    """The newest messages of the user's groups that mention them, newest first."""
    groups = await ctx.groups.list_for(user)
    names = {g.id: g.name for g in groups}
    store = await ctx.runtime.store()
    found = await store.mentions_of(user, list(names), limit=limit)
    return {
        "mentions": [
            {
                "groupId": m.group_id,
                "groupName": names.get(m.group_id, m.group_id),
                "messageId": m.message_id,
                "author": m.author,
                "excerpt": m.excerpt,
                "ts": m.ts,
                "threadId": m.thread_id,
            }
            for m in found
        ]
    }


@router.get("/api/groups/{group_id}/usage")
async def group_usage(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Tokens and cost of every finished turn of the group, and today's budget."""
    group = await ctx.groups.member_group(user, group_id)
    return {"groupId": group.id, **await usage_report(await ctx.runtime.store(), group)}


async def usage_report(store: Store, group: Group) -> dict[str, Any]:
    """The totals of every finished turn of a group or conversation, and today's budget."""
    return {
        **usage_view(await store.group_usage(group.id)),
        "today": await budget_view(store, group),
    }


async def budget_view(store: Store, group: Group) -> dict[str, Any]:
    """Today's (UTC) spend of the group against its daily budget (0: no limit)."""
    [spend] = await store.budget_spend(group.id, [day_account()])
    settings = group.settings
    return {
        "day": spend.account.removeprefix("day:"),
        "tokens": spend.spent_tokens,
        "costUsd": spend.spent_usd,
        "reservedTokens": spend.reserved_tokens,
        "maxTokens": settings.budget_tokens_per_day,
        "maxUsd": settings.budget_usd_per_day,
        "maxTokensPerMessage": settings.budget_tokens_per_message,
        "maxUsdPerMessage": settings.budget_usd_per_message,
    }


@router.get("/api/limits")
async def limits(user: User, ctx: Ctx) -> dict[str, Any]:
    """What the composer must know before sending: the largest frame and text."""
    return {"frameMaxBytes": ctx.settings.frame_max_bytes, "maxTextLength": MAX_TEXT_LENGTH}
