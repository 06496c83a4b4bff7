"""The embedded store's team-mode records (``store.tasks``), on its SQLite file.

Each record is its JSON text in ``data``; the columns beside it are what a
read filters or orders by. ``tasks.is_open`` (1 or 0, from the task's status
when it was saved) backs a partial index over the open tasks only, so the
active task of a group and the open tasks of all groups are found without
reading the others. Drafts and learned skills are a group's
(``store.tasks``): each row names its group, the draft indexes lead with it
so a member's drafts are found by their groups alone, and a learned skill's
key is (group, name). Every table here is deleted from with its group. The
tables are made by :func:`setup`, which every open runs
(``store.embedded_schema``), so a database made before team mode gains them
the first time it is opened.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection
from typing import TypeVar

from protocol.tasks import DraftStatus, Evidence, Skill, SkillDraft, Task
from store.sqlite import write_txn
from store.tasks import DEFAULT_DRAFT_LIMIT, DEFAULT_TASK_LIMIT, dump, learned_group

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS tasks (
    group_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    status TEXT NOT NULL,
    is_open INTEGER NOT NULL,
    created_at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, task_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tasks_by_created ON tasks (group_id, created_at, task_id);
CREATE INDEX IF NOT EXISTS tasks_open ON tasks (group_id, created_at, task_id) WHERE is_open = 1;
CREATE TABLE IF NOT EXISTS task_evidence (
    group_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, task_id, attempt)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS skill_drafts (
    id TEXT PRIMARY KEY,
    group_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS skill_drafts_by_group ON skill_drafts (group_id, created_at, id);
CREATE INDEX IF NOT EXISTS skill_drafts_by_group_status
    ON skill_drafts (group_id, status, created_at, id);
CREATE TABLE IF NOT EXISTS learned_skills (
    group_id TEXT NOT NULL,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, name)
) WITHOUT ROWID;
"""

# Tables (beside the store's own) that hold rows of a group, for delete_group:
# drafts and learned skills too, since they quote the group's conversation.
GROUP_TABLES = ("tasks", "task_evidence", "skill_drafts", "learned_skills")

# The SQL of a condition ``group_id`` is one of a JSON array's values: one
# parameter however many groups a user is in (no limit on bound variables).
_IN_GROUPS = "group_id IN (SELECT value FROM json_each(?))"


def setup(conn: sqlite3.Connection) -> None:
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")


def _texts(rows: list[tuple[str]]) -> list[str]:
    return [str(row[0]) for row in rows]


