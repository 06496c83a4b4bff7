"""Frames a client sends to the server.

Each frame is a strict model (see ``protocol.common.ClientModel``) whose
``type`` literal is its wire name; ``ClientFrame`` joins them in one
discriminated union. Limits sit on the fields so that an oversized list or
an illegal id is refused at the door with the name of the offending field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from protocol.common import (
    MAX_ATTACHMENTS,
    MAX_CHOICES,
    MAX_MENTIONS,
    MAX_ROSTER,
    ClientModel,
    DirPath,
    Id,
    Name,
    Text,
)
from protocol.config import LlmConfig, YeaftSettings
from protocol.mcp import McpServersList
from protocol.members import (
    InviteMember,
    LeaveGroup,
    RemoveMember,
    TransferOwnership,
    UpdateGroupSettings,
)
from protocol.reactions import MessagePin, MessageReact
from protocol.settings import GroupSettingsPatch
from protocol.threads import ThreadOpen
from protocol.versions import MessageEdit, MessageResend, ReplyVersionChoose

GROUP_CHAT_TYPE = "yeaft_session_chat"
LEGACY_GROUP_CHAT_TYPE = "unify_group_chat"
"""The early wire name of ``yeaft_session_chat``; still accepted, never sent."""

Mime = Annotated[
    str,
    StringConstraints(min_length=3, max_length=255, pattern=r"^[\w.+-]+/[\w.+-]+$"),
]
Base64 = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]
Answer = Annotated[str, StringConstraints(max_length=10_000)]


class Attachment(ClientModel):
    """A file with a message: inline (``name``, ``mime``, ``base64``) or uploaded (``id``).

    Inline files are bounded by the frame limit; larger ones are uploaded
    first (``POST /api/groups/{id}/attachments``) and referenced by the id
    the upload returned.
    """

    name: Name | None = None
    mime: Mime | None = None
    base64: Base64 | None = None
    id: Id | None = None

    @model_validator(mode="after")
    def _inline_or_uploaded(self) -> Attachment:
        if self.id is not None:
            if self.base64 is not None:
                raise PydanticCustomError(
                    "id_and_base64", "give base64 or id, not both", {"field": "base64"}
                )
            return self
        for name in ("base64", "name", "mime"):
            if getattr(self, name) is None:
                raise PydanticCustomError(
                    "missing", f"{name} is required without an id", {"field": name}
                )
        return self


class SendMessage(ClientModel):
    """A message in a one-to-one chat conversation."""

    type: Literal["send_message"] = "send_message"
    conversation_id: Id
    text: Text
    attachments: list[Attachment] | None = Field(default=None, max_length=MAX_ATTACHMENTS)
    # Echoed in the ack and the message's group_message; a resend is harmless.
    client_message_id: Id | None = None


class YeaftSessionChat(ClientModel):
    """A message to a group; ``mentions`` are the VP ids the client parsed out.

    The legacy name ``unify_group_chat`` is accepted and rewritten to the
    canonical name, so code downstream only ever sees ``yeaft_session_chat``.
    """

    type: Literal["yeaft_session_chat", "unify_group_chat"] = "yeaft_session_chat"
    group_id: Id
    text: Text
    mentions: list[Id] | None = Field(default=None, max_length=MAX_MENTIONS)
    attachments: list[Attachment] | None = Field(default=None, max_length=MAX_ATTACHMENTS)
    client_message_id: Id | None = None
    conversation_id: Id | None = None
    # A reply in the thread under this message of the group (``protocol.threads``).
    thread_id: Id | None = None

    @field_validator("type")
    @classmethod
    def _canonical_type(cls, value: str) -> str:
        return GROUP_CHAT_TYPE


class CancelExecution(ClientModel):
    """Stop running turns: of a conversation, of one VP in a group, or of a whole group.

    Without ``vpId`` every turn in the group is cancelled. A ``vpId`` alone
    names no group, so at least one of ``conversationId``/``groupId`` is needed.
    """

    type: Literal["cancel_execution"] = "cancel_execution"
    conversation_id: Id | None = None
    group_id: Id | None = None
    vp_id: Id | None = None

    @model_validator(mode="after")
    def _needs_a_target(self) -> CancelExecution:
        if self.conversation_id is None and self.group_id is None:
            raise PydanticCustomError(
                "missing_target",
                "conversationId or groupId is required",
                {"field": "groupId"},
            )
        return self


class AskUserAnswer(ClientModel):
    """The user's reply to an ``ask_user_question``; a list when several were chosen."""

    type: Literal["ask_user_answer"] = "ask_user_answer"
    request_id: Id
    answer: Answer | Annotated[list[Answer], Field(max_length=MAX_CHOICES)]
    conversation_id: Id | None = None
    group_id: Id | None = None


