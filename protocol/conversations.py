"""Server frames of the seed's chat mode that list and remove conversations.

The seed names the client frames (``list_history_sessions``,
``list_folders``, ``delete_conversation``) but not their replies; these are
the replies, each a frame of its own so a client switches on ``type``.
The output of a conversation is ``claude_output`` and its start
``session_ready`` (``protocol.server``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ServerModel


class ConversationSummary(ServerModel):
    """One conversation as a history list shows it.

    ``sessionId`` is what ``resume_conversation`` takes beside the
    conversation id (on this server a conversation has one engine session,
    under the same id). ``lastMessage`` is the newest message's text, cut
    to 200 characters, and ``lastActivity`` its time in Unix seconds (the
    creation time while the conversation is empty).
    """

    conversation_id: str
    session_id: str
    title: str
    vp_id: str
    provider: str
    work_dir: str
    created_at: float
    last_activity: float
    last_message: str | None = None
    last_author: str | None = None


class HistorySessions(ServerModel):
    """The reply to ``list_history_sessions``: the user's conversations, newest first."""

    type: Literal["history_sessions"] = "history_sessions"
    provider: str
    work_dir: str | None = None
    sessions: list[ConversationSummary] = Field(default_factory=list)
    request_id: str | None = None


class Folder(ServerModel):
    """A workspace folder: its name (the ``workDir`` a conversation takes) and use."""

    name: str
    conversations: int = 0
    last_activity: float | None = None


class FoldersList(ServerModel):
    """The reply to ``list_folders``: every workspace, by name."""

    type: Literal["folders_list"] = "folders_list"
    provider: str
    folders: list[Folder] = Field(default_factory=list)


class ConversationDeleted(ServerModel):
    """A conversation and its history are gone (the reply to ``delete_conversation``)."""

    type: Literal["conversation_deleted"] = "conversation_deleted"
    conversation_id: str