class EmbeddedTasks:
    """``store.tasks.TaskLog`` on SQLite (mixed into EmbeddedStore)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # EmbeddedStore's own

    # -- tasks -------------------------------------------------------------
    async def save_task(self, task: Task) -> None:
        row = (task.group_id, task.id, task.status.value, int(task.open), task.created_at)
        data = dump(task)

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "INSERT INTO tasks (group_id, task_id, status, is_open, created_at, data)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (group_id, task_id) DO UPDATE SET status = excluded.status,"
                    " is_open = excluded.is_open, created_at = excluded.created_at,"
                    " data = excluded.data",
                    (*row, data),
                )

        await self._run(op)

    async def get_task(self, group_id: str, task_id: str) -> Task | None:
        def op(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(
                "SELECT data FROM tasks WHERE group_id = ? AND task_id = ?", (group_id, task_id)
            ).fetchone()
            return str(found[0]) if found else None

        data = await self._run(op)
        return Task.model_validate_json(data) if data else None

    async def list_tasks(self, group_id: str, limit: int = DEFAULT_TASK_LIMIT) -> list[Task]:
        if limit <= 0:
            return []

        def op(conn: sqlite3.Connection) -> list[str]:
            return _texts(
                conn.execute(
                    "SELECT data FROM tasks WHERE group_id = ?"
                    " ORDER BY created_at DESC, task_id DESC LIMIT ?",
                    (group_id, limit),
                ).fetchall()
            )

        return [Task.model_validate_json(d) for d in await self._run(op)]

    async def active_task(self, group_id: str) -> Task | None:
        def op(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(
                "SELECT data FROM tasks WHERE group_id = ? AND is_open = 1"
                " ORDER BY created_at DESC, task_id DESC LIMIT 1",
                (group_id,),
            ).fetchone()
            return str(found[0]) if found else None

        data = await self._run(op)
        return Task.model_validate_json(data) if data else None

    async def open_tasks(self) -> list[Task]:
        def op(conn: sqlite3.Connection) -> list[str]:
            return _texts(
                conn.execute(
                    "SELECT data FROM tasks WHERE is_open = 1"
                    " ORDER BY created_at, group_id, task_id"
                ).fetchall()
            )

        return [Task.model_validate_json(d) for d in await self._run(op)]

    # -- evidence ----------------------------------------------------------
    async def save_evidence(self, evidence: Evidence) -> None:
        key = (evidence.group_id, evidence.task_id, evidence.attempt)
        data = dump(evidence)

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "INSERT INTO task_evidence (group_id, task_id, attempt, data)"
                    " VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (group_id, task_id, attempt) DO UPDATE SET data = excluded.data",
                    (*key, data),
                )

        await self._run(op)

    async def evidence_of(self, group_id: str, task_id: str) -> list[Evidence]:
        def op(conn: sqlite3.Connection) -> list[str]:
            return _texts(
                conn.execute(
                    "SELECT data FROM task_evidence WHERE group_id = ? AND task_id = ?"
                    " ORDER BY attempt",
                    (group_id, task_id),
                ).fetchall()
            )

        return [Evidence.model_validate_json(d) for d in await self._run(op)]

    # -- skill drafts ------------------------------------------------------
    async def save_skill_draft(self, draft: SkillDraft) -> None:
        row = (draft.id, draft.group_id, draft.status.value, draft.created_at, dump(draft))

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "INSERT INTO skill_drafts (id, group_id, status, created_at, data)"
                    " VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET group_id = excluded.group_id,"
                    " status = excluded.status, created_at = excluded.created_at,"
                    " data = excluded.data",
                    row,
                )

        await self._run(op)

    async def get_skill_draft(
        self, draft_id: str, group_ids: Collection[str] | None = None
    ) -> SkillDraft | None:
        sql, args = "SELECT data FROM skill_drafts WHERE id = ?", [draft_id]
        if group_ids is not None:
            sql += f" AND {_IN_GROUPS}"
            args.append(json.dumps(sorted(group_ids)))

        def op(conn: sqlite3.Connection) -> str | None:
            found = conn.execute(sql, args).fetchone()
            return str(found[0]) if found else None

        data = await self._run(op)
        return SkillDraft.model_validate_json(data) if data else None

    async def list_skill_drafts(
        self,
        status: DraftStatus | None = None,
        limit: int = DEFAULT_DRAFT_LIMIT,
        group_ids: Collection[str] | None = None,
    ) -> list[SkillDraft]:
        if limit <= 0 or (group_ids is not None and not group_ids):
            return []
        where: list[str] = []
        args: list[str | int] = []
        if group_ids is not None:
            where.append(_IN_GROUPS)
            args.append(json.dumps(sorted(group_ids)))
        if status is not None:
            where.append("status = ?")
            args.append(DraftStatus(status).value)
        sql = "SELECT data FROM skill_drafts"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        args.append(limit)

        def op(conn: sqlite3.Connection) -> list[str]:
            return _texts(conn.execute(sql, args).fetchall())

        return [SkillDraft.model_validate_json(d) for d in await self._run(op)]

    # -- learned skills ----------------------------------------------------
    async def save_learned_skill(self, skill: Skill) -> None:
        row = (learned_group(skill), skill.name, dump(skill))

        def op(conn: sqlite3.Connection) -> None:
            with write_txn(conn):
                conn.execute(
                    "INSERT INTO learned_skills (group_id, name, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (group_id, name) DO UPDATE SET data = excluded.data",
                    row,
                )

        await self._run(op)

    async def learned_skills(self, group_id: str | None = None) -> list[Skill]:
        def op(conn: sqlite3.Connection) -> list[str]:
            if group_id is None:
                rows = conn.execute("SELECT data FROM learned_skills ORDER BY name, group_id")
            else:
                rows = conn.execute(
                    "SELECT data FROM learned_skills WHERE group_id = ? ORDER BY name", (group_id,)
                )
            return _texts(rows.fetchall())

        return [Skill.model_validate_json(d) for d in await self._run(op)]
