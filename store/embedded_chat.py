"""The embedded store's search, deletion, read marks and usage totals (``ChatViews``).

Search is SQLite FTS5: ``message_fts`` holds each searchable message's text
under the message row's ``pos`` as its rowid, so a hit joins back to the
message in one step and a deletion removes exactly its row. The tables are
made here (:func:`setup`), and a database made before them gets its
existing messages indexed once, when the table is created.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from protocol import EventFrame
from store._shared import as_deleted, as_superseded, last_shown
from store.base import GroupMessage
from store.chatviews import (
    LAST_MESSAGE_WINDOW,
    MAX_SEARCH_HITS,
    UNREAD_CAP,
    UNREAD_SCAN,
    GroupSummary,
    LastMessage,
    SearchHit,
    TurnUsage,
    UsageTotals,
    counts_as_unread,
    is_searchable,
    query_terms,
    snippet,
)
from store.embedded_budgets import add_to_account
from store.embedded_mentions import index_mentions
from store.embedded_quotas import add_usage_row
from store.events import EncodedEvent, encode_event
from store.mentions import ACTIVITY_LOG, counts_as_mention, deleted_activity, read_activity
from store.sqlite import read_txn, write_txn
from store.threads import thread_of

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS read_marks (
    group_id TEXT NOT NULL,
    username TEXT NOT NULL,
    pos INTEGER NOT NULL,
    PRIMARY KEY (group_id, username)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS turn_usage (
    group_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    PRIMARY KEY (group_id, turn_id)
) WITHOUT ROWID;
"""

# remove_diacritics 0: "café" and "cafe" stay different words, as in the
# Redis index (which only case-folds).
_FTS = (
    "CREATE VIRTUAL TABLE message_fts USING fts5("
    "text, group_id UNINDEXED, message_id UNINDEXED, tokenize = 'unicode61 remove_diacritics 0')"
)

# Tables (beside the store's own) that hold rows of a group, for delete_group.
GROUP_TABLES = ("message_fts", "read_marks", "turn_usage")


def setup(conn: sqlite3.Connection) -> None:
    """Make the tables; index the messages of an older database once."""
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")
    with write_txn(conn):
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'message_fts'"
        ).fetchone()
        if exists is None:
            conn.execute(_FTS)
            rows = conn.execute("SELECT pos, group_id, data FROM messages").fetchall()
            for pos, group_id, data in rows:
                index_message(conn, pos, group_id, GroupMessage.model_validate_json(data))


def index_message(conn: sqlite3.Connection, pos: int, group_id: str, message: GroupMessage) -> None:
    """Add a message just inserted at ``pos`` to the search index, if it belongs there."""
    if is_searchable(message.role, message.meta) and message.text:
        conn.execute(
            "INSERT INTO message_fts (rowid, text, group_id, message_id) VALUES (?, ?, ?, ?)",
            (pos, message.text, group_id, message.id),
        )


def _match(terms: list[str]) -> str:
    # Terms are runs of letters and digits (no quotes), each a prefix query.
    return " ".join(f'"{term}"*' for term in terms)


