"""Threads over HTTP and the checks both doors share (``protocol.threads``).

Routes (a session and membership of the group needed, as everywhere; a
group the user is not in is a 404):

- ``GET /api/groups/{id}/threads/{threadId}``: the thread under message
  ``threadId``: its root, its replies oldest first, its summary and the
  group's ``lastSeq`` (shaped as the ``thread_messages`` frame);
- ``POST /api/groups/{id}/threads/{threadId}/messages {text, mentions?,
  clientMessageId?}``: write a reply in the thread, as ``yeaft_session_chat``
  with ``threadId`` does; answered once it is stored, with its id.

A reply is checked before the coordinator stores it (:func:`thread_root`):
the root must be an undeleted message of the group that is not itself a
reply in a thread. Refusals are typed: ``not_found`` on ``threadId``, or
``conflict`` with ``detail {reason}`` (``root_deleted``, ``nested``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import Field

from gateway.errors import GatewayError
from gateway.http import Body, Ctx, User
from gateway.views import message_view, with_reactions
from protocol import Channel, ErrorCode, ThreadMessages, ThreadRefusal, ThreadSummary
from protocol.client import MAX_MENTIONS
from protocol.common import Id, Text
from store.base import GroupMessage
from store.threads import thread_of

if TYPE_CHECKING:
    from gateway.context import GatewayContext

router = APIRouter()


class ThreadReplyBody(Body):
    text: Text
    mentions: list[Id] | None = Field(default=None, max_length=MAX_MENTIONS)
    client_message_id: Id | None = None


# -- what both doors do -------------------------------------------------------------
async def thread_root(
    ctx: GatewayContext, user: str, group_id: str, thread_id: str
) -> GroupMessage:
    """The root of the thread ``thread_id``, once the user may write under it."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    root = await store.get_message(group.id, thread_id)
    if root is None:
        raise GatewayError(
            ErrorCode.NOT_FOUND,
            "no such message in this group",
            field="threadId",
            detail={"threadId": thread_id},
        )
    if root.meta.get("deleted"):
        raise GatewayError(
            ErrorCode.CONFLICT,
            "that message was deleted: a thread cannot start under it",
            field="threadId",
            detail={"reason": ThreadRefusal.ROOT_DELETED.value, "threadId": thread_id},
        )
    if thread_of(root.meta) is not None:
        raise GatewayError(
            ErrorCode.CONFLICT,
            "that message is a reply in a thread: reply in its thread instead",
            field="threadId",
            detail={
                "reason": ThreadRefusal.NESTED.value,
                "threadId": thread_id,
                "rootThreadId": thread_of(root.meta),
            },
        )
    return root


async def thread_messages(
    ctx: GatewayContext, user: str, group_id: str, thread_id: str, request_id: str | None = None
) -> ThreadMessages:
    """The thread under ``thread_id`` as it is now (a deleted root is still readable)."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    # The head first: a reply stored in between shows twice, never not at all.
    last_seq = await store.head(group.id)
    root = await store.get_message(group.id, thread_id)
    if root is None or thread_of(root.meta) is not None:
        raise GatewayError(
            ErrorCode.NOT_FOUND,
            "no such thread in this group",
            field="threadId",
            detail={"threadId": thread_id},
        )
    replies = await store.thread_replies(group.id, thread_id)
    views = [message_view(m, group.id) for m in [root, *replies]]
    await with_reactions(store, group.id, views)
    summary = (await store.thread_summaries(group.id, [thread_id])).get(thread_id)
    return ThreadMessages(
        group_id=group.id,
        thread_id=thread_id,
        root=views[0],
        messages=views[1:],
        summary=ThreadSummary.model_validate(summary.view()) if summary else None,
        last_seq=last_seq,
        request_id=request_id,
    )


async def reply_in_thread(
    ctx: GatewayContext,
    user: str,
    group_id: str,
    thread_id: str,
    body: ThreadReplyBody,
    channel: Channel = Channel.API,
) -> dict[str, Any]:
    """Store a reply in the thread (its VPs answer there); its id, once stored."""
    await thread_root(ctx, user, group_id, thread_id)
    result = await ctx.groups.ingest(
        user,
        group_id,
        body.text,
        body.mentions,
        body.client_message_id,
        channel=channel,
        thread_id=thread_id,
    )
    return {
        "groupId": group_id,
        "threadId": thread_id,
        "messageId": result.message_id,
        "duplicate": result.duplicate,
    }


# -- HTTP ---------------------------------------------------------------------------
@router.get("/api/groups/{group_id}/threads/{thread_id}")
async def get_thread(group_id: str, thread_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The thread under message ``thread_id``: root, replies oldest first, summary, lastSeq."""
    frame = await thread_messages(ctx, user, group_id, thread_id)
    return frame.model_dump(by_alias=True, exclude={"type", "request_id"})


@router.post("/api/groups/{group_id}/threads/{thread_id}/messages")
async def post_thread_reply(
    group_id: str, thread_id: str, body: ThreadReplyBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Write a reply in the thread; answered once it is stored."""
    return await reply_in_thread(ctx, user, group_id, thread_id, body)
