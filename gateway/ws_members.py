"""The WebSocket frames about a group's people and settings (``protocol.members``).

Each is answered with a ``group_update`` whose ``action`` says what was done
(``invited``, ``removed``, ``owner``, ``left``, ``settings``) and which
echoes ``requestId``; refusals are typed ``error`` frames (``forbidden`` for
a member who is not the owner, ``not_found`` on ``username`` for an unknown
user, ``conflict`` for an owner leaving, ``invalid_frame`` naming the field
of a bad setting). The group's subscribers learn of the change from the
group's own event log, like everything else that happens in it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.membership import GroupEdit
from gateway.views import group_view
from protocol.members import (
    InviteMember,
    LeaveGroup,
    RemoveMember,
    TransferOwnership,
    UpdateGroupSettings,
)

if TYPE_CHECKING:
    from gateway.context import GatewayContext


class Session(Protocol):
    """What the handlers need of a ``gateway.ws.ClientSession``."""

    ctx: GatewayContext

    @property
    def username(self) -> str: ...

    def reply(self, group: dict[str, Any], action: str, request_id: str | None = None) -> None: ...


def member_handlers(session: Session) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
    """The handlers of the member and settings frames, for ``session``'s table."""
    groups = session.ctx.groups

    async def invite(frame: InviteMember) -> None:
        group = await groups.invite(session.username, frame.group_id, frame.username)
        session.reply(group_view(group), "invited", frame.request_id)

    async def remove(frame: RemoveMember) -> None:
        group = await groups.remove(session.username, frame.group_id, frame.username)
        session.reply(group_view(group), "removed", frame.request_id)

    async def transfer(frame: TransferOwnership) -> None:
        group = await groups.transfer(session.username, frame.group_id, frame.username)
        session.reply(group_view(group), "owner", frame.request_id)

    async def leave(frame: LeaveGroup) -> None:
        await groups.leave(session.username, frame.group_id)
        session.reply({"id": frame.group_id}, "left", frame.request_id)

    async def settings(frame: UpdateGroupSettings) -> None:
        edit = GroupEdit(name=frame.name, default_vp=frame.default_vp_id, settings=frame.settings)
        group = await groups.edit(session.username, frame.group_id, edit)
        session.reply(group_view(group), "settings", frame.request_id)

    return {
        InviteMember: invite,
        RemoveMember: remove,
        TransferOwnership: transfer,
        LeaveGroup: leave,
        UpdateGroupSettings: settings,
    }
