"""Threads: replies kept under one message of a group, in the wire protocol.

Any message of a group may start a thread; the thread's id (``threadId``)
is the id of that message, its *root*. One level only: a reply in a thread
starts none of its own.

Client frames:

- ``yeaft_session_chat {groupId, text, threadId, ...}`` writes a reply in
  the thread under ``threadId`` (the same frame as a message of the main
  timeline, with the same ``ack``); ``@vp`` mentions in it start turns that
  answer in the thread.
- ``thread_open {groupId, threadId, requestId?}`` reads the thread: it is
  answered by ``thread_messages`` (its root, its replies oldest first, and
  its summary).

Refusals are typed ``error`` frames and store nothing: a root the group does
not hold, or a group the user is not in, is ``not_found`` on ``threadId``;
a deleted root, or a root that is itself a reply in a thread, is
``conflict`` with ``detail {reason}`` (``root_deleted``, ``nested``); a text
past the limit is ``invalid_frame`` on ``text``.

Server frames: everything a turn in a thread writes carries its
``threadId`` (``yeaft_output``, ``agent_status``, ``ask_user_question``),
and so does a reply's ``group_message``; a client shows them in the thread,
not in the main timeline, and moves the root's summary on. A page of
history (``GET /api/groups/{id}/messages``) carries each root's ``thread``
summary, and each reply's ``meta.threadId``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from protocol.common import ClientModel, Id, ServerModel


class ThreadRefusal(StrEnum):
    """Why a reply in a thread was refused with ``conflict`` (its ``detail.reason``)."""

    ROOT_DELETED = "root_deleted"
    NESTED = "nested"


class ThreadOpen(ClientModel):
    """Read a thread: its root, its replies and its summary (answered by ``thread_messages``)."""

    type: Literal["thread_open"] = "thread_open"
    group_id: Id
    thread_id: Id
    request_id: Id | None = None


class ThreadSummary(ServerModel):
    """What the main timeline shows under a thread's root: "3 replies, last 2 min ago"."""

    count: int
    last_ts: float
    last_id: str
    participants: list[str]


class ThreadMessages(ServerModel):
    """A thread as it is now: its root and replies (history views, oldest first).

    Each message is shaped as in a page of history (``id``, ``author``,
    ``role``, ``text``, ``ts``, ``meta``, ``reactions``, ...). ``summary`` is
    None while no reply counts (none yet, or all deleted). ``lastSeq`` is
    the group's event-log head when it was read: frames after it continue
    the thread.
    """

    type: Literal["thread_messages"] = "thread_messages"
    group_id: str
    thread_id: str
    root: dict[str, Any]
    messages: list[dict[str, Any]]
    summary: ThreadSummary | None = None
    last_seq: int = 0
    request_id: str | None = None
