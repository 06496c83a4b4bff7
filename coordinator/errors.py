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
    INVALID_TEXT = "invalid_text"
    """A message's text is empty, blank or too long."""
    NOT_AUTHOR = "not_author"
    """Only its author may do this to a message (edit it, resend it)."""
    DELETED = "deleted"
    """The message was deleted by its author."""
    TURN_RUNNING = "turn_running"
    """A turn on the message is still running: stop it first."""
    TOO_MANY_VERSIONS = "too_many_versions"
    """The message has as many versions as one may keep."""
    NOTHING_TO_RESEND = "nothing_to_resend"
    """No VP that answered the message can answer it again."""
    BUSY = "busy"
    """Too many turns are waiting in the group or on a VP (``coordinator.admission``)."""


class GroupError(Exception):
    """A group operation was refused: ``code`` says why, ``message`` says it to a person.

    ``retry_after`` is set when the refusal passes with time (``BUSY``): an
    estimate, in seconds, of when the same request would be admitted.
    ``detail`` is small JSON the client gets beside the code (the VPs whose
    turns are still running, for ``TURN_RUNNING``).

    It crosses Ray from the coordinator actor to the caller, so it pickles
    as its arguments (``Exception`` would pickle the message alone).
    """

    def __init__(
        self,
        code: GroupErrorCode,
        message: str,
        retry_after: float | None = None,
        detail: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = GroupErrorCode(code)
        self.message = message
        self.retry_after = retry_after
        self.detail = detail

    def __reduce__(
        self,
    ) -> tuple[
        type[GroupError], tuple[GroupErrorCode, str, float | None, dict[str, object] | None]
    ]:
        return (GroupError, (self.code, self.message, self.retry_after, self.detail))
