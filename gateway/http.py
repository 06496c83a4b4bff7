"""The HTTP API under ``/api``, plus ``/healthz`` and ``/metrics``.

Authentication: an ``Authorization: Bearer <token>`` header or the
``yeaft_session`` cookie set by ``POST /api/login``. A token with less than
``YEAFT_JWT_RENEW_BEFORE`` left is renewed: the response carries the new one
in ``X-New-Token`` (and in the cookie when the cookie was used).

Errors are ``{"error": {"code", "message", "field"?, "detail"?}}`` with the
matching status: 401 (no valid session), 403 (a foreign page using the
cookie), 404 (no such thing, or not yours), 409 (conflict), 422 (invalid
request, code ``invalid_request``), 429 (too many failed logins from one
address: ``retryAfter`` says how long that address must wait; the rules
are ``gateway.lockout``'s).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from gateway import sessions
from gateway.accounts import DISABLED_MESSAGE, client_address, locked_out, session_user
from gateway.audit import record
from gateway.auth import (
    SESSION_COOKIE,
    AuthError,
    AuthFailure,
    check_origin,
    find_token,
    is_api_token,
    issue_token,
    seconds_left,
    token_claims,
)
from gateway.context import GatewayContext
from gateway.errors import GatewayError, not_found
from gateway.metrics import CONTENT_TYPE_LATEST
from gateway.sessions import session_id
from gateway.users import authenticate
from gateway.views import group_view
from personas.loader import persona_detail, persona_summary
from protocol import ErrorCode, GroupSettingsPatch, Id
from protocol.common import MAX_ROSTER
from store.audit import AuditAction, AuditLog
from store.sessions import SignIn

router = APIRouter()

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def context(request: Request) -> GatewayContext:
    gateway: GatewayContext = request.app.state.gateway
    return gateway


Ctx = Annotated[GatewayContext, Depends(context)]


def set_session_cookie(response: Response, ctx: GatewayContext, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(ctx.settings.jwt_ttl.total_seconds()),
        httponly=True,
        secure=ctx.settings.cookie_secure,
        samesite="strict",
        path="/",
    )


async def current_user(request: Request, response: Response, ctx: Ctx) -> str:
    """The authenticated user of a request; renews a token close to expiry."""
    settings = ctx.settings
    token, from_cookie = find_token(request.headers, {}, request.cookies)
    try:
        if from_cookie and request.method not in _SAFE_METHODS:
            check_origin(settings, request.headers)
        claims = token_claims(settings, token)
        store = await ctx.runtime.store()
        username = await session_user(store, claims)
    except AuthError as exc:
        code = (
            ErrorCode.FORBIDDEN if exc.reason is AuthFailure.BAD_ORIGIN else ErrorCode.UNAUTHORIZED
        )
        raise GatewayError(code, exc.message, detail={"reason": exc.reason.value}) from exc
    # The routes about the caller's own sessions need to know which is theirs.
    request.state.claims = claims
    # An API token lives to its own expiry: renewing it would move its session's.
    renew = not is_api_token(claims)
    if renew and seconds_left(claims) < settings.jwt_renew_before.total_seconds():
        # A renewed token keeps its session (the same jti), which lives on with it.
        fresh = issue_token(settings, username, session_id(claims) or None)
        await sessions.renewed(store, claims, fresh, settings)
        response.headers["X-New-Token"] = fresh
        if from_cookie:
            set_session_cookie(response, ctx, fresh)
    return username


User = Annotated[str, Depends(current_user)]


class Body(BaseModel):
    """Base of request bodies: camelCase names, unknown fields refused."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )


class LoginBody(Body):
    username: str = Field(min_length=1, max_length=200)
    password: str = Field(min_length=1, max_length=1024)


class CreateGroupBody(Body):
    name: str = Field(min_length=1, max_length=200)
    roster: list[Id] = Field(default_factory=list, max_length=MAX_ROSTER)
    default_vp_id: Id | None = None
    # The same strict, bounded patch the WebSocket's create_group frame carries.
    settings: GroupSettingsPatch | None = None


class RenameBody(Body):
    name: str = Field(min_length=1, max_length=200)


class VpBody(Body):
    vp_id: Id


class DefaultVpBody(Body):
    # Required even when null: null is how the default VP is cleared.
    vp_id: Id | None


class MemberBody(Body):
    username: str = Field(min_length=1, max_length=200)


class CancelBody(Body):
    # None: every running or queued turn of the group.
    vp_id: Id | None = None


