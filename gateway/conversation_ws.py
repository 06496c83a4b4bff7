"""The WebSocket frames of the seed's chat mode (one-to-one conversations).

Replies:

- ``create_conversation {provider?, workDir?, options?: {vpId, title}}`` →
  ``session_ready {conversationId, sessionId, capabilities, modelInfo,
  lastSeq}``; the connection then watches the conversation;
- ``resume_conversation {conversationId, sessionId?, lastSeq?}`` →
  ``session_ready``, then the conversation's log after ``lastSeq`` (all of
  it without one: the person's messages as ``group_message``, the VP's
  turns as ``claude_output``), then what comes live;
- ``send_message {conversationId, text, clientMessageId?}`` → ``ack`` once
  stored (``groupId`` is the conversation id), then the reply streams as
  ``claude_output``; a connection that did not watch the conversation
  starts watching it from that message;
- ``delete_conversation`` → ``conversation_deleted`` (also to every other
  connection watching it);
- ``list_history_sessions {provider?, workDir?}`` → ``history_sessions``;
- ``list_folders {provider?}`` → ``folders_list``.

A conversation that is not the user's is ``not_found``, like one that never
existed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from gateway.conversation_sink import ConversationSink
from gateway.conversations import check_work_dir
from gateway.errors import GatewayError, not_found
from protocol import (
    Ack,
    CreateConversation,
    DeleteConversation,
    ErrorCode,
    ListFolders,
    ListHistorySessions,
    ResumeConversation,
    SendMessage,
)
from protocol.common import Id
from protocol.conversations import FoldersList, HistorySessions
from store.conversation import PROVIDER

if TYPE_CHECKING:
    from gateway.connection import Connection
    from gateway.context import GatewayContext
    from store.base import Group

DEFAULT_VP = "omni"


class ConversationOptions(BaseModel):
    """The ``options`` of ``create_conversation`` this server reads; others are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="ignore")

    vp_id: Id = DEFAULT_VP
    title: str | None = Field(default=None, max_length=120)


class ConversationFrames:
    """The chat-mode handlers of one client session."""

    def __init__(self, ctx: GatewayContext, conn: Connection) -> None:
        self.ctx = ctx
        self.conn = conn

    def handlers(self) -> dict[type[Any], Callable[[Any], Awaitable[None]]]:
        return {
            CreateConversation: self.create,
            ResumeConversation: self.resume,
            SendMessage: self.send_message,
            DeleteConversation: self.delete,
            ListHistorySessions: self.list_history,
            ListFolders: self.list_folders,
        }

    @property
    def username(self) -> str:
        return self.conn.username

    async def create(self, frame: CreateConversation) -> None:
        try:
            options = ConversationOptions.model_validate(frame.options or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise GatewayError(
                ErrorCode.INVALID_FRAME, f"options: {first['msg']}", field=f"options.{where}"
            ) from exc
        group = await self.ctx.conversations.create(
            self.username, options.vp_id, frame.work_dir, options.title, frame.provider
        )
        self.conn.send(self.ctx.conversations.session_ready(group, 0))
        await self._watch(group, 0)

    async def resume(self, frame: ResumeConversation) -> None:
        group = await self.ctx.conversations.owned(self.username, frame.conversation_id)
        if frame.session_id is not None and frame.session_id != group.id:
            raise not_found("session")
        head = await self.ctx.groups.head_seq(group.id)
        self.conn.send(self.ctx.conversations.session_ready(group, head))
        await self._watch(group, frame.last_seq if frame.last_seq is not None else 0)

    async def send_message(self, frame: SendMessage) -> None:
        cid = frame.conversation_id
        if cid not in self.conn.subscriptions:
            group = await self.ctx.conversations.owned(self.username, cid)
            await self._watch(group, await self.ctx.groups.head_seq(cid))
        files = await self.ctx.attachments.accept(self.username, cid, frame.attachments)
        result = await self.ctx.conversations.send(
            self.username,
            cid,
            frame.text,
            frame.client_message_id,
            attachments=files,
            channel=self.conn.channel,
        )
        self.conn.send(
            Ack(
                client_message_id=frame.client_message_id,
                message_id=result.message_id,
                group_id=cid,
                duplicate=result.duplicate,
            )
        )

    async def delete(self, frame: DeleteConversation) -> None:
        # The reply, conversation_deleted, comes to every connection of the
        # owner through the directory log (gateway.people), this one included.
        await self.ctx.conversations.delete(self.username, frame.conversation_id)

    async def list_history(self, frame: ListHistorySessions) -> None:
        provider = frame.provider or PROVIDER
        sessions = []
        if provider == PROVIDER:
            work_dir = check_work_dir(frame.work_dir) if frame.work_dir is not None else None
            sessions = await self.ctx.conversations.list_for(self.username, work_dir)
        self.conn.send(
            HistorySessions(
                provider=provider,
                work_dir=frame.work_dir,
                sessions=sessions,
                request_id=frame.request_id,
            )
        )

    async def list_folders(self, frame: ListFolders) -> None:
        provider = frame.provider or PROVIDER
        folders = []
        if provider == PROVIDER:
            mine = await self.ctx.conversations.list_for(self.username)
            folders = self.ctx.conversations.folders(mine)
        self.conn.send(FoldersList(provider=provider, folders=folders))

    async def _watch(self, group: Group, last_seq: int) -> None:
        """Stream the conversation to this connection, after ``last_seq``."""
        old = self.conn.subscriptions.get(group.id)
        if old is not None:
            self.ctx.hub.drop(old)
        elif len(self.conn.subscriptions) >= self.ctx.settings.max_subscriptions:
            raise GatewayError(
                ErrorCode.CONFLICT,
                f"at most {self.ctx.settings.max_subscriptions} groups and conversations "
                "can be watched at once",
                detail={"limit": self.ctx.settings.max_subscriptions},
            )
        sink = ConversationSink(self.conn, group.id)
        await self.ctx.hub.subscribe(sink, group.id, last_seq, None)
