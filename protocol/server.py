"""Frames the server sends to a client.

These models are built by our own code, so ids are plain strings rather than
the strict client id type: an engine that names a turn ``1a2b3c4d:linus`` must
not fail to report it. Extra fields are allowed so that older clients keep
parsing frames from a newer server.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from protocol.common import ErrorCode, ServerModel, WireEnum
from protocol.config import LlmConfigFrame, YeaftSettingsFrame
from protocol.conversations import ConversationDeleted, FoldersList, HistorySessions
from protocol.data import DataPayload
from protocol.inbox import ActivityEvent, InboxSummary
from protocol.mcp import McpServersListFrame
from protocol.members import DirectoryEvent, PresenceFrame, RemovedFrame
from protocol.message_changes import MessageChanged
from protocol.queueing import QueueOutcome
from protocol.quotas import QuotaMeter
from protocol.reactions import MessagePins, MessageReactions
from protocol.reply_routes import ReplyRouted
from protocol.tasks import TaskChanged
from protocol.threads import ThreadMessages
from protocol.versions import MessageEdited, MessageResent, ReplyVersions


class AgentState(WireEnum):
    """What a VP is doing, as ``agent_status`` reports it."""

    IDLE = "idle"
    THINKING = "thinking"
    STREAMING = "streaming"
    TOOL = "tool"
    ERROR = "error"
    # Waiting: for the VP's running turn in this group to end, or for a free
    # slot at its model provider (the provider lane is full).
    QUEUED = "queued"
    # A running turn's heartbeat: still at work, in ``phase`` (one of the
    # states above), sent at least every ``heartbeatS`` seconds.
    BUSY = "busy"


class ClaudeOutput(ServerModel):
    """Output of a one-to-one conversation, one stream-json payload per frame.

    ``vpId``, ``turnId`` and ``seq`` are this server's additions: the VP
    that answers, the turn, and the conversation's event-log sequence number
    (send it back as ``lastSeq`` in ``resume_conversation`` to get only what
    came after it).
    """

    type: Literal["claude_output"] = "claude_output"
    conversation_id: str
    data: DataPayload
    vp_id: str | None = None
    turn_id: str | None = None
    seq: int | None = Field(default=None, ge=0)


class YeaftOutput(ServerModel):
    """Output of one VP's turn in a group.

    ``seq`` is the group's event-log sequence number; a reconnecting client
    sends the last one it saw and receives everything after it. Producers
    build the frame without it: the event log assigns it when appending, so
    every frame a client receives carries one.
    """

    type: Literal["yeaft_output"] = "yeaft_output"
    conversation_id: str
    group_id: str
    vp_id: str
    turn_id: str
    seq: int | None = Field(default=None, ge=0)
    data: DataPayload
    # Set when the turn answers in a thread: the thread's root (``protocol.threads``).
    thread_id: str | None = None


class SessionReady(ServerModel):
    """A conversation is ready to take messages."""

    type: Literal["session_ready"] = "session_ready"
    conversation_id: str
    session_id: str | None = None
    model: str | None = None
    capabilities: dict[str, Any] | None = None
    # The VP and model that answer: {vpId, name, role, model, provider}.
    model_info: dict[str, Any] | None = None
    # The newest seq of the conversation's event log when it became ready.
    last_seq: int | None = Field(default=None, ge=0)


class AgentStatus(ServerModel):
    """What a VP is doing right now, for typing indicators and status dots.

    ``triggerId`` is the group-log message the turn answers (a person's
    message, a hand-off, or another VP's reply that mentioned this one), so
    a client can show the turn under it; every status of a turn carries it,
    so a client that joins in the middle of a turn learns it too. ``seq``
    is set when the frame comes from a group's event log. A running turn
    also sends ``busy`` with its ``phase`` every ``heartbeatS`` seconds
    (``actors.heartbeat``) until its last status (``idle`` or ``error``).
    """

    type: Literal["agent_status"] = "agent_status"
    group_id: str | None = None
    vp_id: str | None = None
    state: AgentState
    turn_id: str | None = None
    trigger_id: str | None = None
    seq: int | None = Field(default=None, ge=0)
    # Set when the message found the VP busy: what became of it, and the
    # other turn involved (steered into, merged into, or interrupted).
    queue: QueueOutcome | None = None
    other_turn_id: str | None = None
    # A heartbeat (state ``busy``): what the turn is doing, and how often
    # beats come; a busy VP silent for several times that has hung.
    phase: AgentState | None = None
    heartbeat_s: float | None = Field(default=None, gt=0)
    # Set when the turn answers in a thread: the thread's root (``protocol.threads``).
    thread_id: str | None = None


class Handoff(ServerModel):
    """Who handed work to whom: the part of a ``group_message`` that one VP sent another.

    ``from`` is the sending VP and ``to`` the VP the work went to; ``via`` is
    how (only ``route_forward`` produces a message of its own today).
    """

    from_vp: str = Field(alias="from")
    to: str
    reason: str | None = None
    via: Literal["route_forward"] = "route_forward"


class MessageAttachment(ServerModel):
    """A file that came with a message: named, never inlined; ``url`` downloads it."""

    name: str
    mime: str
    size: int | None = Field(default=None, ge=0)
    id: str | None = None
    url: str | None = None


class GroupMessageFrame(ServerModel):
    """A message was stored in the group log: every member sees it live, in order.

    Appended to the event log right after the message is stored and before
    any turn it causes is dispatched, so a message always precedes the
    replies to it. It covers a person's message (``role`` ``user``; its
    ``clientMessageId`` lets the sender's client match it to the bubble it
    drew while sending) and a VP's ``route_forward`` hand-off (``role``
    ``assistant``, with ``handoff``). A VP's reply is not repeated here: its
    text streams in its turn's ``yeaft_output`` frames, and the turn's
    ``result`` names the stored reply (``data.message_id``). A reply that
    names other VPs hands on without a message of its own: the turns it
    starts name it as their ``triggerId``, and a ``reply_routed`` frame
    says which they are.

    ``causedBy`` lists the group-log ids that led to this message, the
    person's message first; ``chainId`` is the id of the person's message
    that started the chain (a person's message is its own). ``ts`` is the
    time it was stored, in Unix seconds. ``mentions`` are the VPs it was
    sent to; ``people`` the members of the group it mentions (``@bob``), who
    are told (``inbox_summary``) and never given a turn.
    """

    type: Literal["group_message"] = "group_message"
    group_id: str
    message_id: str
    author: str
    role: str
    text: str
    ts: float
    mentions: list[str] = Field(default_factory=list)
    people: list[str] | None = None
    client_message_id: str | None = None
    caused_by: list[str] | None = None
    chain_id: str | None = None
    handoff: Handoff | None = None
    attachments: list[MessageAttachment] | None = None
    seq: int | None = Field(default=None, ge=0)
    # Set for a reply in a thread: the thread's root (``protocol.threads``).
    thread_id: str | None = None


class ToolApproval(ServerModel):
    """The tool call a question asks a person to allow, and its arguments in short."""

    name: str
    arguments: str = ""


class AskUserQuestion(ServerModel):
    """A tool needs the user's decision; the client replies with ``ask_user_answer``.

    With ``choices`` the answer is one of them, or with ``multiSelect`` a
    list of one or more of them; ``allowOther`` also lets the person answer
    in their own words. An answer that does not fit is refused with
    ``invalid_frame`` on ``answer`` and the question stays open.
    ``expiresAt`` is a Unix time in seconds after which the answer is ignored;
    ``seq`` is set when the frame comes from a group's event log.
    """

    type: Literal["ask_user_question"] = "ask_user_question"
    request_id: str
    prompt: str
    choices: list[str] | None = None
    multi_select: bool = False
    allow_other: bool = False
    conversation_id: str | None = None
    group_id: str | None = None
    vp_id: str | None = None
    turn_id: str | None = None
    expires_at: float | None = None
    seq: int | None = Field(default=None, ge=0)
    # Set when the question asks to allow a tool call (engine.tools.approval).
    tool: ToolApproval | None = None
    # Set when the turn asking answers in a thread (``protocol.threads``).
    thread_id: str | None = None


class GroupUpdate(ServerModel):
    """The current state of a group after it was created or changed.

    ``action`` says what happened: ``created``, ``renamed``, ``deleted``,
    ``roster``, ``default_vp``, ``subscribed`` (the answer to ``subscribe``,
    with ``online``: the members connected now), ``list`` (with ``groups``);
    ``members``, ``owner``, ``settings`` (from the event log); ``invited``,
    ``removed``, ``left``, ``added``. A reply to a frame that carried a
    ``requestId`` echoes it. These ride along as extra fields.

    ``seq`` is set when it comes from the group's event log (a change of
    members or settings, which every subscriber sees in order).
    """

    type: Literal["group_update"] = "group_update"
    group: dict[str, Any]
    seq: int | None = Field(default=None, ge=0)


GroupEventFrame = (
    YeaftOutput
    | AgentStatus
    | AskUserQuestion
    | GroupMessageFrame
    | GroupUpdate
    | MessageChanged
    | MessageReactions
    | MessagePins
    | MessageEdited
    | ReplyVersions
    | TaskChanged
    | ReplyRouted
)
"""The frames a group's event log holds; the log assigns their ``seq``.

