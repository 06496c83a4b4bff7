"""The embedded store's invite links (``store.invites``), on its SQLite file.

A redemption reads the invite and counts its use inside one ``BEGIN
IMMEDIATE`` transaction, which holds the database's write lock from its
start: two redemptions, in this process or another, run one after the other.
"""

from __future__ import annotations

import sqlite3
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from store.base import StoreError
from store.invites import InviteRecord, InviteState, Redemption
from store.sqlite import read_txn, write_txn

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS invites (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    max_uses INTEGER NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0,
    group_id TEXT,
    revoked_at REAL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS invites_by_created ON invites (created_at);
"""

_COLUMNS = (
    "id, secret_hash, created_by, created_at, expires_at, max_uses, uses, group_id, revoked_at"
)


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _record(row: Sequence[Any]) -> InviteRecord:
    return InviteRecord(
        id=str(row[0]),
        secret_hash=str(row[1]),
        created_by=str(row[2]),
        created_at=float(row[3]),
        expires_at=float(row[4]),
        max_uses=int(row[5]),
        uses=int(row[6]),
        group_id=None if row[7] is None else str(row[7]),
        revoked_at=None if row[8] is None else float(row[8]),
    )


def _get(conn: sqlite3.Connection, invite_id: str) -> InviteRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM invites WHERE id = ?", (invite_id,)).fetchone()
    return None if row is None else _record(row)


class EmbeddedInvites:
    """``store.invites.InviteLog`` on SQLite (mixed into EmbeddedStore)."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def create_invite(self, invite: InviteRecord) -> None:
        i = invite

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                try:
                    conn.execute(
                        f"INSERT INTO invites ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            i.id,
                            i.secret_hash,
                            i.created_by,
                            i.created_at,
                            i.expires_at,
                            i.max_uses,
                            i.uses,
                            i.group_id,
                            i.revoked_at,
                        ),
                    )
                except sqlite3.IntegrityError as exc:
                    raise StoreError(f"an invite {i.id!r} exists already") from exc

        await self._run(op)

    async def get_invite(self, invite_id: str) -> InviteRecord | None:
        def op(conn: sqlite3.Connection) -> InviteRecord | None:
            with read_txn(conn):
                return _get(conn, invite_id)

        return await self._run(op)

    async def list_invites(self, group_id: str | None = None) -> list[InviteRecord]:
        def op(conn: sqlite3.Connection) -> list[InviteRecord]:
            where, args = ("WHERE group_id = ?", (group_id,)) if group_id is not None else ("", ())
            with read_txn(conn):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM invites {where} ORDER BY created_at DESC, id DESC",
                    args,
                ).fetchall()
            return [_record(row) for row in rows]

        return await self._run(op)

    async def redeem_invite(self, invite_id: str, now: float) -> Redemption:
        def op(conn: sqlite3.Connection) -> Redemption:
            with write_txn(conn):
                found = _get(conn, invite_id)
                if found is None:
                    return Redemption(InviteState.UNKNOWN, None)
                state = found.state(now)
                if state is not InviteState.VALID:
                    return Redemption(state, found)
                conn.execute("UPDATE invites SET uses = uses + 1 WHERE id = ?", (invite_id,))
                return Redemption(state, found.counted(found.uses + 1))

        return await self._run(op)

    async def release_invite(self, invite_id: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "UPDATE invites SET uses = uses - 1 WHERE id = ? AND uses > 0", (invite_id,)
                )

        await self._run(op)

    async def revoke_invite(self, invite_id: str, now: float) -> InviteRecord | None:
        def op(conn: sqlite3.Connection) -> InviteRecord | None:
            with write_txn(conn):
                conn.execute(
                    "UPDATE invites SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                    (now, invite_id),
                )
                return _get(conn, invite_id)

        return await self._run(op)
