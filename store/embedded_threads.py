"""The embedded store's threads (``store.threads``), on its SQLite file.

A reply in a thread is a row of ``messages`` like any other; an expression
index on its ``meta.threadId`` (partial: main-timeline messages are not in
it) finds a thread's replies in the order they were stored, so storing a
message writes nothing more than it did before threads.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar

from store.base import GroupMessage
from store.sqlite import read_txn
from store.threads import MAX_THREAD_READ, ThreadSummary, summarize

T = TypeVar("T")

_THREAD = "json_extract(data, '$.meta.threadId')"

SCHEMA = f"""
CREATE INDEX IF NOT EXISTS messages_by_thread
    ON messages (group_id, {_THREAD}, pos) WHERE {_THREAD} IS NOT NULL;
"""

REPLIES_SQL = (
    f"SELECT data FROM messages WHERE group_id = ? AND {_THREAD} = ? ORDER BY pos DESC LIMIT ?"
)


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _replies(conn: sqlite3.Connection, group_id: str, root_id: str, limit: int) -> list[str]:
    rows = conn.execute(REPLIES_SQL, (group_id, root_id, limit)).fetchall()
    return [r[0] for r in reversed(rows)]


class EmbeddedThreads:
    """``store.threads.ThreadLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def thread_replies(
        self, group_id: str, root_id: str, *, limit: int = MAX_THREAD_READ
    ) -> list[GroupMessage]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[str]:
            return _replies(conn, group_id, root_id, limit)

        return [GroupMessage.model_validate_json(d) for d in await self._read(op)]

    async def thread_summaries(
        self, group_id: str, root_ids: Sequence[str]
    ) -> dict[str, ThreadSummary]:
        wanted = list(dict.fromkeys(root_ids))
        if not wanted:
            return {}

        def op(conn: sqlite3.Connection) -> dict[str, list[str]]:
            # One indexed lookup per root, in one snapshot; most find nothing.
            with read_txn(conn):
                return {r: _replies(conn, group_id, r, MAX_THREAD_READ) for r in wanted}

        found = await self._read(op)
        summaries: dict[str, ThreadSummary] = {}
        for root, rows in found.items():
            summary = summarize(root, (GroupMessage.model_validate_json(d) for d in rows))
            if summary is not None:
                summaries[root] = summary
        return summaries
