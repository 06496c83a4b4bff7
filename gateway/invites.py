"""Invite links: who may make one, what a link is, and checking and counting a followed one.

A link is ``<base>/invite/<id>.<secret>``: ``id`` names the invite in the
store (``store.invites``), ``secret`` is 32 random bytes (URL-safe base64)
of which the store keeps only a SHA-256 hash. The secret is shown once, in
the answer that made the invite, and never logged (``gateway.log_filters``
hides ``/invite/...`` paths and ``invite=`` values); a link whose secret
does not hash to the stored one is refused like one that names no invite
(``invalid``), so a tampered link learns nothing.

Who may make one: an administrator, for a new account or for any group;
with ``YEAFT_OWNER_INVITES``, a group's owner for their own group.

Following a link (``gateway.invites_http``, ``gateway.oidc_http``):
:func:`check` looks without counting; :func:`redeem` counts one use in the
store's atomic step; :func:`join` adds the person to the invite's group
(a person who is in it already costs no use). Refusals are
:class:`InviteRefused`: ``invalid`` (404 ``not_found``), ``revoked``,
``expired``, ``used_up`` and ``group_gone`` (409 ``conflict``), the reason
in ``detail.reason`` and a sentence a person can act on.

Open self-registration stays off: over HTTP an account is only made by
following a valid link (or by a first OpenID sign-in, ``gateway.oidc_http``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from enum import StrEnum

from gateway.audit import record
from gateway.errors import GatewayError, not_found
from gateway.groups import GroupService
from gateway.roles import is_admin
from gateway.settings import GatewaySettings
from protocol import ErrorCode
from protocol.common import is_id
from store.audit import AuditAction
from store.base import Store, new_id
from store.conversation import GroupKind
from store.invites import InviteLog, InviteRecord, InviteState
from store.membership import owner_of

MIN_TTL_S = 60
MAX_TTL_S = 30 * 86_400
DEFAULT_TTL_S = 7 * 86_400
MAX_USES = 1000
SECRET_BYTES = 32
LINK_PATH = "/invite/"

_TOKEN = re.compile(r"(inv_[0-9a-f]{8,48})\.([A-Za-z0-9_-]{32,64})")


class InviteProblem(StrEnum):
    """Why a followed link is refused (``detail.reason``)."""

    INVALID = "invalid"
    REVOKED = "revoked"
    EXPIRED = "expired"
    USED_UP = "used_up"
    GROUP_GONE = "group_gone"


MESSAGES = {
    InviteProblem.INVALID: "this invite link is not valid: check that it was copied whole, "
    "or ask for a new one",
    InviteProblem.REVOKED: "this invite link was withdrawn: ask whoever sent it for a new one",
    InviteProblem.EXPIRED: "this invite link has expired: ask whoever sent it for a new one",
    InviteProblem.USED_UP: "this invite link has been used as many times as it may be: "
    "ask whoever sent it for a new one",
    InviteProblem.GROUP_GONE: "the group this invite link was for no longer exists",
}

_PROBLEMS = {
    InviteState.UNKNOWN: InviteProblem.INVALID,
    InviteState.REVOKED: InviteProblem.REVOKED,
    InviteState.EXPIRED: InviteProblem.EXPIRED,
    InviteState.USED_UP: InviteProblem.USED_UP,
}


class InviteRefused(GatewayError):
    """A followed link that cannot be used; ``problem`` says why."""

    def __init__(self, problem: InviteProblem) -> None:
        code = ErrorCode.NOT_FOUND if problem is InviteProblem.INVALID else ErrorCode.CONFLICT
        super().__init__(code, MESSAGES[problem], detail={"reason": problem.value})
        self.problem = problem


def secret_hash(secret: str) -> str:
    """What the store keeps of a secret: its SHA-256, in hex."""
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def new_token() -> tuple[str, str, str]:
    """A new invite's ``(id, secret hash, token)``; the token is ``<id>.<secret>``."""
    invite_id = new_id("inv")
    secret = secrets.token_urlsafe(SECRET_BYTES)
    return invite_id, secret_hash(secret), f"{invite_id}.{secret}"


def split_token(token: str) -> tuple[str, str] | None:
    """``(id, secret)`` of a well-formed token; None for anything else."""
    match = _TOKEN.fullmatch(token.strip()) if isinstance(token, str) else None
    return (match.group(1), match.group(2)) if match else None


def link(base_url: str, token: str) -> str:
    """The link a person follows (``base_url``: the public address of the server)."""
    return base_url.rstrip("/") + LINK_PATH + token


