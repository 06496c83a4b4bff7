"""The HTTP API of one-to-one conversations, beside the groups' (``gateway.http``).

``GET|POST /api/conversations`` (``?workDir=`` filters the list),
``GET|DELETE /api/conversations/{id}``,
``GET /api/conversations/{id}/messages?before=&limit=`` (a page of its log
and ``lastSeq``, as for a group) and ``GET /api/workspaces``. A
conversation is its owner's only: anyone else gets 404.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from gateway.conversations import check_work_dir
from gateway.errors import GatewayError
from gateway.http import Body, Ctx, User
from gateway.views import message_view
from protocol import ErrorCode, Id

router = APIRouter()


class CreateConversationBody(Body):
    vp_id: Id
    work_dir: str | None = Field(default=None, max_length=200)
    title: str | None = Field(default=None, max_length=120)


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


@router.get("/api/workspaces")
async def list_workspaces(user: User, ctx: Ctx) -> dict[str, Any]:
    """Every workspace folder, with how many of the user's conversations use it."""
    mine = await ctx.conversations.list_for(user)
    return {"workspaces": [_dump(f) for f in ctx.conversations.folders(mine)]}
