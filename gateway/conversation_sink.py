"""A conversation's event log as the seed's chat mode shows it to a client.

A conversation is a group underneath (``store.conversation``), so its event
log holds what the actors' one writer produces for every group:
``yeaft_output`` frames. A client watching a conversation is handed them as
``claude_output {conversationId, data}``, the same stream-json ``data``
unchanged (plus ``vpId``, ``turnId`` and ``seq``), through a
:class:`ConversationSink` that wraps its connection for that subscription.
Questions gain their ``conversationId``; a deletion becomes
``conversation_deleted``; everything else (``group_message``,
``agent_status``, errors) passes through as stored.

Only the frames of conversation subscriptions are decoded here; the tail
still forwards every group's stored text without reading it.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from protocol import AskUserQuestion, ClaudeOutput, dumps
from protocol.conversations import ConversationDeleted

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.tail import Subscription

log = logging.getLogger(__name__)


def as_conversation_frame(text: str, conversation_id: str) -> str:
    """A stored frame of a conversation's log in the form its client expects."""
    try:
        frame: Any = json.loads(text)
    except ValueError:
        return text
    if not isinstance(frame, dict):
        return text
    kind = frame.get("type")
    if kind == "yeaft_output":
        return dumps(
            ClaudeOutput.model_validate(
                {
                    "conversationId": conversation_id,
                    "data": frame.get("data"),
                    "vpId": frame.get("vpId"),
                    "turnId": frame.get("turnId"),
                    "seq": frame.get("seq"),
                }
            )
        )
    if kind == "ask_user_question":
        question = AskUserQuestion.model_validate(frame)
        return dumps(question.model_copy(update={"conversation_id": conversation_id}))
    if kind == "group_update" and frame.get("action") == "deleted":
        return dumps(ConversationDeleted(conversation_id=conversation_id))
    return text


class ConversationSink:
    """A connection, seen by the hub as the client of one conversation subscription."""

    def __init__(self, conn: Connection, conversation_id: str) -> None:
        self.conn = conn
        self.conversation_id = conversation_id
        # Known before any frame is handled: the connection authenticated first.
        self.username = conn.username

    def _translate(self, text: str) -> str:
        try:
            return as_conversation_frame(text, self.conversation_id)
        except Exception:
            # A frame we cannot translate is our bug; the client still gets it as stored.
            log.exception("a frame of conversation %s was not translated", self.conversation_id)
            return text

    def offer(self, text: str, *, envelope: bool) -> bool:
        return self.conn.offer(self._translate(text), envelope=envelope)

    async def put(self, text: str, *, envelope: bool) -> None:
        await self.conn.put(self._translate(text), envelope=envelope)

    def overflow(self) -> None:
        self.conn.overflow()

    def attach(self, subscription: Subscription) -> None:
        self.conn.attach(subscription)

    def detach(self, subscription: Subscription) -> None:
        self.conn.detach(subscription)
