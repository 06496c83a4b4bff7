"""The WebSocket frame that reads a thread (``protocol.threads``).

``thread_open`` goes through the same checks as its HTTP route
(``gateway.threads``) and is answered with ``thread_messages``, echoing
``requestId``. A reply in a thread is an ordinary ``yeaft_session_chat``
with ``threadId`` (``gateway.ws``); the frames of the thread reach a
client through its group subscription, each with its ``threadId``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.threads import thread_messages
from protocol.threads import ThreadOpen

if TYPE_CHECKING:
    from gateway.ws_settings import Session


def thread_handlers(session: Session) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
    """The handler of ``thread_open``, for ``session``'s table."""

    async def on_open(frame: ThreadOpen) -> None:
        answer = await thread_messages(
            session.ctx, session.username, frame.group_id, frame.thread_id, frame.request_id
        )
        session.conn.send(answer)

    return {ThreadOpen: on_open}
