"""The sign-in routes of an OpenID Connect provider, and the account a sign-in lands in.

``GET /api/auth/providers`` tells the login page what to offer.
``GET /api/auth/oidc/login`` sends the browser to the provider, with the
sign-in's ``state``, ``nonce`` and PKCE verifier in a signed cookie of ten
minutes (``SameSite=Lax``: the provider's redirect back is a cross-site
navigation). ``GET /api/auth/oidc/callback`` checks the ``state``,
exchanges the code, checks the ID token (``gateway.oidc``), finds or makes
the person's account and sets the session cookie, as a password login does.
The cookie is cleared on the way back, so a code or a callback replayed
later finds no sign-in to finish.

A sign-in may begin from an invite link (``?invite=<token>``): the link is
checked then, and its id rides in the signed cookie (never its secret).
When the person comes back, the invite is counted and they join its group
(``gateway.invites.join``); a link that ran out meanwhile still lets them
in, with a page that says the invite could not be used.

The first sign-in of a person makes their account (just in time), linked
by the provider's issuer and subject (``UserStore.link_identity``), never
by a name or an e-mail someone could choose: the account's name is taken
from the preferred username or the e-mail, made unique, and later sign-ins
find the account by the link whatever the provider then calls them. With
``YEAFT_OIDC_ALLOWED_DOMAINS`` only verified e-mails of those domains get in.
The new account's instance role is ``admin`` when the ID token meets
``YEAFT_OIDC_ADMIN_CLAIM``, ``member`` otherwise (``gateway.roles``).

Failures are pages a person can read (what went wrong, a link back to the
login), never a traceback: 400 for a sign-in that cannot be finished, 403
for a person who may not sign in here (a domain not allowed, a disabled
account), 502 when the provider cannot be
reached.
"""

from __future__ import annotations

import html
import logging
import re
import time
from dataclasses import replace
from typing import Annotated, Any, Protocol

import jwt as pyjwt
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gateway import invites, sessions
from gateway.audit import record
from gateway.context import GatewayContext
from gateway.errors import GatewayError
from gateway.http import Ctx, set_session_cookie
from gateway.invites import InviteProblem, InviteRefused
from gateway.oidc import Identity, OidcClient, OidcError, PendingSignIn
from gateway.roles import ROLE_FIELD, Role, claim_grants_admin
from gateway.settings import GatewaySettings
from gateway.users import USERNAME_RE, taken_names
from store.audit import AuditAction
from store.base import Store, UserStore
from store.disabled import DisabledAccounts
from store.sessions import SignIn

log = logging.getLogger(__name__)
router = APIRouter()

PENDING_COOKIE = "yeaft_oidc"
CALLBACK_PATH = "/api/auth/oidc/callback"
_PENDING_AUDIENCE = "yeaft-oidc-pending"
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def oidc_client(ctx: GatewayContext) -> OidcClient | None:
    """The configured provider's client (made once per gateway), or None."""
    settings = ctx.settings
    if not settings.oidc_issuer or settings.oidc_client_secret is None:
        return None
    if ctx.oidc is None:
        ctx.oidc = OidcClient(
            settings.oidc_issuer,
            settings.oidc_client_id or "",
            settings.oidc_client_secret.get_secret_value(),
        )
    return ctx.oidc


@router.get("/api/auth/providers")
async def providers(ctx: Ctx) -> dict[str, Any]:
    """What the login page offers: the provider, if one is configured, and passwords."""
    settings = ctx.settings
    oidc = None
    if oidc_client(ctx) is not None:
        oidc = {"name": settings.oidc_name, "url": "/api/auth/oidc/login"}
    return {"oidc": oidc, "password": not (oidc and settings.oidc_only)}