class EmbeddedChatViews:
    """``ChatViews`` on the embedded store's SQLite file (mixed into EmbeddedStore)."""

    # store.embedded_wake.EventWaker: not imported, as it imports the schema and so this.
    _waker: Any

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        raise NotImplementedError  # EmbeddedEvents' own

    def _append_event_sync(
        self, conn: sqlite3.Connection, group_id: str, encoded: EncodedEvent
    ) -> int:
        raise NotImplementedError  # EmbeddedEvents' own

    async def search_messages(
        self, group_ids: Sequence[str], query: str, *, limit: int = 50
    ) -> list[SearchHit]:
        terms = query_terms(query)
        groups = list(dict.fromkeys(group_ids))
        limit = max(1, min(limit, MAX_SEARCH_HITS))
        if not terms or not groups:
            return []
        marks = ",".join("?" * len(groups))

        def op(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            return conn.execute(
                "SELECT m.group_id, m.data FROM message_fts f JOIN messages m ON m.pos = f.rowid"
                f" WHERE message_fts MATCH ? AND f.group_id IN ({marks})"
                " ORDER BY f.rowid DESC LIMIT ?",
                (_match(terms), *groups, limit),
            ).fetchall()

        hits = []
        for group_id, data in await self._run(op):
            m = GroupMessage.model_validate_json(data)
            found = snippet(m.text, terms)
            hits.append(SearchHit(group_id, m.id, m.author, m.role, m.ts, found, thread_of(m.meta)))
        return hits

    async def _patch(
        self, group_id: str, message_id: str, change: Callable[[GroupMessage], GroupMessage]
    ) -> GroupMessage | None:
        """Rewrite one stored message in a write transaction; re-index it."""

        def op(conn: sqlite3.Connection) -> str | None:
            with write_txn(conn):
                row = conn.execute(
                    "SELECT pos, data FROM messages WHERE group_id = ? AND id = ?",
                    (group_id, message_id),
                ).fetchone()
                if row is None:
                    return None
                pos, data = row
                changed = change(GroupMessage.model_validate_json(data))
                body = changed.model_dump_json()
                conn.execute("UPDATE messages SET data = ? WHERE pos = ?", (body, pos))
                conn.execute("DELETE FROM message_fts WHERE rowid = ?", (pos,))
                index_message(conn, pos, group_id, changed)
                index_mentions(conn, pos, group_id, changed)
                return body

        body = await self._run(op)
        return GroupMessage.model_validate_json(body) if body else None

    async def delete_message(
        self, group_id: str, message_id: str, *, by: str, ts: float
    ) -> GroupMessage | None:
        gone = await self._patch(group_id, message_id, lambda m: as_deleted(m, by, ts))
        if gone is not None:
            # Its group's counts may drop: every gateway pushes them (store.mentions).
            await self.append_event(ACTIVITY_LOG, deleted_activity(group_id, by, message_id))
        return gone

    async def supersede_message(
        self, group_id: str, message_id: str, *, turn_id: str, by: str, ts: float
    ) -> GroupMessage | None:
        return await self._patch(group_id, message_id, lambda m: as_superseded(m, turn_id, by, ts))

    async def mark_read(self, group_id: str, username: str, message_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> tuple[bool, bool]:
            with write_txn(conn):
                row = conn.execute(
                    "SELECT pos FROM messages WHERE group_id = ? AND id = ?",
                    (group_id, message_id),
                ).fetchone()
                if row is None:
                    return False, False
                cur = conn.execute(
                    "INSERT INTO read_marks (group_id, username, pos) VALUES (?, ?, ?)"
                    " ON CONFLICT (group_id, username) DO UPDATE SET pos = excluded.pos"
                    " WHERE excluded.pos > read_marks.pos",
                    (group_id, username, row[0]),
                )
                moved = cur.rowcount > 0
                if moved:
                    # The person's other tabs and devices follow (store.mentions).
                    event = encode_event(read_activity(group_id, username, message_id))
                    self._append_event_sync(conn, ACTIVITY_LOG, event)
                return True, moved

        known, moved = await self._run(op)
        if moved:
            self._waker.wake(ACTIVITY_LOG)
        return known

    async def summaries(self, group_ids: Sequence[str], username: str) -> list[GroupSummary]:
        def op(conn: sqlite3.Connection) -> list[GroupSummary]:
            with read_txn(conn):
                return [_summary(conn, g, username) for g in group_ids]

        return await self._run(op)

    async def add_usage(self, group_id: str, usage: TurnUsage) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            with write_txn(conn):
                return insert_usage(conn, group_id, usage)

        return await self._run(op)

    async def group_usage(self, group_id: str) -> UsageTotals:
        def op(conn: sqlite3.Connection) -> UsageTotals:
            turns, tin, tout, cost = conn.execute(
                "SELECT count(*), coalesce(sum(input_tokens), 0),"
                " coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0.0)"
                " FROM turn_usage WHERE group_id = ?",
                (group_id,),
            ).fetchone()
            return UsageTotals(int(turns), int(tin), int(tout), float(cost))

        return await self._run(op)


def insert_usage(conn: sqlite3.Connection, group_id: str, usage: TurnUsage) -> bool:
    """Add one turn's usage to its group's totals and accounts; False if it was added before.

    Runs inside the caller's write transaction.
    """
    cur = conn.execute(
        "INSERT OR IGNORE INTO turn_usage"
        " (group_id, turn_id, input_tokens, output_tokens, cost_usd)"
        " VALUES (?, ?, ?, ?, ?)",
        (group_id, usage.turn_id, usage.input_tokens, usage.output_tokens, usage.cost_usd),
    )
    if cur.rowcount <= 0:
        return False
    for account in usage.accounts:
        add_to_account(conn, group_id, account, usage.tokens, usage.cost_usd, 0, 0.0)
    if usage.row is not None:
        tin, tout = usage.input_tokens, usage.output_tokens
        add_usage_row(conn, group_id, usage.row, tin, tout, usage.cost_usd)
    return True


def _summary(conn: sqlite3.Connection, group_id: str, username: str) -> GroupSummary:
    row = conn.execute(
        "SELECT pos FROM read_marks WHERE group_id = ? AND username = ?", (group_id, username)
    ).fetchone()
    mark = int(row[0]) if row else 0
    after = conn.execute(
        "SELECT data FROM messages WHERE group_id = ? AND pos > ? ORDER BY pos DESC LIMIT ?",
        (group_id, mark, UNREAD_SCAN),
    ).fetchall()
    unread = mentions = 0
    for (data,) in after:
        m = json.loads(data)
        author, role, meta = m.get("author", ""), m.get("role", ""), m.get("meta") or {}
        if counts_as_unread(author, role, meta, username):
            unread += 1
            mentions += counts_as_mention(author, role, meta, m.get("people") or (), username)
    recent = conn.execute(
        "SELECT data FROM messages WHERE group_id = ? ORDER BY pos DESC LIMIT ?",
        (group_id, LAST_MESSAGE_WINDOW),
    ).fetchall()
    last = last_shown([GroupMessage.model_validate_json(d) for (d,) in reversed(recent)])
    shown = LastMessage(last.id, last.author, last.role, last.text, last.ts) if last else None
    return GroupSummary(group_id, min(unread, UNREAD_CAP), shown, min(mentions, UNREAD_CAP))
