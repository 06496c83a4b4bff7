"""The rules of a member change, applied by both backends (see ``store.members``)."""

from __future__ import annotations

from typing import Any

from store.base import Group
from store.members import MemberChange, MemberError, MemberErrorCode


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
