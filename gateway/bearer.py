"""The bearer token at the edges outside ``/api`` (``/mcp``, ``/a2a``): header only.

These edges are called by programs, not pages: the credential is the
``Authorization: Bearer`` header alone (no cookie, no query), checked as
``/api`` checks it (signature, expiry, a disabled account, an ended session,
a password changed since). A refusal is a 401 with ``WWW-Authenticate``,
before the edge's own protocol sees the request.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.accounts import session_user
from gateway.auth import AuthError, find_token, token_claims
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from protocol import ErrorCode


async def bearer_user(ctx: GatewayContext, request: Request) -> str:
    """The person the request's bearer token names; :class:`AuthError` otherwise."""
    token, _ = find_token(request.headers, {}, {})
    claims = token_claims(ctx.settings, token)
    return await session_user(await ctx.runtime.store(), claims)


def unauthorized(exc: AuthError) -> JSONResponse:
    """The 401 for a refused token: the gateway's error body, the reason in its detail."""
    error = GatewayError(ErrorCode.UNAUTHORIZED, exc.message, detail={"reason": exc.reason.value})
    headers = {**error.headers(), "WWW-Authenticate": 'Bearer realm="yeaft"'}
    return JSONResponse(error.to_json(), status_code=401, headers=headers)