# -- session -------------------------------------------------------------------
@router.post("/api/login")
async def login(body: LoginBody, request: Request, response: Response, ctx: Ctx) -> dict[str, Any]:
    """Check a password; answer with a token and set the session cookie."""
    try:
        check_origin(ctx.settings, request.headers)
    except AuthError as exc:
        raise GatewayError(ErrorCode.FORBIDDEN, exc.message) from exc
    store = await ctx.runtime.store()
    address = client_address(request)
    locked = await ctx.logins.retry_after(store, body.username, address)
    if locked is not None:
        ctx.metrics.logins.labels(outcome="throttled").inc()
        await _failed_login(store, body.username, "locked_out")
        raise locked_out(locked)
    if not await authenticate(store, body.username, body.password):
        ctx.metrics.logins.labels(outcome="failure").inc()
        started = await ctx.logins.failed(store, body.username, address)
        await _failed_login(store, body.username, "wrong_password", locked=started is not None)
        if started is not None:
            raise locked_out(started)
        raise GatewayError(ErrorCode.UNAUTHORIZED, "wrong username or password")
    if await store.disabled_mark(body.username) is not None:
        # Told only to whoever knows the password: a guess learns nothing of it.
        ctx.metrics.logins.labels(outcome="failure").inc()
        await _failed_login(store, body.username, AuthFailure.DISABLED.value)
        detail = {"reason": AuthFailure.DISABLED.value}
        raise GatewayError(ErrorCode.FORBIDDEN, DISABLED_MESSAGE, detail=detail)
    await ctx.logins.succeeded(store, body.username, address)
    ctx.metrics.logins.labels(outcome="success").inc()
    begun = await sessions.begin(store, ctx.settings, body.username, request, SignIn.PASSWORD)
    detail = {"method": "password"}
    await record(
        store, AuditAction.SIGN_IN, actor=body.username, target=body.username, detail=detail
    )
    set_session_cookie(response, ctx, begun.token)
    return {"token": begun.token, "username": body.username, "expiresAt": begun.claims["exp"]}


async def _failed_login(store: AuditLog, username: str, reason: str, locked: bool = False) -> None:
    """A refused password login in the audit log: by nobody, on the name that was tried."""
    detail: dict[str, Any] = {"method": "password", "reason": reason}
    if locked:
        detail["lockedOut"] = True
    await record(store, AuditAction.SIGN_IN_FAILED, actor=None, target=username, detail=detail)


@router.post("/api/logout", status_code=204)
async def logout(response: Response, ctx: Ctx) -> None:
    """Clear the session cookie (the token stays valid until it expires or its session is ended)."""
    response.delete_cookie(
        SESSION_COOKIE,
        path="/",
        httponly=True,
        secure=ctx.settings.cookie_secure,
        samesite="strict",
    )


# -- groups --------------------------------------------------------------------
@router.get("/api/groups")
async def list_groups(user: User, ctx: Ctx) -> dict[str, Any]:
    """The groups the user is a member of."""
    return {"groups": [group_view(g) for g in await ctx.groups.list_for(user)]}


@router.post("/api/groups", status_code=201)
async def create_group(body: CreateGroupBody, user: User, ctx: Ctx) -> dict[str, Any]:
    """Create a group; its creator is its first member."""
    group = await ctx.groups.create(user, body.name, body.roster, body.default_vp_id, body.settings)
    return group_view(group)


@router.get("/api/groups/{group_id}")
async def get_group(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.member_group(user, group_id))


@router.patch("/api/groups/{group_id}")
async def rename_group(group_id: str, body: RenameBody, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.rename(user, group_id, body.name))


@router.delete("/api/groups/{group_id}", status_code=204)
async def delete_group(group_id: str, user: User, ctx: Ctx) -> None:
    await ctx.groups.delete(user, group_id)


@router.post("/api/groups/{group_id}/vps")
async def add_vp(group_id: str, body: VpBody, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.add_vp(user, group_id, body.vp_id))


@router.delete("/api/groups/{group_id}/vps/{vp_id}")
async def remove_vp(group_id: str, vp_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.remove_vp(user, group_id, vp_id))


@router.put("/api/groups/{group_id}/default-vp")
async def set_default_vp(
    group_id: str, body: DefaultVpBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    return group_view(await ctx.groups.set_default_vp(user, group_id, body.vp_id))


@router.post("/api/groups/{group_id}/members")
async def add_member(group_id: str, body: MemberBody, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.add_member(user, group_id, body.username))


@router.delete("/api/groups/{group_id}/members/{username}")
async def remove_member(group_id: str, username: str, user: User, ctx: Ctx) -> dict[str, Any]:
    return group_view(await ctx.groups.remove_member(user, group_id, username))


@router.post("/api/groups/{group_id}/cancel")
async def cancel_turns(group_id: str, body: CancelBody, user: User, ctx: Ctx) -> dict[str, Any]:
    """Stop the group's turns (or one VP's) and say how many stopped, and whose."""
    result = await ctx.groups.cancel(user, group_id, body.vp_id)
    return {"cancelled": result.aborted, "vps": list(result.vps)}


@router.get("/api/groups/{group_id}/messages")
async def history(
    group_id: str,
    user: User,
    ctx: Ctx,
    before: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1)] = 100,
    include_threads: Annotated[bool, Query(alias="includeThreads")] = False,
) -> dict[str, Any]:
    """A page of the group's main timeline (oldest first, ``before`` a message id) and ``lastSeq``.

    Replies in threads are left out unless ``includeThreads=true``; each
    thread's root carries its summary. Subscribe with ``lastSeq`` to
    continue from exactly this page.
    """
    if limit > ctx.settings.history_page_max:
        raise GatewayError(
            ErrorCode.INVALID_FRAME,
            f"limit is at most {ctx.settings.history_page_max}",
            field="limit",
        )
    return await ctx.groups.history(user, group_id, before, limit, include_threads)


# -- personas ------------------------------------------------------------------
@router.get("/api/personas")
async def list_personas(user: User, ctx: Ctx) -> dict[str, Any]:
    return {"personas": [persona_summary(p) for p in ctx.personas.all()]}


@router.get("/api/personas/{persona_id}")
async def get_persona(persona_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    persona = ctx.personas.resolve(persona_id)
    if persona is None:
        raise not_found("persona")
    return persona_detail(persona)


# -- operations ----------------------------------------------------------------
@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics")
async def metrics(ctx: Ctx) -> Response:
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE_LATEST)
