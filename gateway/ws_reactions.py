"""The WebSocket frames of reactions and pins (``protocol.reactions``).

``message_react`` and ``message_pin`` go through the same checks and store
steps as their HTTP routes (``gateway.reactions``). Each is answered with
the state it left (``message_reactions`` or ``message_pins`` without
``seq``, echoing ``requestId``); every subscriber of the group, on every
gateway, gets the change from the group's event log, this connection's
subscription included. Refusals are typed ``error`` frames.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.reactions import pin, react
from protocol.reactions import MessagePin, MessageReact

if TYPE_CHECKING:
    from gateway.ws_settings import Session


def reaction_handlers(session: Session) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
    """The handlers of ``message_react`` and ``message_pin``, for ``session``'s table."""

    async def on_react(frame: MessageReact) -> None:
        answer = await react(
            session.ctx,
            session.username,
            frame.group_id,
            frame.message_id,
            frame.emoji,
            frame.on,
            frame.request_id,
        )
        session.conn.send(answer)

    async def on_pin(frame: MessagePin) -> None:
        answer = await pin(
            session.ctx,
            session.username,
            frame.group_id,
            frame.message_id,
            frame.pinned,
            frame.request_id,
        )
        session.conn.send(answer)

    return {MessageReact: on_react, MessagePin: on_pin}
