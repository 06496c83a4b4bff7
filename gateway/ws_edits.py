"""The WebSocket frames of edits, resends and reply versions (``protocol.versions``).

``message_edit``, ``message_resend`` and ``reply_version_choose`` go
through the same checks and coordinator commands as their HTTP routes
(``gateway.edits``). Each is answered directly, echoing ``requestId``
(``message_edited``, then ``message_resent`` for an edit that resends;
``message_resent``; ``reply_versions``); every subscriber of the group, on
every gateway, learns of the change from the group's event log. Refusals
are typed ``error`` frames.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.edits import choose, edit, resend
from protocol.versions import MessageEdit, MessageResend, ReplyVersionChoose

if TYPE_CHECKING:
    from gateway.ws_settings import Session


def edit_handlers(session: Session) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
    """The handlers of the version frames, for ``session``'s table."""

    async def on_edit(frame: MessageEdit) -> None:
        edited, resent = await edit(
            session.ctx,
            session.username,
            frame.group_id,
            frame.message_id,
            frame.text,
            frame.resend,
            frame.request_id,
        )
        session.conn.send(edited)
        if resent is not None:
            session.conn.send(resent)

    async def on_resend(frame: MessageResend) -> None:
        answer = await resend(
            session.ctx, session.username, frame.group_id, frame.message_id, frame.request_id
        )
        session.conn.send(answer)

    async def on_choose(frame: ReplyVersionChoose) -> None:
        answer = await choose(
            session.ctx, session.username, frame.group_id, frame.message_id, frame.request_id
        )
        session.conn.send(answer)

    return {MessageEdit: on_edit, MessageResend: on_resend, ReplyVersionChoose: on_choose}
