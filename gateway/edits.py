"""Editing and resending a person's message, and a reply's versions, over HTTP (and the
checks the WebSocket shares; ``protocol.versions``).

Routes (a session and membership of the group needed, as everywhere; a
group the user is not in is a 404):

- ``PATCH /api/groups/{id}/messages/{messageId} {text, resend?}``: store
  ``text`` as the new version of the user's own message; with ``resend``
  the VPs that answered it answer again. Answers the ``message_edited``
  view, with ``resent`` (as ``message_resent``) when resent.
- ``POST /api/groups/{id}/messages/{messageId}/resend``: the VPs that
  answered the user's own message answer its current version again (202,
  the ``message_resent`` view: the new turns, and the VPs left out with why).
- ``GET /api/groups/{id}/messages/{messageId}/versions``: a message's
  versions: a person's texts (``kind: "edits"``), or a reply's versions
  (``kind: "reply"``, with the one the group shows).
- ``PUT /api/groups/{id}/messages/{messageId}/versions/chosen``: show that
  reply version instead of its others, for the whole group (the
  ``reply_versions`` view).

Edits and resends go through the group's coordinator (``coordinator.ops_versions``),
which refuses them while a turn on the message runs; the events
(``message_edited``, ``message_changed superseded``, ``reply_versions``)
reach every member on every gateway through the group's event log. Each
change is recorded in the audit log (the message's id and version, never
its text).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from pydantic import Field

from coordinator.commands import EditMessage, Resend
from coordinator.regenerate import REPLY_WINDOW, is_reply
from coordinator.versions import ResendResult
from gateway.audit import record
from gateway.errors import GatewayError, coordinator_refusal
from gateway.http import Body, Ctx, User
from protocol import MAX_TEXT_LENGTH, ErrorCode
from protocol.versions import (
    MessageEdited,
    MessageResent,
    ReplyVersions,
    ResentTurn,
    SkippedVP,
)
from store.audit import AuditAction
from store.base import GroupMessage
from store.retry import until_stored
from store.versions import (
    chosen_versions,
    earlier_texts,
    edited_frame,
    family_roots,
    version_count,
    versions_frame,
)

if TYPE_CHECKING:
    from gateway.context import GatewayContext

router = APIRouter()


class EditBody(Body):
    # Checked again by the coordinator (blank text too); here so a huge body is refused early.
    text: str = Field(min_length=1, max_length=MAX_TEXT_LENGTH)
    resend: bool = False


def _missing() -> GatewayError:
    return GatewayError(ErrorCode.NOT_FOUND, "no such message in this group", field="messageId")


def resent_frame(
    group_id: str, result: ResendResult, request_id: str | None = None
) -> MessageResent:
    """The ``message_resent`` answer of a resend."""
    return MessageResent(
        group_id=group_id,
        message_id=result.message_id,
        turns=[
            ResentTurn(vp_id=t.vp_id, turn_id=t.turn_id, replaces=t.replaces) for t in result.turns
        ],
        skipped=[SkippedVP(vp_id=vp, reason=why) for vp, why in result.skipped],
        request_id=request_id,
    )


async def _audit(
    ctx: GatewayContext, user: str, action: AuditAction, group_id: str, detail: dict[str, Any]
) -> None:
    await record(ctx.runtime, action, actor=user, target=group_id, detail=detail)


# -- what both doors do -------------------------------------------------------------
async def edit(
    ctx: GatewayContext,
    user: str,
    group_id: str,
    message_id: str,
    text: str,
    resend: bool,
    request_id: str | None = None,
) -> tuple[MessageEdited, MessageResent | None]:
    """Edit the user's own message (and resend it): the ``message_edited`` and resend answers."""
    group = await ctx.groups.member_group(user, group_id)
    try:
        result = await ctx.runtime.send(EditMessage(group.id, message_id, text, user, resend))
    except Exception as exc:
        raise coordinator_refusal(exc, "edit") from exc
    edited = edited_frame(group.id, result.message, request_id)
    detail = {"messageId": message_id, "version": edited.version, "resend": resend}
    await record(
        ctx.runtime, AuditAction.MESSAGE_EDITED, actor=user, target=group.id, detail=detail
    )
    resent = resent_frame(group.id, result.resent, request_id) if result.resent else None
    return edited, resent


