"""Self-service over HTTP: a person's own account, sessions and usage.

- ``GET /api/me``: ``{username, displayName, role, hasPassword, ownerInvites,
  session}`` (``ownerInvites``: group owners may make invite links,
  ``gateway.invites``)
  (``session`` is the id of the session the request's token belongs to);
- ``PATCH /api/me`` ``{displayName}``: 1 to 80 characters (surrounding
  space dropped; ``null`` or blank removes it); shown beside the username in
  member lists (``GET /api/groups/{id}/display-names``);
- ``POST /api/me/password`` ``{current, new}``: the current password must
  match (403 ``forbidden``, ``detail.reason`` ``wrong_password``; a wrong
  guess counts as a failed login, so a stolen session cannot guess at
  leisure: 429 once locked out); the new one must pass the strength rules
  (422 ``invalid_request`` on ``new``); an account made by an OpenID sign-in
  has no password to change (409 ``conflict``, ``detail.reason``
  ``no_password``). On success every other session is ended and the answer
  carries a fresh token for this one (``{token, expiresAt, endedSessions}``;
  the cookie too when the cookie was used): tokens issued before the change
  stop working, as with ``yeaft user passwd``;
- ``GET /api/me/sessions``: the live sign-in sessions, newest first, the
  current one marked (``current: true``); API tokens are listed apart
  (``gateway.api_tokens``);
- ``DELETE /api/me/sessions/{id}``: end one (404 for an id that is not one of
  the caller's live sessions); ``DELETE /api/me/sessions``: end all sign-in
  sessions but the current (``{ended}``; API tokens stay). An ended
  session's token is refused at once on every gateway, and its WebSockets
  close with 4401 (``gateway.sessions``);
- ``GET /api/me/usage``: tokens and US dollars the caller's own messages
  cost (every turn of the chains they started, hand-offs included), per UTC
  day and per group, over the last 30 days, read from the usage records
  (``store.quotas``): the same figures an administrator sees for them in
  ``GET /api/admin/usage``.

A password change, a display-name change and ended sessions are recorded
in the audit log (``gateway.audit``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response
from pydantic import Field

from gateway import sessions
from gateway.accounts import (
    MAX_DISPLAY_NAME,
    PASSWORD_CHANGED_AT,
    client_address,
    display_name,
    locked_out,
)
from gateway.audit import record as record_audit
from gateway.auth import SESSION_COOKIE, issue_token, token_claims
from gateway.errors import GatewayError, not_found
from gateway.http import Body, Ctx, User, set_session_cookie
from gateway.lockout import lift_lockout
from gateway.roles import role_of
from gateway.sessions import session_id
from gateway.settings import GatewaySettings
from gateway.users import UserError, authenticate, check_password, hash_password
from protocol import ErrorCode
from store.audit import AuditAction
from store.budgets import day_account
from store.sessions import SignIn

router = APIRouter()

USAGE_DAYS = 30
_DAY_S = 86_400


class ProfileBody(Body):
    # Required, null allowed: null (or blank) is how a display name is removed.
    display_name: Annotated[str, Field(max_length=MAX_DISPLAY_NAME * 2)] | None


class PasswordBody(Body):
    current: str = Field(min_length=1, max_length=1024)
    new: str = Field(min_length=1, max_length=1024)


def _current(request: Request) -> str:
    """The session of the request's token (``gateway.http.current_user`` kept its claims)."""
    return session_id(getattr(request.state, "claims", {}))


async def _record(ctx: Ctx, user: str) -> dict[str, Any]:
    record = await (await ctx.runtime.store()).get_user(user)
    if record is None:
        raise not_found("user")
    return record


def _me_view(record: dict[str, Any], current: str, settings: GatewaySettings) -> dict[str, Any]:
    name = record.get("displayName")
    return {
        "username": record["username"],
        "displayName": name if isinstance(name, str) and name else None,
        "role": role_of(record, settings).value,
        "hasPassword": isinstance(record.get("passwordHash"), str),
        # Whether a group's owner may make invite links to it (YEAFT_OWNER_INVITES).
        "ownerInvites": settings.owner_invites,
        "session": current,
    }


@router.get("/api/me")
async def me(request: Request, user: User, ctx: Ctx) -> dict[str, Any]:
    """Who the caller is: username, display name, role, whether there is a password, the session."""
    return _me_view(await _record(ctx, user), _current(request), ctx.settings)


@router.patch("/api/me")
async def update_me(body: ProfileBody, request: Request, user: User, ctx: Ctx) -> dict[str, Any]:
    """Change (or remove) the display name."""
    name = display_name(body.display_name) or ""
    record = await _record(ctx, user)
    before = record.get("displayName") or None
    record = {k: v for k, v in record.items() if k != "displayName"}
    if name:
        record["displayName"] = name
    store = await ctx.runtime.store()
    await store.put_user(record)
    if (name or None) != before:
        # A display name is what others see beside a username: who changed it
        # to what is worth keeping (it is no secret).
        detail = {"displayName": name or None, "previous": before}
        action = AuditAction.DISPLAY_NAME_CHANGED
        await record_audit(store, action, actor=user, target=user, detail=detail)
    return _me_view(record, _current(request), ctx.settings)


