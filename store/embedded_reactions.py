"""The embedded store's reactions and pins (``store.reactions``), on its SQLite file.

A message's reactions are one row (``message_reactions``), a group's pins
another (``group_pins``), each the JSON of ``store.reactions``. A step reads
the row, applies the rule and writes the row and its event inside one
``BEGIN IMMEDIATE`` transaction, so two processes on one data directory
never lose each other's reaction, and the event log gets the changes in the
order they were made.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from store.events import EncodedEvent, encode_event
from store.reactions import (
    Pin,
    PinChange,
    Reaction,
    ReactionChange,
    apply_pin,
    apply_reaction,
    decode_pins,
    decode_reactions,
    encode_pins,
    encode_reactions,
    pins_frame,
    reactions_frame,
)
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS message_reactions (
    group_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, message_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_pins (
    group_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
) WITHOUT ROWID;
"""

# Tables that hold rows of a group, for delete_group.
GROUP_TABLES = ("message_reactions", "group_pins")


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _reactions(conn: sqlite3.Connection, group_id: str, message_id: str) -> tuple[Reaction, ...]:
    row = conn.execute(
        "SELECT data FROM message_reactions WHERE group_id = ? AND message_id = ?",
        (group_id, message_id),
    ).fetchone()
    return decode_reactions(row[0] if row else None)


def _pins(conn: sqlite3.Connection, group_id: str) -> tuple[Pin, ...]:
    row = conn.execute("SELECT data FROM group_pins WHERE group_id = ?", (group_id,)).fetchone()
    return decode_pins(row[0] if row else None)


class EmbeddedReactions:
    """``store.reactions.ReactionLog`` on SQLite (mixed into EmbeddedStore)."""

    # store.embedded_wake.EventWaker: not imported, as it imports the schema and so this.
    _waker: Any

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    @abstractmethod
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    @abstractmethod
    def _append_event_sync(
        self, conn: sqlite3.Connection, group_id: str, encoded: EncodedEvent
    ) -> int: ...

    async def react(
        self, group_id: str, message_id: str, emoji: str, user: str, *, on: bool | None, ts: float
    ) -> ReactionChange:
        def op(conn: sqlite3.Connection) -> ReactionChange:
            with write_txn(conn):
                current = _reactions(conn, group_id, message_id)
                now_on, after = apply_reaction(current, emoji, user, on)
                if after is None:
                    return ReactionChange(message_id, emoji, user, now_on, current)
                if after:
                    conn.execute(
                        "INSERT INTO message_reactions (group_id, message_id, data)"
                        " VALUES (?, ?, ?) ON CONFLICT (group_id, message_id)"
                        " DO UPDATE SET data = excluded.data",
                        (group_id, message_id, encode_reactions(after)),
                    )
                else:
                    conn.execute(
                        "DELETE FROM message_reactions WHERE group_id = ? AND message_id = ?",
                        (group_id, message_id),
                    )
                change = ReactionChange(message_id, emoji, user, now_on, after)
                event = encode_event(reactions_frame(group_id, change, ts))
                seq = self._append_event_sync(conn, group_id, event)
            return ReactionChange(message_id, emoji, user, now_on, after, seq)

        change = await self._run(op)
        if change.changed:
            self._waker.wake(group_id)
        return change

    async def reactions_of(
        self, group_id: str, message_ids: Sequence[str]
    ) -> dict[str, tuple[Reaction, ...]]:
        wanted = list(dict.fromkeys(message_ids))
        if not wanted:
            return {}

        def op(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            found: list[tuple[str, str]] = []
            with read_txn(conn):
                # In chunks, well under SQLite's limit on bound parameters.
                for start in range(0, len(wanted), 500):
                    chunk = wanted[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    found += conn.execute(
                        "SELECT message_id, data FROM message_reactions"
                        f" WHERE group_id = ? AND message_id IN ({marks})",
                        (group_id, *chunk),
                    ).fetchall()
            return found

        rows = await self._read(op)
        return {str(m): decode_reactions(data) for m, data in rows}

    async def pin(
        self, group_id: str, message_id: str, user: str, *, pinned: bool, ts: float
    ) -> PinChange:
        def op(conn: sqlite3.Connection) -> PinChange:
            with write_txn(conn):
                current = _pins(conn, group_id)
                after = apply_pin(current, message_id, user, pinned, ts)
                if after is None:
                    return PinChange(message_id, pinned, current)
                conn.execute(
                    "INSERT INTO group_pins (group_id, data) VALUES (?, ?)"
                    " ON CONFLICT (group_id) DO UPDATE SET data = excluded.data",
                    (group_id, encode_pins(after)),
                )
                change = PinChange(message_id, pinned, after)
                event = encode_event(pins_frame(group_id, change, user, ts))
                seq = self._append_event_sync(conn, group_id, event)
            return PinChange(message_id, pinned, after, seq)

        change = await self._run(op)
        if change.changed:
            self._waker.wake(group_id)
        return change

    async def pins_of(self, group_id: str) -> tuple[Pin, ...]:
        return await self._read(lambda conn: _pins(conn, group_id))