A ``group_update`` there announces a change of members or settings to every
subscriber. A frame with a ``vp_id`` field is a VP's (a client may filter it
by VP); the others are the group's.
"""

EventFrame = GroupEventFrame | DirectoryEvent | ActivityEvent
"""What the store's logs hold: a group's events, ``directory`` frames (only
in the store's directory log) and ``activity`` frames (only in its activity log)."""


class ErrorFrame(ServerModel):
    """Something the client sent, or something the server tried, went wrong.

    ``field`` is the dotted path of the offending field of the client's frame;
    ``requestId`` echoes the request it answers when that is known (a chat
    frame's ``clientMessageId``). ``retryAfter`` is set on refusals that pass
    with time (``busy``, ``rate_limited``): an estimate, in seconds, of when
    the same frame would be taken.
    """

    type: Literal["error"] = "error"
    code: ErrorCode
    message: str
    field: str | None = None
    request_id: str | None = None
    retry_after: float | None = Field(default=None, ge=0)
    detail: dict[str, Any] | None = None


class Ack(ServerModel):
    """A group message is stored durably; ``messageId`` is its id in the group log."""

    type: Literal["ack"] = "ack"
    client_message_id: str | None = None
    message_id: str
    group_id: str
    # True when the clientMessageId was seen before: the message is not stored
    # again, and only VPs whose turns on it were interrupted (a restart, a
    # shutdown) answer it again.
    duplicate: bool = False


class Pong(ServerModel):
    """The answer to ``ping``."""

    type: Literal["pong"] = "pong"


ServerFrame = Annotated[
    ClaudeOutput
    | YeaftOutput
    | SessionReady
    | AgentStatus
    | AskUserQuestion
    | GroupMessageFrame
    | MessageChanged
    | MessageReactions
    | MessagePins
    | MessageEdited
    | ReplyVersions
    | MessageResent
    | TaskChanged
    | ReplyRouted
    | ThreadMessages
    | ErrorFrame
    | Ack
    | GroupUpdate
    | Pong
    | HistorySessions
    | FoldersList
    | ConversationDeleted
    | McpServersListFrame
    | PresenceFrame
    | RemovedFrame
    | InboxSummary
    | LlmConfigFrame
    | YeaftSettingsFrame
    | QuotaMeter,
    Field(discriminator="type"),
]
"""Every frame the server may send, told apart by ``type``."""
