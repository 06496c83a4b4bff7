"""Invite links over HTTP: making, listing and revoking them, and following one.

Made by an administrator, or a group's owner when ``YEAFT_OWNER_INVITES``
allows it (rules in ``gateway.invites``):

- ``POST /api/admin/invites`` ``{expiresIn?, maxUses?, groupId?}``: a new
  link (seconds until it expires, 60 to 30 days, 7 days by default; uses,
  1 to 1000, 1 by default; the group it joins, or none: an account only).
  The answer holds the token and the link: the only time the secret is
  shown. ``GET /api/admin/invites`` (``?groupId=``): every invite, newest
  first, with its state; ``DELETE /api/admin/invites/{id}``: revoke one.
- ``POST /api/groups/{id}/invites`` ``{expiresIn?, maxUses?}``: a link to
  this group, by its owner (when allowed) or an administrator.

Following one (no session needed but for ``join``):

- ``GET /invite/{token}``: the web UI's accept page, or a page that says
  why the link cannot be used (404 for a link that is not valid, 410 for a
  revoked, expired or used-up one, or one whose group is gone);
- ``POST /api/invites/lookup`` ``{token}``: what the link is for;
- ``POST /api/invites/accept`` ``{token, username, password, displayName?}``:
  make the account, join the group, sign in (the session cookie is set, as
  ``POST /api/login`` does);
- ``POST /api/invites/join`` ``{token}``: a person signed in joins the
  link's group (one who is in it already costs the link no use).

With an OpenID provider configured, ``GET /api/auth/oidc/login?invite=``
carries the link through the provider's sign-in (``gateway.oidc_http``).
Every link made, revoked and followed is recorded in the audit log.
"""

from __future__ import annotations

import asyncio
import html
import logging
import time
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import Field

from gateway import invites, sessions
from gateway.accounts import MAX_DISPLAY_NAME, display_name
from gateway.admin_http import Admin, View
from gateway.audit import record
from gateway.auth import AuthError, check_origin
from gateway.errors import GatewayError, not_found
from gateway.http import Body, Ctx, User, set_session_cookie
from gateway.invites import InviteRefused
from gateway.roles import ROLE_FIELD, Role
from gateway.users import UserError, check_password, check_username, hash_password, taken_names
from protocol import ErrorCode
from store.audit import AuditAction
from store.base import Store
from store.invites import InviteRecord, InviteState
from store.sessions import SignIn

log = logging.getLogger(__name__)
router = APIRouter()

INDEX = Path(__file__).resolve().with_name("static") / "index.html"
# The accept page carries the secret in its address: it is never cached,
# and no page it leads to learns the address from a Referer header.
_PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


class MakeInviteBody(Body):
    expires_in: int = Field(
        default=invites.DEFAULT_TTL_S, ge=invites.MIN_TTL_S, le=invites.MAX_TTL_S
    )
    max_uses: int = Field(default=1, ge=1, le=invites.MAX_USES)


class AdminInviteBody(MakeInviteBody):
    group_id: str | None = Field(default=None, max_length=200)


class TokenBody(Body):
    token: str = Field(min_length=1, max_length=200)


class AcceptBody(TokenBody):
    username: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1024)
    display_name: str | None = Field(default=None, max_length=MAX_DISPLAY_NAME * 2)


class InviteView(View):
    id: str
    group_id: str | None
    group_name: str | None
    created_by: str
    # Epoch seconds.
    created_at: float
    expires_at: float
    max_uses: int
    uses: int
    revoked_at: float | None
    state: InviteState


class MadeInvite(InviteView):
    # Shown this once: the store keeps only a hash of the secret in it.
    token: str
    url: str


class InviteList(View):
    invites: list[InviteView]


class InvitePreview(View):
    group_id: str | None
    group_name: str | None
    invited_by: str
    expires_at: float
    uses_left: int


class Accepted(View):
    username: str
    group_id: str | None
    token: str
    expires_at: float


class Joined(View):
    group_id: str
    # False: the person was in the group already (the link lost no use).
    joined: bool


