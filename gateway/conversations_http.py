"""The HTTP API of one-to-one conversations, beside the groups' (``gateway.http``).

``GET|POST /api/conversations`` (``?workDir=`` filters the list),
``GET|DELETE /api/conversations/{id}``,
``GET /api/conversations/{id}/messages?before=&limit=`` (a page of its log
and ``lastSeq``, as for a group) and ``GET /api/workspaces``.

What the header of an open conversation offers, each the group's own code
path on the conversation's record: ``GET /api/conversations/{id}/export``
(``?format=markdown|json``, the download a group's export is),
``GET /api/conversations/{id}/usage`` (its turns' tokens and cost and
today's budget) and ``GET|PATCH /api/conversations/{id}/settings`` (its
title, VP, model and the settings a conversation has; the owner changes
``{title?, settings?}``, a group-only setting is a 422 naming it).

A conversation is its owner's only: anyone else gets the 404 ``not_found``
an unknown id gets, so nobody learns which conversations exist.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import Field

from gateway.conversations import check_work_dir
from gateway.errors import GatewayError
from gateway.export import ExportFormat, conversation_subject, download
from gateway.http import Body, Ctx, User
from gateway.messages_api import usage_report
from gateway.views import message_view
from protocol import ErrorCode, Id
from protocol.settings import ConversationSettingsPatch

router = APIRouter()


class CreateConversationBody(Body):
    vp_id: Id
    work_dir: str | None = Field(default=None, max_length=200)
    title: str | None = Field(default=None, max_length=120)


class ConversationSettingsBody(Body):
    title: str | None = Field(default=None, min_length=1, max_length=120)
    settings: ConversationSettingsPatch | None = None


def _dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True)
    return data


@router.get("/api/conversations")
async def list_conversations(
    user: User, ctx: Ctx, work_dir: Annotated[str | None, Query(alias="workDir")] = None
) -> dict[str, Any]:
    """The user's conversations, newest activity first."""
    where = check_work_dir(work_dir) if work_dir is not None else None
    listed = await ctx.conversations.list_for(user, where)
    return {"conversations": [_dump(s) for s in listed]}


@router.post("/api/conversations", status_code=201)
async def create_conversation(body: CreateConversationBody, user: User, ctx: Ctx) -> dict[str, Any]:
    group = await ctx.conversations.create(user, body.vp_id, body.work_dir, body.title)
    return _dump(await ctx.conversations.summary(group))


@router.get("/api/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    group = await ctx.conversations.owned(user, conversation_id)
    return _dump(await ctx.conversations.summary(group))


@router.delete("/api/conversations/{conversation_id}", status_code=204)
async def delete_conversation(conversation_id: str, user: User, ctx: Ctx) -> None:
    await ctx.conversations.delete(user, conversation_id)


@router.get("/api/conversations/{conversation_id}/messages")
async def conversation_history(
    conversation_id: str,
    user: User,
    ctx: Ctx,
    before: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1)] = 100,
) -> dict[str, Any]:
    """A page of the conversation's log, oldest first, and its event log's ``lastSeq``."""
    if limit > ctx.settings.history_page_max:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"limit is at most {ctx.settings.history_page_max}",
            field="limit",
        )
    await ctx.conversations.owned(user, conversation_id)
    last_seq = await ctx.groups.head_seq(conversation_id)
    store = await ctx.runtime.store()
    messages = await store.read_messages(conversation_id, before=before, limit=limit)
    return {
        "conversationId": conversation_id,
        "messages": [message_view(m, conversation_id) for m in messages],
        "lastSeq": last_seq,
        "hasMore": len(messages) == limit,
    }


@router.get("/api/conversations/{conversation_id}/settings")
async def conversation_settings(conversation_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The conversation's title, owner, VP and model, and its settings."""
    group = await ctx.conversations.owned(user, conversation_id)
    return ctx.conversations.settings_view(group)


@router.patch("/api/conversations/{conversation_id}/settings")
async def update_conversation_settings(
    conversation_id: str, body: ConversationSettingsBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """The owner renames the conversation or changes its settings; answers as the GET does."""
    group = await ctx.conversations.edit(user, conversation_id, body.title, body.settings)
    return ctx.conversations.settings_view(group)


@router.get("/api/conversations/{conversation_id}/usage")
async def conversation_usage(conversation_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Tokens and cost of every finished turn of the conversation, and today's budget."""
    group = await ctx.conversations.owned(user, conversation_id)
    return {"conversationId": group.id, **await usage_report(await ctx.runtime.store(), group)}


@router.get("/api/conversations/{conversation_id}/export")
async def export_conversation(
    conversation_id: str, user: User, ctx: Ctx, format: ExportFormat = "markdown"
) -> Response:
    """The conversation's whole log as a Markdown or JSON download, like a group's."""
    group = await ctx.conversations.owned(user, conversation_id)
    subject = conversation_subject(group, ctx.conversations.settings_view(group))
    return await download(await ctx.runtime.store(), subject, format)


@router.get("/api/workspaces")
async def list_workspaces(user: User, ctx: Ctx) -> dict[str, Any]:
    """Every workspace folder, with how many of the user's conversations use it."""
    mine = await ctx.conversations.list_for(user)
    return {"workspaces": [_dump(f) for f in ctx.conversations.folders(mine)]}
