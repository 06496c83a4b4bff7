"""Administrators' HTTP routes: the login lockouts in force, and lifting one.

- ``GET /api/admin/lockouts``: every locked account, until when, and the
  addresses refused for it; and the addresses locked out of every account
  (too many failures over many names);
- ``DELETE /api/admin/lockouts/{username}``: forget the account's failed
  logins and lift its lockout. The counts are in the store, so this lifts
  it on every gateway at once.

Administrators are the names in ``YEAFT_ADMINS`` (as for the MCP servers);
anyone else signed in gets 403 ``forbidden``, no session 401, an unknown
user 404 ``not_found``. The rules of the lockout are ``gateway.lockout``'s.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from gateway.accounts import unlock_user
from gateway.audit import record
from gateway.context import GatewayContext
from gateway.errors import GatewayError, not_found
from gateway.http import Ctx, User
from gateway.users import UserError
from protocol.common import ErrorCode
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


def require_admin(user: str, ctx: GatewayContext, what: str = "manage login lockouts") -> None:
    if user not in ctx.settings.admin_names():
        raise GatewayError(ErrorCode.FORBIDDEN, f"only an administrator (YEAFT_ADMINS) may {what}")


def _addresses(locks: tuple[AddressLock, ...] | list[AddressLock]) -> list[LockedAddress]:
    return [LockedAddress(address=lock.address, until=lock.until) for lock in locks]


@router.get("/api/admin/lockouts")
async def list_lockouts(user: User, ctx: Ctx) -> LockoutList:
    """The login lockouts in force (administrators only)."""
    require_admin(user, ctx)
    store = await ctx.runtime.store()
    found = await ctx.logins.lockouts(store)
    names = {str(u["username"]).lower(): str(u["username"]) for u in await store.list_users()}
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
async def lift_lockout(username: str, user: User, ctx: Ctx) -> LockoutLifted:
    """Lift an account's login lockout on every gateway (administrators only)."""
    require_admin(user, ctx)
    store = await ctx.runtime.store()
    try:
        was_locked = await unlock_user(store, username)
    except UserError as exc:
        raise not_found("user") from exc
    detail = {"wasLocked": was_locked}
    await record(store, AuditAction.LOCKOUT_LIFTED, actor=user, target=username, detail=detail)
    return LockoutLifted(username=username, was_locked=was_locked)
