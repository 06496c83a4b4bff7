"""The audit log: who did what, when and from where, append-only in the store.

Every sign-in (and failed one), lockout lift, MCP server change, group
settings change, member and role change, quota change, group deletion,
invite link made, revoked or followed, account disable and enable,
display-name change, message edit and resend, and choice of a reply's
version is one :class:`AuditEntry` (an edit's entry names the message and
its version, never its text). The log has two verbs,
``append_audit`` and
``read_audit``: there is no update and no delete, on purpose. The embedded
backend refuses an UPDATE or DELETE of its table with triggers
(``store.embedded_audit``); the Redis backend keeps a stream it never trims
(``store.redis_audit``). Both keep every entry: a log that forgets is no
audit log, and an entry is a few hundred bytes, so a team signing in a
thousand times a day adds well under a hundred megabytes a year.

An entry's ``id`` is its place in the log, given by the backend (a number
in the embedded store, a stream id in Redis): ids are opaque to clients,
and ``before=<id>`` pages on, newest first. ``at`` is the recording
process's clock (epoch seconds); ``since`` and ``until`` filter on it.

``detail`` is small JSON that never holds a secret: recorders put names
(of fields, of environment variables, of headers) in it, never values of
passwords, tokens, ``env`` or ``headers``.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The most entries one read returns.
MAX_AUDIT_PAGE = 1000


class AuditAction(StrEnum):
    """What an entry records."""

    SIGN_IN = "sign_in"
    SIGN_IN_FAILED = "sign_in_failed"
    LOCKOUT_LIFTED = "lockout_lifted"
    PASSWORD_CHANGED = "password_changed"
    SESSIONS_ENDED = "sessions_ended"
    API_TOKEN_CREATED = "api_token_created"
    API_TOKEN_REVOKED = "api_token_revoked"
    USER_ADDED = "user_added"
    MCP_SERVER_ADDED = "mcp_server_added"
    MCP_SERVER_REMOVED = "mcp_server_removed"
    GROUP_CREATED = "group_created"
    GROUP_SETTINGS_CHANGED = "group_settings_changed"
    GROUP_DELETED = "group_deleted"
    VP_ADDED = "vp_added"
    VP_REMOVED = "vp_removed"
    MEMBER_ADDED = "member_added"
    MEMBER_REMOVED = "member_removed"
    MEMBER_LEFT = "member_left"
    ROLE_CHANGED = "role_changed"
    INVITE_CREATED = "invite_created"
    INVITE_REVOKED = "invite_revoked"
    INVITE_REDEEMED = "invite_redeemed"
    QUOTA_CHANGED = "quota_changed"
    ACCOUNT_DISABLED = "account_disabled"
    ACCOUNT_ENABLED = "account_enabled"
    DISPLAY_NAME_CHANGED = "display_name_changed"
    MESSAGE_EDITED = "message_edited"
    MESSAGE_RESENT = "message_resent"
    REPLY_VERSION_CHOSEN = "reply_version_chosen"


class AuditEntry(BaseModel):
    """One recorded action; immutable once made."""

    model_config = ConfigDict(frozen=True)

    # Given by the store on append; "" on an entry not appended yet.
    id: str = ""
    at: float
    # The person who acted; None for an anonymous one (a failed sign-in
    # names the account tried in ``target``) and for the command line.
    actor: str | None
    action: AuditAction
    # What was acted on: a group id, a username, an MCP server's name.
    target: str | None = None
    # The client's address; None for the command line.
    address: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)

    @field_validator("detail")
    @classmethod
    def _json(cls, detail: dict[str, Any]) -> dict[str, Any]:
        # Refused when made, so no backend is handed what it cannot store.
        json.dumps(detail)
        return detail

    def encoded_detail(self) -> str:
        """``detail`` as compact JSON."""
        return json.dumps(self.detail, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which entries to read: every filter given must match (None: any)."""

    actor: str | None = None
    action: AuditAction | None = None
    target: str | None = None
    # Epoch seconds, inclusive both.
    since: float | None = None
    until: float | None = None
    limit: int = 100
    # An entry id: only entries older than it (the next page).
    before: str | None = None

    def matches(self, entry: AuditEntry) -> bool:
        """Whether ``entry`` passes every filter but ``before`` and ``limit``."""
        return (
            (self.actor is None or entry.actor == self.actor)
            and (self.action is None or entry.action is self.action)
            and (self.target is None or entry.target == self.target)
            and (self.since is None or entry.at >= self.since)
            and (self.until is None or entry.at <= self.until)
        )


@dataclass(frozen=True, slots=True)
class AuditPage:
    """Entries newest first, and the ``before`` of the next page (None: no more)."""

    entries: list[AuditEntry]
    next: str | None = None


class BadAuditCursor(ValueError):
    """A ``before`` that is no entry id of this backend."""


class AuditLog(Protocol):
    """The append-only audit log (rules in the module docstring)."""

    @abstractmethod
    async def append_audit(self, entry: AuditEntry) -> str:
        """Append ``entry``; its id."""

    @abstractmethod
    async def read_audit(self, query: AuditQuery) -> AuditPage:
        """Entries matching ``query``, newest first, at most ``query.limit``."""


def page_of(found: list[AuditEntry], limit: int) -> AuditPage:
    """A page from up to ``limit + 1`` entries found: the extra one says there are more."""
    entries = found[:limit]
    more = len(found) > limit
    return AuditPage(entries, entries[-1].id if more and entries else None)


def entry_row(
    entry_id: str,
    at: float,
    actor: str | None,
    action: str,
    target: str | None,
    address: str | None,
    detail: str,
) -> AuditEntry:
    """An entry from its stored fields (detail as JSON text)."""
    return AuditEntry(
        id=entry_id,
        at=at,
        actor=actor,
        action=AuditAction(action),
        target=target,
        address=address,
        detail=json.loads(detail) if detail else {},
    )
