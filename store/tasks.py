"""Team mode in the store: tasks, their evidence, skill drafts and learned skills.

The models are the protocol's (``protocol.tasks``); the store keeps each as
its JSON text (camelCase, as on the wire) beside the few columns or index
entries a read needs to find it without decoding every record:

- a task belongs to a group and is written only by the coordinator that owns
  the group, so a save simply replaces the stored record. Whether it is open
  (its status is one of ``OPEN_STATUSES``) is decided when it is saved and
  kept in an index, so ``active_task`` and ``open_tasks`` read only open
  tasks;
- evidence is one record per attempt of a task, replaced when saved again;
- skill drafts and learned skills belong to the group they were learned
  in: a draft quotes that group's conversation, and a published one is
  that group's skill (it may replace a built-in of its name for that group
  only). A learned skill is kept by (group, name); drafts are listed by
  group in the store's own query, so a member's drafts are never pushed out
  of a page by other groups' newer ones.

Everything of a group (tasks, evidence, drafts, learned skills) is deleted
with it. Order is the same on both backends: tasks and drafts newest first
by ``created_at`` and then id (descending), evidence by attempt, a group's
learned skills by name (every group's by name, then group id), and open
tasks oldest first by ``created_at``, group id and task id.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection
from typing import Protocol

from pydantic import BaseModel

from protocol.tasks import DraftStatus, Evidence, Skill, SkillDraft, Task

DEFAULT_TASK_LIMIT = 20
DEFAULT_DRAFT_LIMIT = 50


def dump(model: BaseModel) -> str:
    """A team-mode record as the JSON text the store keeps (wire names)."""
    return model.model_dump_json(by_alias=True)


def oldest_open_first(tasks: list[Task]) -> list[Task]:
    return sorted(tasks, key=lambda t: (t.created_at, t.group_id, t.id))


def by_attempt(evidence: list[Evidence]) -> list[Evidence]:
    return sorted(evidence, key=lambda e: e.attempt)


def by_name(skills: list[Skill]) -> list[Skill]:
    return sorted(skills, key=lambda s: (s.name, s.group_id or ""))


def newest_first(drafts: list[SkillDraft]) -> list[SkillDraft]:
    return sorted(drafts, key=lambda d: (d.created_at, d.id), reverse=True)


def learned_group(skill: Skill) -> str:
    """The group a learned skill is saved under; ValueError if it names none."""
    if not skill.group_id:
        raise ValueError(f"learned skill {skill.name!r} names no group: it is a group's own")
    return skill.group_id


class TaskLog(Protocol):
    """Team-mode records: a group's tasks and evidence, and the skills learned from them."""

    @abstractmethod
    async def save_task(self, task: Task) -> None:
        """Insert or replace ``task`` (under ``task.group_id``); it is open or not by its status."""

    @abstractmethod
    async def get_task(self, group_id: str, task_id: str) -> Task | None: ...

    @abstractmethod
    async def list_tasks(self, group_id: str, limit: int = DEFAULT_TASK_LIMIT) -> list[Task]:
        """The group's newest ``limit`` tasks, newest first (``created_at``, then id)."""

    @abstractmethod
    async def active_task(self, group_id: str) -> Task | None:
        """The group's newest open task (status in ``OPEN_STATUSES``), or None."""

    @abstractmethod
    async def open_tasks(self) -> list[Task]:
        """Every open task of every group, oldest first (``created_at``, group id, id)."""

    @abstractmethod
    async def save_evidence(self, evidence: Evidence) -> None:
        """Insert or replace the evidence of one attempt (group, task, attempt)."""

    @abstractmethod
    async def evidence_of(self, group_id: str, task_id: str) -> list[Evidence]:
        """A task's evidence, one per attempt, by attempt ascending."""

    @abstractmethod
    async def save_skill_draft(self, draft: SkillDraft) -> None:
        """Insert or replace a skill draft (by id, under ``draft.group_id``)."""

    @abstractmethod
    async def get_skill_draft(
        self, draft_id: str, group_ids: Collection[str] | None = None
    ) -> SkillDraft | None:
        """The draft of that id if it belongs to one of ``group_ids`` (to any group when None)."""

    @abstractmethod
    async def list_skill_drafts(
        self,
        status: DraftStatus | None = None,
        limit: int = DEFAULT_DRAFT_LIMIT,
        group_ids: Collection[str] | None = None,
    ) -> list[SkillDraft]:
        """The newest ``limit`` drafts of ``group_ids`` (every group's when None), newest first.

        Only drafts in ``status`` when it is given.
        """

    @abstractmethod
    async def save_learned_skill(self, skill: Skill) -> None:
        """Insert or replace the skill of ``skill.name`` in ``skill.group_id`` only.

        ValueError when ``skill.group_id`` is not set: a learned skill is a group's own.
        """

    @abstractmethod
    async def learned_skills(self, group_id: str | None = None) -> list[Skill]:
        """The group's learned skills by name; every group's (by name, group) when None."""
