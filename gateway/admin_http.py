"""Administrators' HTTP routes: the login lockouts in force, and lifting one.

- ``GET /api/admin/lockouts``: every locked account, until when, and the
  addresses refused for it; and the addresses locked out of every account
  (too many failures over many names);
- ``DELETE /api/admin/lockouts/{username}``: forget the account's failed
  logins and lift its lockout. The counts are in the store, so this lifts
  it on every gateway at once.

- ``GET /api/admin/users?q=``: every account (or those whose name or
  display name holds ``q``), with its instance role, whether it is
  disabled and until when it is locked out;
- ``PUT /api/admin/users/{username}/role {role}``: make an account an
  administrator or a member (``gateway.roles``; the last administrator
  cannot be demoted: 409 ``conflict``). It takes effect on every gateway at
  once: every administrator's route reads the role from the store;
- ``PUT /api/admin/users/{username}/disabled {disabled}``: disable an
  account or let it back in (``gateway.disabling``: its sessions end, its
  tokens are refused and its WebSockets close on every gateway); nobody
  disables themselves (409 ``conflict``);
- ``DELETE /api/admin/users/{username}/sessions``: sign the person out
  everywhere (``{username, ended}``); their WebSockets close with 4401.

Every change is recorded in the audit log (``gateway.audit``).

Administrators are the accounts whose role is ``admin`` (``gateway.roles``);
anyone else signed in gets 403 ``forbidden``, no session 401, an unknown
user 404 ``not_found``. The rules of the lockout are ``gateway.lockout``'s.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from gateway import disabling, sessions
from gateway.accounts import unlock_user
from gateway.audit import record as record_audit
from gateway.errors import GatewayError, not_found
from gateway.http import Ctx, User
from gateway.roles import Role, require_admin, role_of, set_role
from gateway.settings import GatewaySettings
from gateway.users import UserError, taken_names
from protocol import ErrorCode
from store.audit import AuditAction
from store.disabled import DisabledMark
from store.logins import AddressLock

router = APIRouter()


class View(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True
    )


class LockedAddress(View):
    address: str
    # Epoch seconds.
    until: float


class LockedAccount(View):
    # The account's name as stored; as it was typed (lowercased) when no
    # such account exists (someone guessing names).
    username: str
    exists: bool
    until: float
    addresses: list[LockedAddress]


class LockoutList(View):
    accounts: list[LockedAccount]
    # Locked out of every account, for failing over many names.
    addresses: list[LockedAddress]


class LockoutLifted(View):
    username: str
    # False when the account was not locked (nothing changed).
    was_locked: bool


async def admin(user: User, ctx: Ctx) -> str:
    """The signed-in user, when an administrator (403 ``forbidden`` otherwise)."""
    await require_admin(await ctx.runtime.store(), ctx.settings, user, "use the admin routes")
    return user


Admin = Annotated[str, Depends(admin)]


def _addresses(locks: tuple[AddressLock, ...] | list[AddressLock]) -> list[LockedAddress]:
    return [LockedAddress(address=lock.address, until=lock.until) for lock in locks]


@router.get("/api/admin/lockouts")
async def list_lockouts(user: Admin, ctx: Ctx) -> LockoutList:
    """The login lockouts in force (administrators only)."""
    store = await ctx.runtime.store()
    found = await ctx.logins.lockouts(store)
    names = await taken_names(store)
    return LockoutList(
        accounts=[
            LockedAccount(
                username=names.get(lock.username, lock.username),
                exists=lock.username in names,
                until=lock.until,
                addresses=_addresses(lock.addresses),
            )
            for lock in found.accounts
        ],
        addresses=_addresses(found.addresses),
    )


@router.delete("/api/admin/lockouts/{username}")
async def lift_lockout(username: str, user: Admin, ctx: Ctx) -> LockoutLifted:
    """Lift an account's login lockout on every gateway (administrators only)."""
    store = await ctx.runtime.store()
    try:
        was_locked = await unlock_user(store, username)
    except UserError as exc:
        raise not_found("user") from exc
    detail = {"wasLocked": was_locked}
    action = AuditAction.LOCKOUT_LIFTED
    await record_audit(store, action, actor=user, target=username, detail=detail)
    return LockoutLifted(username=username, was_locked=was_locked)


