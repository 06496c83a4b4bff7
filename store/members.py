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

from dataclasses import dataclass
from enum import StrEnum

DIRECTORY_LOG = "~directory"
"""The event log gateway processes share for changes beyond one group's own log.

Not a group id (``~`` is not allowed in one), so no client can name it.
"""


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
