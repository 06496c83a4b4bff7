"""The embedded store's audit log (``store.audit``), a table of its SQLite file.

Each entry is one row; its ``seq`` (an AUTOINCREMENT key, never reused) is
the entry's id and its order. Triggers refuse every UPDATE and DELETE of
the table, so no code path, in this process or another, can change what was
recorded. Reads go newest first by ``seq``, with indexes on time, actor,
action and target so a filtered page does not scan the whole log.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from store.audit import AuditEntry, AuditPage, AuditQuery, BadAuditCursor, entry_row, page_of
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT,
    action TEXT NOT NULL,
    target TEXT,
    address TEXT,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_by_at ON audit_log (at);
CREATE INDEX IF NOT EXISTS audit_log_by_actor ON audit_log (actor, seq);
CREATE INDEX IF NOT EXISTS audit_log_by_action ON audit_log (action, seq);
CREATE INDEX IF NOT EXISTS audit_log_by_target ON audit_log (target, seq);
CREATE TRIGGER IF NOT EXISTS audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _where(query: AuditQuery) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("actor", query.actor),
        ("action", query.action.value if query.action else None),
        ("target", query.target),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if query.since is not None:
        clauses.append("at >= ?")
        args.append(query.since)
    if query.until is not None:
        clauses.append("at <= ?")
        args.append(query.until)
    if query.before is not None:
        clauses.append("seq < ?")
        args.append(_seq(query.before))
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _seq(cursor: str) -> int:
    if not cursor.isdigit() or len(cursor) > 18:
        raise BadAuditCursor(f"{cursor!r} is not an audit entry id")
    return int(cursor)


class EmbeddedAudit:
    """``store.audit.AuditLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    @abstractmethod
    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def append_audit(self, entry: AuditEntry) -> str:
        detail = entry.encoded_detail()

        def op(conn: sqlite3.Connection) -> str:
            with write_txn(conn):
                cur = conn.execute(
                    "INSERT INTO audit_log (at, actor, action, target, address, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        entry.at,
                        entry.actor,
                        entry.action.value,
                        entry.target,
                        entry.address,
                        detail,
                    ),
                )
                return str(cur.lastrowid)

        return await self._run(op)

    async def read_audit(self, query: AuditQuery) -> AuditPage:
        where, args = _where(query)
        sql = (
            "SELECT seq, at, actor, action, target, address, detail FROM audit_log"
            f"{where} ORDER BY seq DESC LIMIT ?"
        )

        def op(conn: sqlite3.Connection) -> list[AuditEntry]:
            with read_txn(conn):
                rows = conn.execute(sql, [*args, query.limit + 1]).fetchall()
            return [entry_row(str(row[0]), *row[1:]) for row in rows]

        return page_of(await self._read(op), query.limit)