class Person(View):
    username: str
    display_name: str
    role: Role
    # Epoch seconds; None for accounts made before it was recorded.
    created_at: float | None = None
    # Signs in with the identity provider (no password of its own).
    provider: bool = False
    disabled: bool = False
    # When and by whom it was disabled (None: not disabled; by: the command line).
    disabled_at: float | None = None
    disabled_by: str | None = None
    # Epoch seconds: the account's login lockout in force (None: not locked).
    locked_until: float | None = None


class PeopleList(View):
    people: list[Person]


class RoleBody(View):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )
    role: Role


class DisabledBody(View):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )
    disabled: bool


class SignedOut(View):
    username: str
    # How many live sessions were ended.
    ended: int


def _person(
    record: dict[str, Any],
    settings: GatewaySettings,
    mark: DisabledMark | None = None,
    locked_until: float | None = None,
) -> Person:
    created = record.get("createdAt")
    return Person(
        username=str(record["username"]),
        display_name=str(record.get("displayName") or record["username"]),
        role=role_of(record, settings),
        created_at=float(created) if isinstance(created, int | float) else None,
        provider="identity" in record,
        disabled=mark is not None,
        disabled_at=mark.at if mark else None,
        disabled_by=mark.by if mark else None,
        locked_until=locked_until,
    )


async def _one(ctx: Ctx, username: str) -> Person:
    """One account as the list shows it (404 when there is none)."""
    store = await ctx.runtime.store()
    record = await store.get_user(username)
    if record is None:
        raise not_found("user")
    locks = {lock.username: lock.until for lock in (await ctx.logins.lockouts(store)).accounts}
    mark = await store.disabled_mark(username)
    return _person(record, ctx.settings, mark, locks.get(username.lower()))


def _matches(record: dict[str, Any], q: str) -> bool:
    words = f"{record.get('username', '')} {record.get('displayName') or ''}".casefold()
    return q.casefold() in words


@router.get("/api/admin/users")
async def list_people(
    user: Admin, ctx: Ctx, q: Annotated[str, Query(max_length=200)] = ""
) -> PeopleList:
    """Every account (``q``: those whose name or display name holds it), administrators only."""
    store = await ctx.runtime.store()
    records = [r for r in await store.list_users() if _matches(r, q.strip())]
    marks = {m.username: m for m in await store.disabled_accounts()}
    locks = {lock.username: lock.until for lock in (await ctx.logins.lockouts(store)).accounts}
    people = [
        _person(r, ctx.settings, marks.get(r["username"]), locks.get(str(r["username"]).lower()))
        for r in records
    ]
    return PeopleList(people=people)


@router.put("/api/admin/users/{username}/role")
async def change_role(username: str, body: RoleBody, user: Admin, ctx: Ctx) -> Person:
    """Make an account an administrator or a member; the instance keeps one administrator."""
    store = await ctx.runtime.store()
    before = await store.get_user(username)
    disabled = {m.username for m in await store.disabled_accounts()}
    await set_role(store, ctx.settings, username, body.role, disabled)
    detail = {"scope": "instance", "role": body.role.value}
    if before is not None:
        detail["previousRole"] = role_of(before, ctx.settings).value
    await record_audit(store, AuditAction.ROLE_CHANGED, actor=user, target=username, detail=detail)
    return await _one(ctx, username)


@router.put("/api/admin/users/{username}/disabled")
async def change_disabled(username: str, body: DisabledBody, user: Admin, ctx: Ctx) -> Person:
    """Disable an account (it is signed out everywhere at once) or let it back in."""
    store = await ctx.runtime.store()
    if body.disabled and username == user:
        raise GatewayError(
            ErrorCode.CONFLICT,
            "you cannot disable your own account: ask another administrator",
            detail={"reason": "self"},
        )
    try:
        if body.disabled:
            await disabling.disable(store, username, user)
        else:
            await disabling.enable(store, username, user)
    except UserError as exc:
        raise not_found("user") from exc
    return await _one(ctx, username)


@router.delete("/api/admin/users/{username}/sessions")
async def sign_out_everywhere(username: str, user: Admin, ctx: Ctx) -> SignedOut:
    """End every session of ``username``: their tokens are refused, their sockets close."""
    store = await ctx.runtime.store()
    if await store.get_user(username) is None:
        raise not_found("user")
    ended = await sessions.end(store, username, None)
    detail = {"ended": len(ended), "byAdmin": True}
    await record_audit(
        store, AuditAction.SESSIONS_ENDED, actor=user, target=username, detail=detail
    )
    return SignedOut(username=username, ended=len(ended))
