"""Frames about a group's people: members, owner, settings, presence.

Client frames (each answered with a ``group_update`` naming its ``action``,
echoing ``requestId``, or with a typed ``error``):

- ``invite_member {groupId, username}``: the owner adds a user by name; an
  unknown name is ``not_found`` on ``username``;
- ``remove_member {groupId, username}``: the owner removes a member, whose
  live subscriptions end at once with a ``removed`` frame;
- ``transfer_ownership {groupId, username}``: the owner hands the group to
  another member;
- ``leave_group {groupId}``: a member leaves (the owner transfers first);
- ``update_group_settings {groupId, name?, defaultVpId?, settings?}``: the
  owner changes the name, the VP that answers unaddressed messages, and any
  of the bounded ``GroupSettings``.

Server frames: ``presence {groupId, online, user?, state?}`` says who of a
group's members is connected (the whole list on subscribe, then on every
change), and ``removed {groupId, reason}`` tells a client that a group is no
longer its to watch. ``DirectoryEvent`` is not sent to clients: gateway
processes tell each other through the store about changes that outlive a
group's own log (a deletion) or concern people not watching it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from protocol.common import ClientModel, Id, Name, ServerModel
from protocol.settings import GroupSettingsPatch

MAX_USERNAME = 200


class InviteMember(ClientModel):
    """The owner adds a user, by username, to a group."""

    type: Literal["invite_member"] = "invite_member"
    group_id: Id
    username: str = Field(min_length=1, max_length=MAX_USERNAME)
    request_id: Id | None = None


class RemoveMember(ClientModel):
    """The owner removes a member from a group."""

    type: Literal["remove_member"] = "remove_member"
    group_id: Id
    username: str = Field(min_length=1, max_length=MAX_USERNAME)
    request_id: Id | None = None


class TransferOwnership(ClientModel):
    """The owner makes another member the owner."""

    type: Literal["transfer_ownership"] = "transfer_ownership"
    group_id: Id
    username: str = Field(min_length=1, max_length=MAX_USERNAME)
    request_id: Id | None = None


class LeaveGroup(ClientModel):
    """A member leaves a group."""

    type: Literal["leave_group"] = "leave_group"
    group_id: Id
    request_id: Id | None = None


class UpdateGroupSettings(ClientModel):
    """The owner changes a group's name, default VP and settings; absent fields stay."""

    type: Literal["update_group_settings"] = "update_group_settings"
    group_id: Id
    name: Name | None = None
    default_vp_id: Id | None = None
    settings: GroupSettingsPatch | None = None
    request_id: Id | None = None


class PresenceFrame(ServerModel):
    """Who of a group's members is connected now; ``user``/``state`` name the change."""

    type: Literal["presence"] = "presence"
    group_id: str
    online: list[str]
    user: str | None = None
    state: Literal["online", "offline"] | None = None


class RemovedFrame(ServerModel):
    """A group this client watched is no longer its to watch: its subscription ended."""

    type: Literal["removed"] = "removed"
    group_id: str
    reason: Literal["removed", "left", "deleted"]
    message: str


class DirectoryEvent(ServerModel):
    """A change one gateway process tells the others through the store's directory log.

    ``members``: ``added``/``removed`` users of ``groupId`` (``group`` is its
    new view); ``deleted``: the group is gone (``members`` were its people);
    ``presence``: ``user`` came online or went offline; ``sessions_ended``:
    ``user``'s ``sessions`` were ended (their WebSockets close);
    ``account_disabled``: an administrator disabled ``user`` (every WebSocket
    of theirs closes, whatever token opened it).
    """

    type: Literal["directory"] = "directory"
    action: Literal["members", "deleted", "presence", "sessions_ended", "account_disabled"]
    group_id: str | None = None
    group: dict[str, Any] | None = None
    members: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    user: str | None = None
    by: str | None = None
    online: bool | None = None
    sessions: list[str] = Field(default_factory=list)
    seq: int | None = Field(default=None, ge=0)
