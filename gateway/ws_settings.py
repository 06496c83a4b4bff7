"""The WebSocket's settings queries (``protocol.config``): ``llm_config`` and ``yeaft_settings``.

``llm_config`` is answered from the engine configuration the deployment
runs with (``gateway.llm_config``); naming a group needs its membership, like
every group frame (``not_found`` otherwise). ``yeaft_settings`` reads a
group's settings for any member; a change goes through the one path every
settings change takes, ``GroupService.edit`` (as ``PATCH
/api/groups/{id}/settings`` and ``update_group_settings`` do): the owner
only (``forbidden`` for another member), each value within its bounds
(``invalid_frame`` naming the field, checked when the frame is parsed), and
announced to the group's subscribers with a ``group_update`` and a notice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from coordinator.membership import GroupEdit
from gateway.llm_config import llm_config
from protocol.config import LlmConfig, YeaftSettings, YeaftSettingsFrame
from store.base import Group
from store.membership import owner_of

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.context import GatewayContext


class Session(Protocol):
    """What the handlers need of a ``gateway.ws.ClientSession``."""

    ctx: GatewayContext
    conn: Connection

    @property
    def username(self) -> str: ...


def settings_handlers(session: Session) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
    """The handlers of ``llm_config`` and ``yeaft_settings``, for ``session``'s table."""
    ctx = session.ctx

    async def models(frame: LlmConfig) -> None:
        group_model = None
        if frame.group_id is not None:
            group = await ctx.groups.member_group(session.username, frame.group_id)
            group_model = group.settings.model
        engine = ctx.runtime.config.engine
        session.conn.send(llm_config(engine, frame.group_id, group_model, frame.request_id))

    async def settings(frame: YeaftSettings) -> None:
        if frame.settings is None:
            group = await ctx.groups.member_group(session.username, frame.group_id)
        else:
            edit = GroupEdit(settings=frame.settings)
            group = await ctx.groups.edit(session.username, frame.group_id, edit)
        session.conn.send(_answer(group, session.username, frame.request_id))

    return {LlmConfig: models, YeaftSettings: settings}


def _answer(group: Group, username: str, request_id: str | None) -> YeaftSettingsFrame:
    return YeaftSettingsFrame(
        group_id=group.id,
        settings=group.settings,
        editable=owner_of(group) == username,
        request_id=request_id,
    )
