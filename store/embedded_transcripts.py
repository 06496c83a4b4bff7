"""The embedded store's engine transcripts (``store.base.TranscriptStore``).

A transcript is its head in ``transcripts`` and its rows, numbered from 0,
in ``transcript_rows``. A save and a load each run in one transaction, so a
reader never sees half a save.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

from store.base import StoredTranscript
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

# Tables (beside the store's own) that hold rows of a group, for delete_group.
GROUP_TABLES = ("transcripts", "transcript_rows")


class EmbeddedTranscripts:
    """``store.base.TranscriptStore`` on SQLite (mixed into EmbeddedStore)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        def op(conn: sqlite3.Connection) -> StoredTranscript | None:
            key = (group_id, vp_id)
            with read_txn(conn):
                head = conn.execute(
                    "SELECT data FROM transcripts WHERE group_id = ? AND vp_id = ?", key
                ).fetchone()
                if head is None:
                    return None
                rows = conn.execute(
                    "SELECT data FROM transcript_rows WHERE group_id = ? AND vp_id = ? ORDER BY n",
                    key,
                ).fetchall()
            return StoredTranscript(head[0], [r[0] for r in rows])

        return await self._read(op)

    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            key = (group_id, vp_id)
            with write_txn(conn):
                if keep > 0:
                    (held,) = conn.execute(
                        "SELECT COUNT(*) FROM transcript_rows"
                        " WHERE group_id = ? AND vp_id = ? AND n < ?",
                        (*key, keep),
                    ).fetchone()
                    if held < keep:
                        return False
                conn.execute(
                    "DELETE FROM transcript_rows WHERE group_id = ? AND vp_id = ? AND n >= ?",
                    (*key, keep),
                )
                conn.executemany(
                    "INSERT INTO transcript_rows (group_id, vp_id, n, data) VALUES (?, ?, ?, ?)",
                    [(*key, keep + i, row) for i, row in enumerate(messages)],
                )
                conn.execute(
                    "INSERT INTO transcripts (group_id, vp_id, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (group_id, vp_id) DO UPDATE SET data = excluded.data",
                    (*key, head),
                )
            return True

        return await self._run(op)
