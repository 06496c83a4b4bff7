"""The embedded store's index of people's mentions, and its activity events (``store.mentions``).

``people_mentions`` holds one row per (mentioned person, message), keyed by
the message row's ``pos`` (global and increasing, so newest first is
``pos`` descending across groups). Rows are written in the message's own
transaction (:func:`index_mentions`) and rewritten with it when it changes
(a deleted message mentions nobody).
"""

from __future__ import annotations

import json
import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar

from protocol.inbox import excerpt_of
from store.base import GroupMessage
from store.events import EncodedEvent, encode_event
from store.mentions import MAX_MENTIONS_LISTED, Mention, message_activity
from store.threads import thread_of

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS people_mentions (
    username TEXT NOT NULL,
    pos INTEGER NOT NULL,
    group_id TEXT NOT NULL,
    PRIMARY KEY (username, pos)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS people_mentions_by_group ON people_mentions (group_id, pos);
"""

# Tables (beside the store's own) that hold rows of a group, for delete_group.
GROUP_TABLES = ("people_mentions",)


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def index_mentions(
    conn: sqlite3.Connection, pos: int, group_id: str, message: GroupMessage
) -> None:
    """(Re)write the mention rows of the message at ``pos``; inside the caller's transaction."""
    conn.execute("DELETE FROM people_mentions WHERE group_id = ? AND pos = ?", (group_id, pos))
    if message.meta.get("deleted"):
        return
    conn.executemany(
        "INSERT OR IGNORE INTO people_mentions (username, pos, group_id) VALUES (?, ?, ?)",
        [(user, pos, group_id) for user in message.people if user != message.author],
    )


def activity_of(group_id: str, message: GroupMessage) -> EncodedEvent:
    """The activity event of a message just stored, encoded for the activity log."""
    return encode_event(
        message_activity(
            group_id, message.id, message.author, message.ts, message.people, message.text
        )
    )


class EmbeddedMentions:
    """``store.mentions.MentionLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def mentions_of(
        self, username: str, group_ids: Sequence[str], *, limit: int = 50
    ) -> list[Mention]:
        groups = list(dict.fromkeys(group_ids))
        limit = max(1, min(limit, MAX_MENTIONS_LISTED))
        if not groups:
            return []

        def op(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            return conn.execute(
                "SELECT m.group_id, m.data FROM people_mentions p JOIN messages m ON m.pos = p.pos"
                " WHERE p.username = ? AND p.group_id IN (SELECT value FROM json_each(?))"
                " ORDER BY p.pos DESC LIMIT ?",
                (username, json.dumps(groups), limit),
            ).fetchall()

        found = []
        for group_id, data in await self._read(op):
            m = GroupMessage.model_validate_json(data)
            if m.author != username and not m.meta.get("deleted"):
                found.append(
                    Mention(group_id, m.id, m.author, excerpt_of(m.text), m.ts, thread_of(m.meta))
                )
        return found