@router.get("/api/auth/oidc/login")
async def oidc_login(
    request: Request,
    ctx: Ctx,
    invite: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """Send the browser to the provider's sign-in (``invite``: a link it began from)."""
    client = oidc_client(ctx)
    if client is None:
        return _page(404, "No sign-in provider is configured on this server.")
    pending = PendingSignIn.new(time.time())
    if invite:
        try:
            found = await invites.check(await ctx.runtime.store(), invite, time.time())
        except InviteRefused as exc:
            return _page(404 if exc.problem is InviteProblem.INVALID else 410, exc.message)
        pending = replace(pending, invite=found.id)
    try:
        url = await client.authorization_url(_callback_url(request, ctx), pending)
    except OidcError as exc:
        return _failed(exc)
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(
        PENDING_COOKIE,
        _seal(ctx, pending),
        max_age=int(pending.expires_at - time.time()),
        httponly=True,
        secure=ctx.settings.cookie_secure,
        samesite="lax",
        path="/api/auth/oidc",
    )
    return response


@router.get(CALLBACK_PATH)
async def oidc_callback(request: Request, ctx: Ctx) -> Response:
    """Finish a sign-in: check it, find or make the account, start the session."""
    client = oidc_client(ctx)
    if client is None:
        return _page(404, "No sign-in provider is configured on this server.")
    params = request.query_params
    pending = _unseal(ctx, request.cookies.get(PENDING_COOKIE))
    try:
        if params.get("error"):
            said = params.get("error_description") or params["error"]
            raise OidcError(f"the sign-in provider did not sign you in: {said}")
        if pending is None:
            raise OidcError(
                "this sign-in has no match here: it expired, was finished already, or "
                "began in another browser"
            )
        if not params.get("state") or params["state"] != pending.state:
            raise OidcError("this sign-in's state does not match the one it began with")
        code = params.get("code")
        if not code:
            raise OidcError("the sign-in provider sent no code")
        identity = await client.finish(_callback_url(request, ctx), pending, code)
        store = await ctx.runtime.store()
        known = await store.identity_user(identity.key) is not None
        username = await account_for(store, identity, ctx.settings)
    except OidcError as exc:
        detail = {"method": "oidc", "reason": exc.message}
        await record(ctx.runtime, AuditAction.SIGN_IN_FAILED, actor=None, detail=detail)
        response = _failed(exc)
        _clear(response, ctx)
        return response
    ctx.metrics.logins.labels(outcome="success").inc()
    # A page that moves on by itself: the session cookie is SameSite=Strict,
    # which a navigation that began at the provider would not carry.
    response = _page(200, "Signed in.", refresh="/")
    if pending.invite is not None:
        response = await _follow_invite(ctx, store, username, pending.invite, new=not known)
    begun = await sessions.begin(store, ctx.settings, username, request, SignIn.OIDC)
    detail = {"method": "oidc", "issuer": identity.issuer}
    await record(store, AuditAction.SIGN_IN, actor=username, target=username, detail=detail)
    set_session_cookie(response, ctx, begun.token)
    _clear(response, ctx)
    return response


async def _follow_invite(
    ctx: GatewayContext, store: Store, username: str, invite_id: str, new: bool
) -> HTMLResponse:
    """Count the invite the sign-in began from and join its group; the page to answer."""
    invite = await store.get_invite(invite_id)
    try:
        if invite is None:
            raise InviteRefused(InviteProblem.INVALID)
        await invites.join(store, ctx.groups, username, invite, time.time(), new_account=new)
    except GatewayError as exc:
        log.info("an invite followed through the provider could not be used: %s", exc.message)
        return _page(200, f"Signed in, but the invite could not be used: {exc.message}.")
    where = f"/#g={invite.group_id}" if invite.group_id else "/"
    return _page(200, "Signed in.", refresh=where)


class NotAllowed(OidcError):
    """The provider signed the person in, but this server does not let them in."""


class OidcAccounts(UserStore, DisabledAccounts, Protocol):
    """What finding a sign-in's account touches: user records and disabled marks."""


async def account_for(store: OidcAccounts, identity: Identity, settings: GatewaySettings) -> str:
    """The account ``identity`` signs in to, made on its first sign-in."""
    domains = settings.oidc_allowed_domains
    if domains:
        email = identity.email or ""
        domain = email.rpartition("@")[2].lower()
        if not identity.email_verified or domain not in {d.lower() for d in domains}:
            shown = domain or "no e-mail"
            raise NotAllowed(f"people of {shown} may not sign in to this server")
    linked = await store.identity_user(identity.key)
    if linked is not None and await store.get_user(linked) is not None:
        if await store.disabled_mark(linked) is not None:
            raise NotAllowed("this account is disabled: ask an administrator")
        return linked
    if linked is not None:
        raise NotAllowed("the account this sign-in belongs to was removed")
    admin = claim_grants_admin(identity.claims, settings.oidc_admin_claim)
    username = await _new_account(store, identity, Role.ADMIN if admin else Role.MEMBER)
    if not await store.link_identity(identity.key, username):
        # A sign-in of the same person at the same moment linked first.
        other = await store.identity_user(identity.key)
        if other is not None:
            return other
    log.info("account %s made for a first sign-in with %s", username, identity.issuer)
    return username


async def _new_account(store: UserStore, identity: Identity, role: Role) -> str:
    """Make an account for ``identity`` under a free name like the one it goes by."""
    wanted = identity.preferred_username or (identity.email or "").partition("@")[0] or "user"
    base = _NAME_UNSAFE.sub("-", wanted).strip("-.")[:32] or "user"
    taken = await taken_names(store)
    for n in range(1, 1000):
        name = base if n == 1 else f"{base}-{n}"
        if name.lower() in taken or not USERNAME_RE.fullmatch(name):
            continue
        record = {
            "username": name,
            "createdAt": time.time(),
            "displayName": identity.name or name,
            "identity": identity.key,
            ROLE_FIELD: role.value,
        }
        if await store.create_user(record):
            return name
    raise OidcError("no free account name could be found for this sign-in")


def _callback_url(request: Request, ctx: GatewayContext) -> str:
    base = ctx.settings.public_url or str(request.base_url)
    return base.rstrip("/") + CALLBACK_PATH


def _seal(ctx: GatewayContext, pending: PendingSignIn) -> str:
    claims = {
        "aud": _PENDING_AUDIENCE,
        "exp": int(pending.expires_at),
        "state": pending.state,
        "nonce": pending.nonce,
        "verifier": pending.verifier,
    }
    if pending.invite is not None:
        claims["invite"] = pending.invite
    return pyjwt.encode(claims, ctx.settings.jwt_key(), algorithm="HS256")


def _unseal(ctx: GatewayContext, sealed: str | None) -> PendingSignIn | None:
    if not sealed:
        return None
    try:
        claims = pyjwt.decode(
            sealed, ctx.settings.jwt_key(), algorithms=["HS256"], audience=_PENDING_AUDIENCE
        )
    except pyjwt.PyJWTError:
        return None
    return PendingSignIn(
        claims["state"], claims["nonce"], claims["verifier"], claims["exp"], claims.get("invite")
    )


def _clear(response: Response, ctx: GatewayContext) -> None:
    response.delete_cookie(
        PENDING_COOKIE,
        path="/api/auth/oidc",
        httponly=True,
        secure=ctx.settings.cookie_secure,
        samesite="lax",
    )


def _failed(exc: OidcError) -> HTMLResponse:
    status = 502 if exc.provider_down else 403 if isinstance(exc, NotAllowed) else 400
    log.warning("sign-in with the provider failed: %s", exc.message)
    return _page(status, f"Sign-in failed: {exc.message}.")


def _page(status: int, text: str, refresh: str | None = None) -> HTMLResponse:
    """A small page a person can read: what happened, and the way back."""
    head = f'<meta http-equiv="refresh" content="0;url={html.escape(refresh)}">' if refresh else ""
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>Yeaft sign-in</title>{head}</head><body>"
        f'<p data-testid="signin-message">{html.escape(text)}</p>'
        '<p><a href="/">Back to the login</a></p></body></html>'
    )
    return HTMLResponse(body, status_code=status)
