"""Instance roles: ``admin`` and ``member``, stored with each account.

An account's role is the ``role`` of its user record. An account without
one (made before roles existed, or by ``yeaft user add``) is an admin when
its name is in ``YEAFT_ADMINS`` and a member otherwise: the setting seeds
roles, and a role set since (``set_role``, ``PUT
/api/admin/users/{name}/role``) wins over it. An account made by a first
OpenID sign-in is given its role then, from ``YEAFT_OIDC_ADMIN_CLAIM``.
Group roles (owner, member) are the group's and unchanged.

:func:`require_admin` is the one check every administrator's route makes;
the instance keeps at least one administrator (the last one cannot be
demoted).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any

from gateway.errors import GatewayError
from gateway.settings import GatewaySettings
from protocol import ErrorCode
from store.base import UserStore

ROLE_FIELD = "role"


class Role(StrEnum):
    ADMIN = "admin"
    MEMBER = "member"


def role_of(user: Mapping[str, Any], settings: GatewaySettings) -> Role:
    """The role of an account's record: its own, or the one ``YEAFT_ADMINS`` seeds."""
    stored = user.get(ROLE_FIELD)
    if stored in (Role.ADMIN, Role.MEMBER):
        return Role(stored)
    return Role.ADMIN if user.get("username") in settings.admin_names() else Role.MEMBER


async def is_admin(store: UserStore, settings: GatewaySettings, username: str) -> bool:
    user = await store.get_user(username)
    return user is not None and role_of(user, settings) is Role.ADMIN


async def require_admin(
    store: UserStore, settings: GatewaySettings, username: str, what: str
) -> None:
    """Refuse (403 ``forbidden``) anyone but an administrator; ``what`` says what they tried."""
    if not await is_admin(store, settings, username):
        raise GatewayError(ErrorCode.FORBIDDEN, f"only an administrator may {what}")


async def set_role(
    store: UserStore,
    settings: GatewaySettings,
    username: str,
    role: Role,
    disabled: Collection[str] = (),
) -> dict[str, Any]:
    """Give ``username`` ``role``; the new record. Keeps at least one administrator.

    ``disabled`` accounts do not count as the administrator that remains.
    """
    user = await store.get_user(username)
    if user is None:
        raise GatewayError(ErrorCode.NOT_FOUND, f"no user {username!r}")
    if role is Role.MEMBER and role_of(user, settings) is Role.ADMIN:
        admins = [
            u
            for u in await store.list_users()
            if role_of(u, settings) is Role.ADMIN
            and (u.get("username") == username or u.get("username") not in disabled)
        ]
        if len(admins) <= 1:
            raise GatewayError(
                ErrorCode.CONFLICT,
                f"{username} is the only administrator: make someone else one first",
            )
    record = {**user, ROLE_FIELD: role.value}
    await store.put_user(record)
    return record


def claim_grants_admin(claims: Mapping[str, Any], rule: str | None) -> bool:
    """Whether an ID token's ``claims`` meet ``YEAFT_OIDC_ADMIN_CLAIM``.

    ``name=value``: the claim is ``value`` or a list holding it (``groups=ops``);
    ``name`` alone: the claim is ``true``.
    """
    if not rule:
        return False
    name, sep, wanted = rule.partition("=")
    value = claims.get(name.strip())
    if not sep:
        return value is True
    wanted = wanted.strip()
    if isinstance(value, list):
        return wanted in value
    return value == wanted