async def _view(store: Store, invite: InviteRecord, now: float) -> InviteView:
    group = await store.get_group(invite.group_id) if invite.group_id else None
    return InviteView(
        id=invite.id,
        group_id=invite.group_id,
        group_name=group.name if group else None,
        created_by=invite.created_by,
        created_at=invite.created_at,
        expires_at=invite.expires_at,
        max_uses=invite.max_uses,
        uses=invite.uses,
        revoked_at=invite.revoked_at,
        state=invite.state(now),
    )


async def _make(
    request: Request, ctx: Ctx, user: str, body: MakeInviteBody, group_id: str | None
) -> MadeInvite:
    store = await ctx.runtime.store()
    await invites.may_make(store, ctx.settings, user, group_id)
    now = time.time()
    invite, token = await invites.make(
        store, user, ttl_s=body.expires_in, max_uses=body.max_uses, group_id=group_id, now=now
    )
    detail: dict[str, object] = {"maxUses": invite.max_uses, "expiresAt": invite.expires_at}
    if group_id is not None:
        detail["groupId"] = group_id
    await record(store, AuditAction.INVITE_CREATED, actor=user, target=invite.id, detail=detail)
    view = await _view(store, invite, now)
    base = ctx.settings.public_url or str(request.base_url)
    return MadeInvite(**view.model_dump(), token=token, url=invites.link(base, token))


@router.post("/api/admin/invites", status_code=201)
async def make_invite(body: AdminInviteBody, request: Request, user: Admin, ctx: Ctx) -> MadeInvite:
    """Make an invite link, for a new account or a group (administrators only)."""
    return await _make(request, ctx, user, body, body.group_id)


@router.get("/api/admin/invites")
async def list_invites(
    user: Admin,
    ctx: Ctx,
    group_id: Annotated[str | None, Query(alias="groupId", max_length=200)] = None,
) -> InviteList:
    """Every invite link (or a group's), newest first, with its state (administrators only)."""
    store = await ctx.runtime.store()
    now = time.time()
    found = await store.list_invites(group_id)
    return InviteList(invites=[await _view(store, i, now) for i in found])


@router.delete("/api/admin/invites/{invite_id}")
async def revoke_invite(invite_id: str, user: Admin, ctx: Ctx) -> InviteView:
    """Revoke an invite link: following it is refused from now on (administrators only)."""
    store = await ctx.runtime.store()
    now = time.time()
    before = await store.get_invite(invite_id)
    revoked = await store.revoke_invite(invite_id, now)
    if before is None or revoked is None:
        raise not_found("invite")
    if before.revoked_at is None:
        detail = {"uses": revoked.uses, "maxUses": revoked.max_uses}
        await record(store, AuditAction.INVITE_REVOKED, actor=user, target=invite_id, detail=detail)
    return await _view(store, revoked, now)


@router.post("/api/groups/{group_id}/invites", status_code=201)
async def make_group_invite(
    group_id: str, body: MakeInviteBody, request: Request, user: User, ctx: Ctx
) -> MadeInvite:
    """Make an invite link to the group: its owner (when allowed) or an administrator."""
    return await _make(request, ctx, user, body, group_id)


# -- following a link -------------------------------------------------------------
@router.post("/api/invites/lookup")
async def lookup(body: TokenBody, ctx: Ctx) -> InvitePreview:
    """What an invite link is for: its group, who made it, until when and how many uses are left."""
    store = await ctx.runtime.store()
    invite = await invites.check(store, body.token, time.time())
    group = await store.get_group(invite.group_id) if invite.group_id else None
    return InvitePreview(
        group_id=invite.group_id,
        group_name=group.name if group else None,
        invited_by=invite.created_by,
        expires_at=invite.expires_at,
        uses_left=invite.max_uses - invite.uses,
    )


def _refused(field: str, reason: str, exc: Exception) -> GatewayError:
    return GatewayError(ErrorCode.INVALID_FRAME, str(exc), field=field, detail={"reason": reason})


