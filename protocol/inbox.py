"""A person's inbox over the WebSocket: unread and mention counts, pushed.

Server frame: ``inbox_summary {groupId, unread, mentions, lastMessage,
mention?}`` is one of the person's groups as the group list shows it (the
same shape as an entry of ``GET /api/inbox``). Every gateway pushes it to
each of the person's connections, whichever groups they watch, when:

- a message is stored in a group they are a member of (``mention`` is set
  when that message mentions them, so a client can notify), or deleted;
- their read mark in the group moves (on another tab or device too).

No client frame asks for it; ``GET /api/inbox`` gives every group at once
(at connect, after a reconnect).

``ActivityEvent`` is not sent to clients: the store appends one to its
activity log (``store.mentions.ACTIVITY_LOG``) for every stored message and
every read mark that moved, and each gateway process tails that one log.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ServerModel

MAX_EXCERPT = 200
"""The most characters of a message a mention carries."""


class LastMessageView(ServerModel):
    """A group's newest shown message, as the group list shows it."""

    message_id: str
    author: str
    role: str
    text: str
    ts: float


class MentionView(ServerModel):
    """A message that mentions the person: where, who, and its first words."""

    group_id: str
    message_id: str
    author: str
    excerpt: str
    ts: float


class InboxSummary(ServerModel):
    """One of the person's groups: its last message, their unread and mention counts.

    ``unread`` counts the messages after the person's read mark that someone
    else wrote (notices and deleted ones not counted); ``mentions`` those of
    them that mention the person. ``mention`` is the message that caused this
    push when it mentions the person.

    Pushed to every connection of the person, on every gateway, when a
    message is stored in or deleted from one of their groups (whether or
    not they watch it) and when their read mark there moves (on any tab or
    device). ``GET /api/inbox`` gives every group at once, in the same shape.
    """

    type: Literal["inbox_summary"] = "inbox_summary"
    group_id: str
    unread: int = Field(ge=0)
    mentions: int = Field(default=0, ge=0)
    last_message: LastMessageView | None = None
    mention: MentionView | None = None


class ActivityEvent(ServerModel):
    """What the store tells gateway processes through its activity log.

    ``message``: a message by ``user`` was stored in ``groupId``; ``people``
    are the members it mentions, ``excerpt`` its first words when it mentions
    anyone. ``read``: ``user``'s read mark in ``groupId`` moved to
    ``messageId``. ``deleted``: ``user`` deleted the message ``messageId``.
    ``spent``: a turn (``messageId`` is its id) in ``groupId`` spent from
    ``user``'s quota, so their quota meter moves in every group they watch
    (``gateway.quota_meter``).
    """

    type: Literal["activity"] = "activity"
    kind: Literal["message", "read", "deleted", "spent"]
    group_id: str
    user: str
    message_id: str
    ts: float = 0.0
    people: list[str] = Field(default_factory=list)
    excerpt: str = ""
    seq: int | None = Field(default=None, ge=0)


def excerpt_of(text: str) -> str:
    """The first :data:`MAX_EXCERPT` characters of a text, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_EXCERPT else flat[: MAX_EXCERPT - 1] + "…"
