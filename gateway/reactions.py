"""Reactions and pins over HTTP, and the checks both doors share (``protocol.reactions``).

Routes (a session and membership of the group needed, as everywhere; a
group the user is not in is a 404):

- ``POST /api/groups/{id}/messages/{messageId}/reactions {emoji, on?}``:
  add (``on`` true), remove (false) or toggle (absent) the user's reaction;
- ``DELETE /api/groups/{id}/messages/{messageId}/reactions/{emoji}``:
  remove it (the emoji URL-encoded);
- ``GET /api/groups/{id}/messages/{messageId}/reactions``: a message's reactions;
- ``PUT`` / ``DELETE /api/groups/{id}/pins/{messageId}``: pin, unpin;
- ``GET /api/groups/{id}/pins``: the pinned messages, oldest pin first, each
  with its author and the start of its text (a pin whose message was
  deleted since is left out).

Each change answers the state it left, shaped as its event
(``message_reactions``, ``message_pins``); the store appends that event to
the group's log in the same step as the change, and every subscriber on
every gateway gets it from there. Refusals are typed: an unknown or deleted
message is ``not_found`` on ``messageId``, a bad emoji ``invalid_frame`` on
``emoji``, a limit ``conflict`` with ``detail {reason, limit}``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from gateway.errors import GatewayError
from gateway.http import Body, Ctx, User
from protocol import ErrorCode, MessagePins, MessageReactions
from protocol.reactions import Emoji, emoji_problem
from store.base import Store
from store.reactions import (
    ReactionError,
    pin_views,
    pins_frame,
    reaction_views,
    reactions_frame,
)

if TYPE_CHECKING:
    from gateway.context import GatewayContext

router = APIRouter()

# Characters of a pinned message's text the pinned list shows.
PIN_PREVIEW_CHARS = 200


class ReactBody(Body):
    emoji: Emoji
    on: bool | None = None


# -- what both doors do -------------------------------------------------------------
async def _message_store(ctx: GatewayContext, user: str, group_id: str, message_id: str) -> Store:
    """The store, once the user is a member and the group holds the (undeleted) message."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    message = await store.get_message(group.id, message_id)
    if message is None or message.meta.get("deleted"):
        raise GatewayError(
            ErrorCode.NOT_FOUND,
            "no such message in this group",
            field="messageId",
            detail={"messageId": message_id},
        )
    return store


def _refused(exc: ReactionError) -> GatewayError:
    return GatewayError(
        ErrorCode.CONFLICT, exc.message, detail={"reason": exc.code.value, "limit": exc.limit}
    )


async def react(
    ctx: GatewayContext,
    user: str,
    group_id: str,
    message_id: str,
    emoji: str,
    on: bool | None,
    request_id: str | None = None,
) -> MessageReactions:
    """Add, remove or toggle ``user``'s reaction; the state it left, as its event."""
    problem = emoji_problem(emoji)
    if problem is not None:
        raise GatewayError(ErrorCode.INVALID_FRAME, problem, field="emoji")
    store = await _message_store(ctx, user, group_id, message_id)
    now = time.time()
    try:
        change = await store.react(group_id, message_id, emoji, user, on=on, ts=now)
    except ReactionError as exc:
        raise _refused(exc) from exc
    return reactions_frame(group_id, change, now, request_id)


async def pin(
    ctx: GatewayContext,
    user: str,
    group_id: str,
    message_id: str,
    pinned: bool,
    request_id: str | None = None,
) -> MessagePins:
    """Pin or unpin a message for the group; the pinned list it left, as its event."""
    if pinned:
        store = await _message_store(ctx, user, group_id, message_id)
    else:
        # Unpinning needs no message: one deleted since may still be on the list.
        group = await ctx.groups.member_group(user, group_id)
        store = await ctx.runtime.store()
        group_id = group.id
    now = time.time()
    try:
        change = await store.pin(group_id, message_id, user, pinned=pinned, ts=now)
    except ReactionError as exc:
        raise _refused(exc) from exc
    return pins_frame(group_id, change, user, now, request_id)


async def pinned_list(ctx: GatewayContext, user: str, group_id: str) -> dict[str, Any]:
    """The group's pins with what each message says, for the pinned list."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    pins = await store.pins_of(group.id)
    listed: list[dict[str, Any]] = []
    for view in pin_views(pins):
        message = await store.get_message(group.id, view.message_id)
        if message is None or message.meta.get("deleted"):
            continue
        listed.append(
            {
                **view.model_dump(by_alias=True),
                "author": message.author,
                "role": message.role,
                "text": message.text[:PIN_PREVIEW_CHARS],
                "messageTs": message.ts,
            }
        )
    return {"groupId": group.id, "pins": listed}


def _frame_view(frame: MessageReactions | MessagePins) -> dict[str, Any]:
    return frame.model_dump(by_alias=True, exclude_none=True)


# -- HTTP ---------------------------------------------------------------------------
@router.post("/api/groups/{group_id}/messages/{message_id}/reactions")
async def post_reaction(
    group_id: str, message_id: str, body: ReactBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Add (``on`` true), remove (false) or toggle (absent) the user's reaction."""
    return _frame_view(await react(ctx, user, group_id, message_id, body.emoji, body.on))


@router.delete("/api/groups/{group_id}/messages/{message_id}/reactions/{emoji}")
async def delete_reaction(
    group_id: str, message_id: str, emoji: str, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Remove the user's reaction ``emoji`` (URL-encoded); removing none is no error."""
    return _frame_view(await react(ctx, user, group_id, message_id, emoji, False))


@router.get("/api/groups/{group_id}/messages/{message_id}/reactions")
async def get_reactions(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """A message's reactions: each emoji with its users, in the order they reacted."""
    store = await _message_store(ctx, user, group_id, message_id)
    found = await store.reactions_of(group_id, [message_id])
    reactions = reaction_views(found.get(message_id, ()))
    return {
        "groupId": group_id,
        "messageId": message_id,
        "reactions": [r.model_dump(by_alias=True) for r in reactions],
    }


@router.put("/api/groups/{group_id}/pins/{message_id}")
async def put_pin(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Pin a message for the whole group (pinning twice changes nothing)."""
    return _frame_view(await pin(ctx, user, group_id, message_id, True))


@router.delete("/api/groups/{group_id}/pins/{message_id}")
async def delete_pin(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Unpin a message (unpinning one not pinned changes nothing)."""
    return _frame_view(await pin(ctx, user, group_id, message_id, False))


@router.get("/api/groups/{group_id}/pins")
async def get_pins(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The group's pinned messages, oldest pin first, with their author and text."""
    return await pinned_list(ctx, user, group_id)
