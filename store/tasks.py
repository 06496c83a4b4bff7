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
- skill drafts and learned skills are knowledge, not a group's chat: they
  are not under any group and outlive the group they were learned in, while
  a group's tasks and evidence are deleted with it.

Order is the same on both backends: tasks and drafts newest first by
``created_at`` and then id (descending), evidence by attempt, learned skills
by name, and open tasks oldest first by ``created_at``, group id and task id.
"""

from __future__ import annotations

from abc import abstractmethod
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
    return sorted(skills, key=lambda s: s.name)


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
        """Insert or replace a skill draft (by id)."""

    @abstractmethod
    async def get_skill_draft(self, draft_id: str) -> SkillDraft | None: ...

    @abstractmethod
    async def list_skill_drafts(
        self, status: DraftStatus | None = None, limit: int = DEFAULT_DRAFT_LIMIT
    ) -> list[SkillDraft]:
        """The newest ``limit`` drafts (of ``status`` when given), newest first."""

    @abstractmethod
    async def save_learned_skill(self, skill: Skill) -> None:
        """Insert or replace a published skill (by name)."""

    @abstractmethod
    async def learned_skills(self) -> list[Skill]:
        """Every learned skill, by name."""