class CreateConversation(ClientModel):
    """Start a one-to-one conversation with a provider."""

    type: Literal["create_conversation"] = "create_conversation"
    provider: Id | None = None
    work_dir: DirPath | None = None
    options: dict[str, Any] | None = None


class ResumeConversation(ClientModel):
    """Reopen a stored conversation, optionally at a provider session."""

    type: Literal["resume_conversation"] = "resume_conversation"
    conversation_id: Id
    session_id: Id | None = None
    # Replay only what came after this seq (a client that has the start).
    last_seq: int | None = Field(default=None, ge=0)


class DeleteConversation(ClientModel):
    """Delete a conversation and its history."""

    type: Literal["delete_conversation"] = "delete_conversation"
    conversation_id: Id


class ListHistorySessions(ClientModel):
    """List the stored sessions that can be resumed."""

    type: Literal["list_history_sessions"] = "list_history_sessions"
    provider: Id | None = None
    work_dir: DirPath | None = None
    request_id: Id | None = None


class ListFolders(ClientModel):
    """List the working directories that have sessions."""

    type: Literal["list_folders"] = "list_folders"
    provider: Id | None = None


class CreateGroup(ClientModel):
    """Create a group with a roster of VP ids; ``settings`` overrides some defaults."""

    type: Literal["create_group"] = "create_group"
    name: Name
    roster: list[Id] = Field(max_length=MAX_ROSTER)
    default_vp_id: Id | None = None
    settings: GroupSettingsPatch | None = None
    request_id: Id | None = None


class RenameGroup(ClientModel):
    """Give a group a new display name."""

    type: Literal["rename_group"] = "rename_group"
    group_id: Id
    name: Name


class DeleteGroup(ClientModel):
    """Delete a group and its history."""

    type: Literal["delete_group"] = "delete_group"
    group_id: Id


class AddVp(ClientModel):
    """Add a VP to a group's roster."""

    type: Literal["add_vp"] = "add_vp"
    group_id: Id
    vp_id: Id


class RemoveVp(ClientModel):
    """Remove a VP from a group's roster."""

    type: Literal["remove_vp"] = "remove_vp"
    group_id: Id
    vp_id: Id


class SetDefaultVp(ClientModel):
    """Choose the VP that answers unaddressed messages; ``None`` means everyone answers."""

    type: Literal["set_default_vp"] = "set_default_vp"
    group_id: Id
    vp_id: Id | None

    @model_serializer(mode="wrap")
    def _keep_null_vp(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # vpId is required even when it is null (null is the "clear" command),
        # so a dump that drops None values must still carry it.
        data: dict[str, Any] = handler(self)
        # The serializer is not told reliably whether aliases are in use (the
        # config default is not passed on), but groupId is always present.
        data.setdefault("vpId" if "groupId" in data else "vp_id", None)
        return data


class ListGroups(ClientModel):
    """List the groups the user may see."""

    type: Literal["list_groups"] = "list_groups"


class Subscribe(ClientModel):
    """Watch a group's event log, replaying from just after ``lastSeq`` when given."""

    type: Literal["subscribe"] = "subscribe"
    group_id: Id
    last_seq: int | None = Field(default=None, ge=0)
    vp_ids: list[Id] | None = Field(default=None, max_length=MAX_ROSTER)


class Unsubscribe(ClientModel):
    """Stop watching a group."""

    type: Literal["unsubscribe"] = "unsubscribe"
    group_id: Id


class Ping(ClientModel):
    """A liveness probe; the server answers ``pong``."""

    type: Literal["ping"] = "ping"


ClientFrame = Annotated[
    SendMessage
    | YeaftSessionChat
    | CancelExecution
    | AskUserAnswer
    | CreateConversation
    | ResumeConversation
    | DeleteConversation
    | ListHistorySessions
    | ListFolders
    | CreateGroup
    | RenameGroup
    | DeleteGroup
    | AddVp
    | RemoveVp
    | SetDefaultVp
    | ListGroups
    | Subscribe
    | Unsubscribe
    | Ping
    | McpServersList
    | InviteMember
    | RemoveMember
    | TransferOwnership
    | LeaveGroup
    | UpdateGroupSettings
    | MessageReact
    | MessagePin
    | MessageEdit
    | MessageResend
    | ReplyVersionChoose
    | ThreadOpen
    | LlmConfig
    | YeaftSettings,
    Field(discriminator="type"),
]
"""Every frame a client may send, told apart by ``type``."""