async def may_make(
    store: Store, settings: GatewaySettings, username: str, group_id: str | None
) -> None:
    """Refuse ``username`` making an invite (for ``group_id``) unless the rules allow it.

    An administrator may invite to any group that exists; a group's owner to
    their own group when ``YEAFT_OWNER_INVITES`` is on; nobody else. A group
    the caller is not in (and that does not exist) is ``not_found``, as
    everywhere.
    """
    admin = await is_admin(store, settings, username)
    if group_id is None:
        if not admin:
            raise GatewayError(
                ErrorCode.FORBIDDEN,
                "only an administrator may make an invite link for a new account",
            )
        return
    group = await store.get_group(group_id) if is_id(group_id) else None
    if group is None or group.kind is not GroupKind.GROUP:
        raise not_found("group")
    if admin:
        return
    if username not in group.members:
        raise not_found("group")
    if owner_of(group) != username:
        raise GatewayError(
            ErrorCode.FORBIDDEN,
            f"only the group's owner ({owner_of(group)}) or an administrator may make invite links",
            detail={"reason": "not_owner"},
        )
    if not settings.owner_invites:
        raise GatewayError(
            ErrorCode.FORBIDDEN,
            "on this server only administrators make invite links (YEAFT_OWNER_INVITES is off)",
            detail={"reason": "owner_invites_off"},
        )


async def make(
    store: InviteLog,
    username: str,
    *,
    ttl_s: int,
    max_uses: int,
    group_id: str | None,
    now: float,
) -> tuple[InviteRecord, str]:
    """Store a new invite (the caller checked :func:`may_make`); it and its token."""
    invite_id, hashed, token = new_token()
    invite = InviteRecord(
        id=invite_id,
        secret_hash=hashed,
        created_by=username,
        created_at=now,
        expires_at=now + ttl_s,
        max_uses=max_uses,
        group_id=group_id,
    )
    await store.create_invite(invite)
    return invite, token


async def check(store: Store, token: str, now: float) -> InviteRecord:
    """The invite ``token`` names, if it may be used at ``now``; counts nothing."""
    parts = split_token(token)
    invite = await store.get_invite(parts[0]) if parts else None
    if parts is None or invite is None:
        raise InviteRefused(InviteProblem.INVALID)
    if not hmac.compare_digest(secret_hash(parts[1]), invite.secret_hash):
        raise InviteRefused(InviteProblem.INVALID)
    state = invite.state(now)
    if state is not InviteState.VALID:
        raise InviteRefused(_PROBLEMS[state])
    if invite.group_id is not None:
        group = await store.get_group(invite.group_id)
        if group is None or group.kind is not GroupKind.GROUP:
            raise InviteRefused(InviteProblem.GROUP_GONE)
    return invite


async def redeem(store: InviteLog, invite: InviteRecord, now: float) -> InviteRecord:
    """Count one use of ``invite`` (atomic in the store); refused when none is left."""
    done = await store.redeem_invite(invite.id, now)
    if not done.redeemed or done.invite is None:
        raise InviteRefused(_PROBLEMS.get(done.state, InviteProblem.INVALID))
    return done.invite


async def join(
    store: Store,
    groups: GroupService,
    username: str,
    invite: InviteRecord,
    now: float,
    *,
    new_account: bool,
) -> bool:
    """Count the invite for ``username`` and put them in its group; whether a use was counted.

    Someone in the group already joins nothing and costs no use; an invite
    without a group counts a use only for a new account. Recorded in the
    audit log (``invite_redeemed``).
    """
    group_id = invite.group_id
    if group_id is None and not new_account:
        return False
    if group_id is not None:
        group = await store.get_group(group_id)
        if group is None or group.kind is not GroupKind.GROUP:
            raise InviteRefused(InviteProblem.GROUP_GONE)
        if username in group.members:
            return False
    await redeem(store, invite, now)
    if group_id is not None:
        try:
            await groups.join(username, group_id, invite.id)
        except Exception:
            await store.release_invite(invite.id)
            raise
    await redeemed(store, username, invite, new_account=new_account)
    return True


async def redeemed(store: Store, username: str, invite: InviteRecord, *, new_account: bool) -> None:
    """``invite_redeemed`` in the audit log: by the person, on the invite."""
    detail: dict[str, object] = {"newAccount": new_account, "createdBy": invite.created_by}
    if invite.group_id is not None:
        detail["groupId"] = invite.group_id
    await record(
        store, AuditAction.INVITE_REDEEMED, actor=username, target=invite.id, detail=detail
    )
