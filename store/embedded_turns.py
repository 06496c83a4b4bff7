"""The embedded store's turn records (``store.turns``) as SQL on one connection.

Each function runs on the store thread with that thread's connection; those
that write take the database write lock for their whole read-then-write, so
two processes cannot both finish one turn.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from store.sqlite import write_txn
from store.turns import TurnEnd, TurnPhase, TurnRecord

_FINISHED = TurnPhase.FINISHED.value
# The data of a row that ``finish`` had to create: a turn finished without a
# record (run by no coordinator). It is never handed out as a record.
_NO_RECORD = "{}"


def add(conn: sqlite3.Connection, group_id: str, turns: Sequence[TurnRecord]) -> None:
    with write_txn(conn):
        insert(conn, group_id, turns)


def insert(conn: sqlite3.Connection, group_id: str, turns: Sequence[TurnRecord]) -> None:
    """Record turns inside the caller's write transaction; recorded ids keep their rows."""
    rows = [
        (group_id, t.turn_id, t.trigger_id, t.phase.value, t.end, t.static_json()) for t in turns
    ]
    conn.executemany(
        "INSERT OR IGNORE INTO turns (group_id, turn_id, trigger_id, phase, end_kind, data)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )


def _phase(conn: sqlite3.Connection, group_id: str, turn_id: str) -> str | None:
    row = conn.execute(
        "SELECT phase FROM turns WHERE group_id = ? AND turn_id = ?", (group_id, turn_id)
    ).fetchone()
    return str(row[0]) if row else None


def start(
    conn: sqlite3.Connection, group_id: str, turn_id: str, append: Callable[[], int] | None
) -> bool:
    """Mark the turn started and run ``append`` (its first event's insert) with it."""
    with write_txn(conn):
        phase = _phase(conn, group_id, turn_id)
        if phase == _FINISHED:
            return False
        if phase is not None:
            conn.execute(
                "UPDATE turns SET phase = ? WHERE group_id = ? AND turn_id = ?",
                (TurnPhase.STARTED.value, group_id, turn_id),
            )
        if append is not None:
            append()
    return True


def finish(
    conn: sqlite3.Connection,
    group_id: str,
    turn_id: str,
    end: TurnEnd,
    append: Callable[[], int] | None,
    also: Callable[[], object] | None = None,
) -> int | None:
    """Mark the turn finished and run ``append`` (the result's event inserts) with it.

    ``also`` is written in the same transaction whether or not the turn was
    finished before (the turn's usage, which counts once per turn anyway).
    """
    with write_txn(conn):
        if also is not None:
            also()
        phase = _phase(conn, group_id, turn_id)
        if phase == _FINISHED:
            return None
        seq = append() if append is not None else 0
        conn.execute(
            "INSERT INTO turns (group_id, turn_id, trigger_id, phase, end_kind, data)"
            " VALUES (?, ?, '', ?, ?, ?)"
            " ON CONFLICT (group_id, turn_id) DO UPDATE"
            " SET phase = excluded.phase, end_kind = excluded.end_kind",
            (group_id, turn_id, _FINISHED, end.value, _NO_RECORD),
        )
    return seq


def of_trigger(conn: sqlite3.Connection, group_id: str, trigger_id: str) -> list[TurnRecord]:
    rows = conn.execute(
        "SELECT data, phase, end_kind FROM turns WHERE group_id = ? AND trigger_id = ?",
        (group_id, trigger_id),
    ).fetchall()
    return _records(rows)


def open_all(conn: sqlite3.Connection) -> list[TurnRecord]:
    rows = conn.execute(
        "SELECT data, phase, end_kind FROM turns WHERE phase != ?", (_FINISHED,)
    ).fetchall()
    return _records(rows)


def _records(rows: list[tuple[str, str, str | None]]) -> list[TurnRecord]:
    """Rows as records, oldest first."""
    records = [TurnRecord.restore(d, phase, end) for d, phase, end in rows if d != _NO_RECORD]
    return sorted(records, key=lambda r: (r.created_at, r.turn_id))
