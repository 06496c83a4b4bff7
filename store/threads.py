"""Threads: replies kept under one message of a group, apart from its main timeline.

Any message of a group may start a thread: its *root*. A reply in the
thread is an ordinary message of the group log (stored, announced, searched
and deleted like any other) whose ``meta.threadId`` names the root; the
thread's id is the root's id. The rules:

- One level only: a reply in a thread cannot itself start a thread, and a
  thread cannot hang under a deleted message (the gateway checks both before
  the coordinator stores a reply: ``gateway.threads``).
- A VP's reply to a turn in a thread, and a hand-off made there, carry the
  same ``threadId`` (the turn's origin keeps it: ``actors.turns``), so every
  answer stays in the thread.
- A thread's summary (:class:`ThreadSummary`), shown under its root in the
  main timeline, counts the replies that are neither deleted nor notices,
  with the time of the newest and the people and VPs who wrote them, in
  the order they first did.

Both backends find a thread's replies through an index of the group log:
the embedded store an expression index on ``meta.threadId`` of its
``messages`` table (``store.embedded_threads``), Redis a sorted set of
``root:reply`` postings written before the message (``store.redis_threads``).
Deleting a group deletes both. The contract is ``store.base.ThreadLog``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

THREAD_KEY = "threadId"
"""The ``meta`` key of a reply in a thread: the id of the thread's root."""
MAX_THREAD_READ = 1000
"""The most replies of one thread a read returns (the oldest are left out past it)."""


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """What the main timeline shows under a thread's root."""

    root_id: str
    count: int
    last_ts: float
    last_id: str
    participants: tuple[str, ...]

    def view(self) -> dict[str, Any]:
        """The summary on the wire (``thread`` of a history message)."""
        return {
            "count": self.count,
            "lastTs": self.last_ts,
            "lastId": self.last_id,
            "participants": list(self.participants),
        }


def thread_of(meta: dict[str, Any]) -> str | None:
    """The thread a message (by its ``meta``) is a reply in; None on the main timeline."""
    value = meta.get(THREAD_KEY)
    return value if isinstance(value, str) and value else None


class Said(Protocol):
    """What the rules read of a group message (``store.base.GroupMessage``)."""

    id: str
    ts: float
    author: str
    role: str
    meta: dict[str, Any]


def counts_in_summary(message: Said) -> bool:
    """Whether a reply counts in its thread's summary: said, and not since deleted."""
    return message.role != "system" and not message.meta.get("deleted")


def summarize(root_id: str, replies: Iterable[Said]) -> ThreadSummary | None:
    """The summary of a thread from its replies (oldest first); None when none counts."""
    counted = [m for m in replies if counts_in_summary(m)]
    if not counted:
        return None
    last = counted[-1]
    people = tuple(dict.fromkeys(m.author for m in counted))
    return ThreadSummary(root_id, len(counted), last.ts, last.id, people)