async def resend(
    ctx: GatewayContext, user: str, group_id: str, message_id: str, request_id: str | None = None
) -> MessageResent:
    """Have the VPs that answered the user's own message answer it again."""
    group = await ctx.groups.member_group(user, group_id)
    try:
        result = await ctx.runtime.send(Resend(group.id, message_id, user))
    except Exception as exc:
        raise coordinator_refusal(exc, "resend") from exc
    detail = {"messageId": message_id, "vps": [t.vp_id for t in result.turns]}
    await record(
        ctx.runtime, AuditAction.MESSAGE_RESENT, actor=user, target=group.id, detail=detail
    )
    return resent_frame(group.id, result, request_id)


async def _family(
    ctx: GatewayContext, group_id: str, message_id: str
) -> tuple[GroupMessage, list[GroupMessage], str | None]:
    """The message, the recent log around it, and its reply's root (None: not a reply version)."""
    store = await ctx.runtime.store()
    message = await store.get_message(group_id, message_id)
    if message is None or message.meta.get("deleted"):
        raise _missing()
    recent = await store.read_messages(group_id, limit=REPLY_WINDOW)
    return message, recent, family_roots(recent).get(message.id)


async def choose(
    ctx: GatewayContext, user: str, group_id: str, message_id: str, request_id: str | None = None
) -> ReplyVersions:
    """Show reply version ``message_id`` for the whole group; the ``reply_versions`` answer."""
    group = await ctx.groups.member_group(user, group_id)
    message, _recent, root = await _family(ctx, group.id, message_id)
    if root is None or not is_reply(message):
        raise GatewayError(
            ErrorCode.CONFLICT,
            "that message is not a version of a VP's reply",
            field="messageId",
            detail={"reason": "not_a_version"},
        )
    store = await ctx.runtime.store()
    now = time.time()
    if await store.choose_version(group.id, root, message.id, by=user, ts=now) is None:
        raise _missing()
    frame = versions_frame(group.id, root, message.id, user, now)
    await until_stored(lambda: store.append_event(group.id, frame), f"choice of {message.id}")
    detail = {"rootId": root, "messageId": message.id}
    await _audit(ctx, user, AuditAction.REPLY_VERSION_CHOSEN, group.id, detail)
    return versions_frame(group.id, root, message.id, user, now, request_id)


async def versions(
    ctx: GatewayContext, user: str, group_id: str, message_id: str
) -> dict[str, Any]:
    """A message's versions, oldest first: a person's texts, or a reply's versions."""
    group = await ctx.groups.member_group(user, group_id)
    message, recent, root = await _family(ctx, group.id, message_id)
    if message.role == "user":
        texts = [
            *earlier_texts(message),
            {"text": message.text, "ts": message.meta.get("editedAt", message.ts)},
        ]
        return {
            "groupId": group.id,
            "messageId": message.id,
            "kind": "edits",
            "current": version_count(message),
            "versions": [{"version": i + 1, **v} for i, v in enumerate(texts)],
        }
    roots = family_roots(recent)
    members = [m for m in recent if root is not None and roots.get(m.id) == root]
    members = [m for m in members if not m.meta.get("deleted")] or [message]
    chosen = chosen_versions(recent).get(root or "", message.id)
    return {
        "groupId": group.id,
        "messageId": message.id,
        "kind": "reply",
        "rootId": root or message.id,
        "chosen": chosen,
        "versions": [
            {"version": i + 1, "messageId": m.id, "text": m.text, "ts": m.ts, "author": m.author}
            for i, m in enumerate(members)
        ],
    }


def _view(frame: MessageEdited | MessageResent | ReplyVersions) -> dict[str, Any]:
    return frame.model_dump(by_alias=True, exclude_none=True)


# -- HTTP ---------------------------------------------------------------------------
@router.patch("/api/groups/{group_id}/messages/{message_id}")
async def patch_message(
    group_id: str, message_id: str, body: EditBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Store a new version of the user's own message; ``resend`` has its VPs answer again."""
    edited, resent = await edit(ctx, user, group_id, message_id, body.text, body.resend)
    view = _view(edited)
    if resent is not None:
        view["resent"] = _view(resent)
    return view


@router.post("/api/groups/{group_id}/messages/{message_id}/resend", status_code=202)
async def post_resend(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The VPs that answered the user's own message answer its current version again."""
    return _view(await resend(ctx, user, group_id, message_id))


@router.get("/api/groups/{group_id}/messages/{message_id}/versions")
async def get_versions(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """A message's versions, oldest first: a person's texts, or a VP reply's versions."""
    return await versions(ctx, user, group_id, message_id)


@router.put("/api/groups/{group_id}/messages/{message_id}/versions/chosen")
async def put_chosen(group_id: str, message_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Show this version of a VP's reply instead of its others, for the whole group."""
    return _view(await choose(ctx, user, group_id, message_id))
