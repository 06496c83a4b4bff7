"""Who is in a group and who owns it: one change at a time, checked against the stored record.

A :class:`MemberChange` is applied by the store to the group record as it is
*in the store*, inside one atomic step (a write transaction on SQLite, an
optimistic WATCH/MULTI transaction on Redis): two changes made at the same
instant by two people, or by two processes, both land, one after the other,
and each is checked against the record the other left. The rules live here,
in :func:`apply_change`, so both backends enforce the same ones:

- the owner is always a member; a group without a recorded owner (made before
  owners existed) is owned by its first member;
- the owner cannot be removed or leave while others remain: ownership is
  transferred first; the last member cannot leave at all (delete the group);
- ownership goes only to a member; removing someone who is not a member is
  refused (``NOT_MEMBER``), adding a member twice is harmless.

``PresenceStore`` is the small role behind "who is online": each gateway
process records the users it serves with an expiry and renews it, so a
process that dies stops counting once its entries expire.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from store.base import Group


class MemberErrorCode(StrEnum):
    """Why a member change was refused."""

    NOT_MEMBER = "not_member"
    """The user to remove, or to make owner, is not a member."""
    OWNER_LEAVING = "owner_leaving"
    """The owner tried to leave (or be removed) while others remain."""
    LAST_MEMBER = "last_member"
    """The only member tried to leave: the group would have nobody."""


class MemberError(Exception):
    """A member change broke a rule of :func:`apply_change`; the record is unchanged."""

    def __init__(self, code: MemberErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = MemberErrorCode(code)
        self.message = message

    def __reduce__(self) -> tuple[type[MemberError], tuple[MemberErrorCode, str]]:
        return (MemberError, (self.code, self.message))


@dataclass(frozen=True, slots=True)
class MemberChange:
    """Users to add, users to remove, and who becomes owner (None: unchanged)."""

    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    owner: str | None = None


def owner_of(group: Group) -> str | None:
    """The group's owner: the recorded one, else its first member (older records)."""
    if group.owner is not None:
        return group.owner
    return group.members[0] if group.members else None


def apply_change(group: Group, change: MemberChange) -> Group:
    """``group`` with ``change`` applied, or MemberError; ``group`` itself is left as is."""
    members = list(group.members)
    owner = owner_of(group)
    for user in change.add:
        if user not in members:
            members.append(user)
    for user in change.remove:
        if user not in members:
            raise MemberError(MemberErrorCode.NOT_MEMBER, f"{user} is not a member of this group")
        members.remove(user)
    if change.owner is not None:
        if change.owner not in members:
            raise MemberError(
                MemberErrorCode.NOT_MEMBER,
                f"{change.owner} is not a member of this group: invite them first",
            )
        owner = change.owner
    if not members:
        raise MemberError(
            MemberErrorCode.LAST_MEMBER,
            "the last member cannot leave a group: delete the group instead",
        )
    if owner is not None and owner not in members:
        raise MemberError(
            MemberErrorCode.OWNER_LEAVING,
            f"{owner} owns this group: transfer ownership to another member before leaving",
        )
    return group.model_copy(update={"members": members, "owner": owner})


def group_view(group: Group) -> dict[str, Any]:
    """A group as clients see it (camelCase, like every wire name)."""
    return {
        "id": group.id,
        "name": group.name,
        "roster": list(group.roster),
        "defaultVpId": group.default_vp,
        "members": list(group.members),
        "owner": owner_of(group),
        "settings": group.settings.model_dump(mode="json", by_alias=True),
        "createdAt": group.created_at,
    }


class MemberStore(Protocol):
    """Atomic member changes of a group record."""

    @abstractmethod
    async def change_members(self, group_id: str, change: MemberChange) -> Group:
        """Apply ``change`` to the stored record in one atomic step; returns the new record.

        Raises NotFound when the group does not exist and MemberError when the
        change breaks a rule (then nothing is written).
        """


class PresenceStore(Protocol):
    """Who is connected, per gateway process, with an expiry."""

    @abstractmethod
    async def mark_online(self, users: Iterable[str], node: str, ttl_s: float) -> None:
        """Record (or renew) that ``node`` serves ``users`` for the next ``ttl_s`` seconds."""

    @abstractmethod
    async def mark_offline(self, user: str, node: str) -> None:
        """``node`` no longer serves ``user``."""

    @abstractmethod
    async def online(self, users: Iterable[str]) -> set[str]:
        """Those of ``users`` some node serves now (entries not yet expired)."""