@router.post("/api/me/password")
async def change_password(
    body: PasswordBody, request: Request, response: Response, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Change the caller's password; every other session ends."""
    store = await ctx.runtime.store()
    record = await _record(ctx, user)
    if not isinstance(record.get("passwordHash"), str):
        raise GatewayError(
            ErrorCode.CONFLICT,
            "this account signs in through your organisation's sign-in provider and has "
            "no password here to change",
            detail={"reason": "no_password"},
        )
    address = client_address(request)
    locked = await ctx.logins.retry_after(store, user, address)
    if locked is not None:
        raise locked_out(locked)
    if not await authenticate(store, user, body.current):
        started = await ctx.logins.failed(store, user, address)
        if started is not None:
            raise locked_out(started)
        raise GatewayError(
            ErrorCode.FORBIDDEN,
            "the current password is not right",
            field="current",
            detail={"reason": "wrong_password"},
        )
    try:
        check_password(user, body.new)
    except UserError as exc:
        raise GatewayError(
            ErrorCode.INVALID_FRAME, str(exc), field="new", detail={"reason": "weak_password"}
        ) from exc
    password_hash = await asyncio.to_thread(hash_password, body.new)
    # authenticate() may have upgraded the stored hash: start from the record as it is now.
    record = await _record(ctx, user)
    await store.put_user(
        {**record, "passwordHash": password_hash, PASSWORD_CHANGED_AT: time.time()}
    )
    await lift_lockout(store, user)
    current = _current(request)
    ended = await sessions.end(store, user, None, keep=current)
    # Tokens issued before the change are refused: this session goes on with a new one.
    token = issue_token(ctx.settings, user, current or None)
    claims = token_claims(ctx.settings, token)
    if current:
        await store.touch_session(current, time.time(), float(claims["exp"]))
    if SESSION_COOKIE in request.cookies:
        set_session_cookie(response, ctx, token)
    detail = {"endedSessions": len(ended)}
    action = AuditAction.PASSWORD_CHANGED
    await record_audit(store, action, actor=user, target=user, detail=detail)
    return {"token": token, "expiresAt": claims["exp"], "endedSessions": len(ended)}


@router.get("/api/me/sessions")
async def my_sessions(request: Request, user: User, ctx: Ctx) -> dict[str, Any]:
    """The caller's live sessions, newest first, the current one marked."""
    store = await ctx.runtime.store()
    current = _current(request)
    live = await store.user_sessions(user, time.time())
    signed_in = [s for s in live if s.how is not SignIn.API_TOKEN]  # gateway.api_tokens
    return {"sessions": [sessions.session_view(s, current) for s in signed_in], "current": current}


@router.delete("/api/me/sessions/{sid}", status_code=204)
async def end_session(sid: str, user: User, ctx: Ctx) -> None:
    """End one of the caller's sessions (the current one too: that is logging out everywhere)."""
    store = await ctx.runtime.store()
    if not await sessions.end(store, user, [sid]):
        raise not_found("session")
    detail = {"ended": 1}
    await record_audit(store, AuditAction.SESSIONS_ENDED, actor=user, target=user, detail=detail)


@router.delete("/api/me/sessions")
async def end_other_sessions(request: Request, user: User, ctx: Ctx) -> dict[str, Any]:
    """End every sign-in session of the caller but the current one (API tokens stay)."""
    store = await ctx.runtime.store()
    current = _current(request)
    live = await store.user_sessions(user, time.time())
    others = [s.id for s in live if s.how is not SignIn.API_TOKEN and s.id != current]
    ended = await sessions.end(store, user, others) if others else []
    detail = {"ended": len(ended), "allButCurrent": True}
    await record_audit(store, AuditAction.SESSIONS_ENDED, actor=user, target=user, detail=detail)
    return {"ended": len(ended)}


@router.get("/api/me/usage")
async def my_usage(user: User, ctx: Ctx) -> dict[str, Any]:
    """Tokens and USD the caller's messages cost, per day and per group, over 30 UTC days."""
    store = await ctx.runtime.store()
    now = time.time()
    days = [day_account(now - i * _DAY_S).removeprefix("day:") for i in range(USAGE_DAYS)][::-1]
    rows = await store.usage_rows(days[0], days[-1], user=user)
    groups = {g.id: g for g in await store.list_groups()}
    by_day = {d: [0, 0.0] for d in days}
    per_group: dict[str, list[Any]] = {}
    for row in rows:
        tokens = row.input_tokens + row.output_tokens
        by_day[row.day][0] += tokens
        by_day[row.day][1] += row.usd
        entry = per_group.setdefault(row.group_id, [0, 0.0])
        entry[0] += tokens
        entry[1] += row.usd
    by_group: list[dict[str, Any]] = []
    for gid, (tokens, usd) in per_group.items():
        group = groups.get(gid)
        by_group.append(
            {
                "groupId": gid,
                "name": group.name if group is not None else "(deleted)",
                "kind": group.kind.value if group is not None else "group",
                "tokens": tokens,
                "usd": round(usd, 6),
            }
        )
    by_group.sort(key=lambda g: (-g["tokens"], g["name"]))
    return {
        "days": USAGE_DAYS,
        "from": days[0],
        "to": days[-1],
        "tokens": sum(int(v[0]) for v in by_day.values()),
        "usd": round(sum(float(v[1]) for v in by_day.values()), 6),
        "byDay": [
            {"day": day, "tokens": int(v[0]), "usd": round(float(v[1]), 6)}
            for day, v in by_day.items()
            if v[0] or v[1]
        ],
        "byGroup": by_group,
    }


@router.get("/api/groups/{group_id}/display-names")
async def display_names(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """The display names of a group's members who have one: ``{names: {username: name}}``."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    records = await asyncio.gather(*(store.get_user(m) for m in group.members))
    names = {
        r["username"]: r["displayName"]
        for r in records
        if r is not None and isinstance(r.get("displayName"), str) and r["displayName"]
    }
    return {"groupId": group_id, "names": names}