@router.post("/api/invites/accept")
async def accept(body: AcceptBody, request: Request, response: Response, ctx: Ctx) -> Accepted:
    """Follow a link as a new person: make the account, join the group, sign in."""
    try:
        check_origin(ctx.settings, request.headers)
    except AuthError as exc:
        raise GatewayError(ErrorCode.FORBIDDEN, exc.message) from exc
    store = await ctx.runtime.store()
    invite = await invites.check(store, body.token, time.time())
    username = body.username.strip()
    try:
        check_username(username)
    except UserError as exc:
        raise _refused("username", "invalid_username", exc) from exc
    try:
        check_password(username, body.password)
    except UserError as exc:
        raise _refused("password", "weak_password", exc) from exc
    name = display_name(body.display_name)
    taken = await taken_names(store)
    if username.lower() in taken:
        raise GatewayError(
            ErrorCode.CONFLICT,
            f"the name {taken[username.lower()]!r} is taken: choose another",
            field="username",
            detail={"reason": "username_taken"},
        )
    # Hashing takes ~0.1 s of CPU: done before the use is counted, off the event loop.
    password_hash = await asyncio.to_thread(hash_password, body.password)
    now = time.time()
    await invites.redeem(store, invite, now)
    account = {
        "username": username,
        "passwordHash": password_hash,
        "createdAt": now,
        # Never seeded from YEAFT_ADMINS: a name chosen here is no claim to a role.
        ROLE_FIELD: Role.MEMBER.value,
        "invite": invite.id,
    }
    if name:
        account["displayName"] = name
    if not await store.create_user(account):
        await store.release_invite(invite.id)
        raise GatewayError(
            ErrorCode.CONFLICT,
            f"the name {username!r} was taken a moment ago: choose another",
            field="username",
            detail={"reason": "username_taken"},
        )
    detail = {"method": "invite", "invite": invite.id}
    await record(store, AuditAction.USER_ADDED, actor=username, target=username, detail=detail)
    group_id = await _join_new(ctx, store, username, invite)
    await invites.redeemed(store, username, invite, new_account=True)
    begun = await sessions.begin(store, ctx.settings, username, request, SignIn.PASSWORD)
    await record(store, AuditAction.SIGN_IN, actor=username, target=username, detail=detail)
    set_session_cookie(response, ctx, begun.token)
    return Accepted(
        username=username, group_id=group_id, token=begun.token, expires_at=begun.claims["exp"]
    )


async def _join_new(ctx: Ctx, store: Store, username: str, invite: InviteRecord) -> str | None:
    """Put a new account in the invite's group; None (the account stays) if it went meanwhile."""
    if invite.group_id is None:
        return None
    try:
        await ctx.groups.join(username, invite.group_id, invite.id)
    except GatewayError as exc:
        log.warning("a new account could not join %s: %s", invite.group_id, exc.message)
        return None
    return invite.group_id


@router.post("/api/invites/join")
async def join(body: TokenBody, user: User, ctx: Ctx) -> Joined:
    """Follow a link signed in: join its group."""
    store = await ctx.runtime.store()
    now = time.time()
    invite = await invites.check(store, body.token, now)
    if invite.group_id is None:
        raise GatewayError(
            ErrorCode.CONFLICT,
            "this invite link is for making an account, and you have one already",
            detail={"reason": "no_group"},
        )
    counted = await invites.join(store, ctx.groups, user, invite, now, new_account=False)
    return Joined(group_id=invite.group_id, joined=counted)


@router.get("/invite/{token}", include_in_schema=False)
async def invite_page(token: str, ctx: Ctx) -> Response:
    """The web UI's accept page, or a page that says why the link cannot be used."""
    store = await ctx.runtime.store()
    try:
        await invites.check(store, token, time.time())
    except InviteRefused as exc:
        status = 404 if exc.problem is invites.InviteProblem.INVALID else 410
        return refusal_page(status, exc.message)
    if not INDEX.is_file():
        return refusal_page(503, "the web UI is not installed on this server")
    return FileResponse(INDEX, headers=_PAGE_HEADERS)


def refusal_page(status: int, text: str) -> HTMLResponse:
    """A small page a person can read: why the link cannot be used, and the way on."""
    sentence = text[:1].upper() + text[1:] + "."
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>Yeaft invite</title></head><body>"
        f'<p data-testid="invite-message">{html.escape(sentence)}</p>'
        '<p><a href="/">Go to the login</a></p></body></html>'
    )
    return HTMLResponse(body, status_code=status, headers=_PAGE_HEADERS)
