"""Why the coordinator refuses a group operation, as a closed set of codes.

This module imports nothing from Ray (nor anything that does), so the
gateway can import it when it loads: the gateway must configure Ray's
authentication before Ray is first imported.
"""

from __future__ import annotations

from enum import StrEnum


class GroupErrorCode(StrEnum):
    """Every reason a group operation is refused; the gateway maps each to a wire code."""

    NOT_FOUND = "not_found"
    """The group does not exist."""
    CONFLICT = "conflict"
    """A group with that id exists already."""
    DEFAULT_NOT_IN_ROSTER = "default_not_in_roster"
    """The VP chosen to answer unaddressed messages is not in the roster."""
    NOT_IN_ROSTER = "not_in_roster"
    """The VP to remove is not in the roster."""
    UNKNOWN_VP = "unknown_vp"
    """A name resolves to no persona."""
    INVALID_NAME = "invalid_name"
    """A group name is empty or too long."""
    NOT_OWNER = "not_owner"
    """Only the group's owner may do this (change members or settings, delete)."""
    NOT_MEMBER = "not_member"
    """The user named is not a member of the group."""
    OWNER_LEAVING = "owner_leaving"
    """The owner cannot leave while others remain: ownership is transferred first."""
    LAST_MEMBER = "last_member"
    """The last member cannot leave: the group is deleted instead."""
    BUSY = "busy"
    """Too many turns are waiting in the group or on a VP (``coordinator.admission``)."""


class GroupError(Exception):
    """A group operation was refused: ``code`` says why, ``message`` says it to a person.

    ``retry_after`` is set when the refusal passes with time (``BUSY``): an
    estimate, in seconds, of when the same request would be admitted.

    It crosses Ray from the coordinator actor to the caller, so it pickles
    as its arguments (``Exception`` would pickle the message alone).
    """

    def __init__(
        self, code: GroupErrorCode, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.code = GroupErrorCode(code)
        self.message = message
        self.retry_after = retry_after

    def __reduce__(
        self,
    ) -> tuple[type[GroupError], tuple[GroupErrorCode, str, float | None]]:
        return (GroupError, (self.code, self.message, self.retry_after))
