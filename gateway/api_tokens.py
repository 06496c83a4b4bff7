"""API tokens: named, long-lived tokens a person makes for a program.

A desktop MCP client (``/mcp``), an AG-UI frontend, a script on the HTTP API
or another agent platform cannot renew a three-day session token, and
should not ride on a browser's. A person makes one token per program:

- ``POST /api/me/tokens`` ``{name, days}``: a token for the caller, valid
  for ``days`` (1 to 365, 90 by default). The answer carries the token,
  once: only its session is kept, never the token. At most
  ``MAX_API_TOKENS`` live tokens a person (409 ``conflict``).
- ``GET /api/me/tokens``: the caller's live tokens (name, made, expires,
  last used), newest first; never the token itself.
- ``DELETE /api/me/tokens/{id}``: revoke one (404 for an id that is not one
  of the caller's live tokens). It is refused at once on every gateway.

An API token is a session (``gateway.sessions``) begun by ``api_token``
and named by its ``label``: it is checked like any session, ended with the
person's sessions by a password change, an administrator's "sign out
everywhere" or a disable, and never renewed (its claims say ``kind:
"api"``), so it lives exactly as long as it was made for. It is not among
the sign-in sessions of ``GET /api/me/sessions``, and "end all others"
leaves it. Making and revoking one are recorded in the audit log.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import Field, field_validator

from gateway import sessions
from gateway.audit import record as record_audit
from gateway.errors import GatewayError, not_found
from gateway.http import Body, Ctx, User
from protocol import ErrorCode
from store.audit import AuditAction
from store.sessions import SessionRecord, SignIn

router = APIRouter()

MAX_API_TOKENS = 20
MAX_TOKEN_DAYS = 365
MAX_TOKEN_NAME = 80


class TokenBody(Body):
    name: Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_NAME)]
    days: Annotated[int, Field(ge=1, le=MAX_TOKEN_DAYS)] = 90

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        name = " ".join(value.split())
        if not name:
            raise ValueError("a token needs a name (what will use it)")
        return name


def token_view(record: SessionRecord) -> dict[str, Any]:
    """An API token as the owner sees it listed: never the token itself."""
    return {
        "id": record.id,
        "name": record.label,
        "created": record.created,
        "expires": record.expires,
        "lastUsed": record.last_seen,
    }


async def _live_tokens(ctx: Ctx, user: str) -> list[SessionRecord]:
    store = await ctx.runtime.store()
    live = await store.user_sessions(user, time.time())
    return [s for s in live if s.how is SignIn.API_TOKEN]


@router.post("/api/me/tokens", status_code=201)
async def make_token(body: TokenBody, request: Request, user: User, ctx: Ctx) -> dict[str, Any]:
    """A new API token for the caller; the answer is the only place the token appears."""
    if len(await _live_tokens(ctx, user)) >= MAX_API_TOKENS:
        raise GatewayError(
            ErrorCode.CONFLICT,
            f"you have {MAX_API_TOKENS} API tokens already: revoke one first",
            detail={"reason": "too_many_tokens", "limit": MAX_API_TOKENS},
        )
    store = await ctx.runtime.store()
    begun = await sessions.begin(
        store,
        ctx.settings,
        user,
        request,
        SignIn.API_TOKEN,
        ttl=timedelta(days=body.days),
        label=body.name,
    )
    made = await store.get_session(sessions.session_id(begun.claims))
    assert made is not None  # recorded just now
    detail = {"name": body.name, "days": body.days}
    await record_audit(store, AuditAction.API_TOKEN_CREATED, actor=user, target=user, detail=detail)
    return {"token": begun.token, **token_view(made)}


@router.get("/api/me/tokens")
async def my_tokens(user: User, ctx: Ctx) -> dict[str, Any]:
    """The caller's live API tokens, newest first."""
    return {"tokens": [token_view(t) for t in await _live_tokens(ctx, user)]}


@router.delete("/api/me/tokens/{token_id}", status_code=204)
async def revoke_token(token_id: str, user: User, ctx: Ctx) -> None:
    """Revoke one of the caller's API tokens, on every gateway at once."""
    found = [t for t in await _live_tokens(ctx, user) if t.id == token_id]
    store = await ctx.runtime.store()
    if not found or not await sessions.end(store, user, [token_id]):
        raise not_found("API token")
    detail = {"name": found[0].label}
    await record_audit(store, AuditAction.API_TOKEN_REVOKED, actor=user, target=user, detail=detail)
