"""Administrators' HTTP routes: the login lockouts in force, and lifting one.

- ``GET /api/admin/lockouts``: every locked account, until when, and the
  addresses refused for it; and the addresses locked out of every account
  (too many failures over many names);
- ``DELETE /api/admin/lockouts/{username}``: forget the account's failed
  logins and lift its lockout. The counts are in the store, so this lifts
  it on every gateway at once.

- ``GET /api/admin/users``: every account and its instance role;
- ``PUT /api/admin/users/{username}/role {role}``: make an account an
  administrator or a member (``gateway.roles``; the last administrator
  cannot be demoted: 409 ``conflict``).

Administrators are the accounts whose role is ``admin`` (``gateway.roles``);
anyone else signed in gets 403 ``forbidden``, no session 401, an unknown
user 404 ``not_found``. The rules of the lockout are ``gateway.lockout``'s.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from gateway.accounts import unlock_user
from gateway.audit import record as record_audit
from gateway.errors import not_found
from gateway.http import Ctx, User
from gateway.roles import Role, require_admin, role_of, set_role
from gateway.settings import GatewaySettings
from gateway.users import UserError, taken_names
from store.audit import AuditAction
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


class PeopleList(View):
    people: list[Person]


class RoleBody(View):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )
    role: Role


def _person(record: dict[str, Any], settings: GatewaySettings) -> Person:
    created = record.get("createdAt")
    return Person(
        username=str(record["username"]),
        display_name=str(record.get("displayName") or record["username"]),
        role=role_of(record, settings),
        created_at=float(created) if isinstance(created, int | float) else None,
        provider="identity" in record,
    )


@router.get("/api/admin/users")
async def list_people(user: Admin, ctx: Ctx) -> PeopleList:
    """Every account with its instance role (administrators only)."""
    records = await (await ctx.runtime.store()).list_users()
    return PeopleList(people=[_person(r, ctx.settings) for r in records])


@router.put("/api/admin/users/{username}/role")
async def change_role(username: str, body: RoleBody, user: Admin, ctx: Ctx) -> Person:
    """Make an account an administrator or a member; the instance keeps one administrator."""
    store = await ctx.runtime.store()
    before = await store.get_user(username)
    record = await set_role(store, ctx.settings, username, body.role)
    detail = {"scope": "instance", "role": body.role.value}
    if before is not None:
        detail["previousRole"] = role_of(before, ctx.settings).value
    await record_audit(store, AuditAction.ROLE_CHANGED, actor=user, target=username, detail=detail)
    return _person(record, ctx.settings)
