"""The embedded store's member changes, presence and VP placement.

See ``store.members`` and ``store.placement``.

A mixin of :class:`~store.embedded.EmbeddedStore`: each operation is one
function run on the store thread, a member change inside one ``BEGIN
IMMEDIATE`` transaction, so its read of the record and its write cannot
interleave with another writer's, in this process or another.
"""

from __future__ import annotations

import sqlite3
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from store.base import Group, NotFound
from store.members import MemberChange
from store.membership import apply_change
from store.placement import assign
from store.sqlite import write_txn

T = TypeVar("T")


class EmbeddedMembers:
    """``MemberStore``, ``PresenceStore`` and ``PlacementStore`` on the store's SQLite thread."""

    @abstractmethod
    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def change_members(self, group_id: str, change: MemberChange) -> Group:
        def op(conn: sqlite3.Connection) -> Group:
            with write_txn(conn):
                row = conn.execute("SELECT data FROM groups WHERE id = ?", (group_id,)).fetchone()
                if row is None:
                    raise NotFound(f"group {group_id!r} not found")
                group = apply_change(Group.model_validate_json(row[0]), change)
                conn.execute(
                    "UPDATE groups SET data = ? WHERE id = ?", (group.model_dump_json(), group_id)
                )
            return group

        return await self._run(op)

    async def mark_online(self, users: Iterable[str], node: str, ttl_s: float) -> None:
        rows = [(user, node, time.time() + ttl_s) for user in users]

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.executemany(
                    "INSERT INTO presence (username, node, expires_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (username, node) DO UPDATE SET expires_at = excluded.expires_at",
                    rows,
                )
                conn.execute("DELETE FROM presence WHERE expires_at < ?", (time.time(),))

        if rows:
            await self._run(op)

    async def mark_offline(self, user: str, node: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute("DELETE FROM presence WHERE username = ? AND node = ?", (user, node))

        await self._run(op)

    async def online(self, users: Iterable[str]) -> set[str]:
        wanted = sorted(set(users))

        def op(conn: sqlite3.Connection) -> set[str]:
            now = time.time()
            found: set[str] = set()
            for user in wanted:
                row = conn.execute(
                    "SELECT 1 FROM presence WHERE username = ? AND expires_at >= ? LIMIT 1",
                    (user, now),
                ).fetchone()
                if row is not None:
                    found.add(user)
            return found

        return await self._run(op) if wanted else set()

    async def place_vps(self, vp_ids: Sequence[str], hosts: int) -> list[int]:
        wanted = list(vp_ids)

        def op(conn: sqlite3.Connection) -> list[int]:
            # One write transaction: the read and the new records cannot
            # interleave with another process placing VPs.
            with write_txn(conn):
                placed = dict(conn.execute("SELECT vp_id, host FROM vp_placement").fetchall())
                added = assign(placed, wanted, hosts)
                conn.executemany(
                    "INSERT OR REPLACE INTO vp_placement (vp_id, host) VALUES (?, ?)",
                    added.items(),
                )
            placed.update(added)
            return [placed[vp_id] for vp_id in wanted]

        return await self._run(op) if wanted else []
