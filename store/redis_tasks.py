"""The Redis store's team-mode records (``store.tasks``).

Keys (beside those in ``store.redis``; ``P`` is the prefix, ``{G}`` the
group's hash tag, ``S`` a draft status):

==============================  ======  ==========================================
``P:g:{G}:tasks``               hash    task id -> Task JSON
``P:g:{G}:tasklist``            zset    every task id, scored by ``created_at``
``P:g:{G}:taskopen``            zset    the open task ids, scored by ``created_at``
``P:g:{G}:evidence``            hash    ``task id NUL attempt`` -> Evidence JSON
``P:g:{G}:evindex``             zset    the same fields, all scored 0 (by task, by lex)
``P:g:{G}:drafts``              hash    draft id -> SkillDraft JSON
``P:g:{G}:draftlist``           zset    every draft id, scored by ``created_at``
``P:g:{G}:draftlist:S``         zset    the ids of the drafts in status S, likewise
``P:g:{G}:skills``              hash    learned skill name -> Skill JSON
``P:taskgroups``                set     ids of the groups that have had an open
                                        task, a draft or a learned skill
==============================  ======  ==========================================

Equal scores sort by member, so a sorted set read backwards gives newest
first by ``created_at`` and then id, the order the embedded store's indexes
give. A list of one group is one Lua script (the ids and their records read
in one step), a save one MULTI/EXEC transaction; every key of one group
shares its ``{G}`` hash tag, so those stay in one Redis Cluster slot. Drafts
of several groups are each group's newest ``limit`` (one script per group,
in one pipeline), merged here: so the filter is in the query itself, and
another group's newer drafts never push a member's out of the page.

A group enters ``P:taskgroups`` before an open task, a draft or a learned
skill of it is written (so a crash in between leaves a group with nothing
there, never a record unseen by ``open_tasks`` or by a read across groups:
every group's drafts or skills, a draft looked up by id alone), and leaves
it when the group is deleted, with every key above (the group's
``TASK_KINDS``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Collection

import redis.asyncio as aioredis

from protocol.tasks import DraftStatus, Evidence, Skill, SkillDraft, Task
from store.redis_errors import redis_errors
from store.tasks import (
    DEFAULT_DRAFT_LIMIT,
    DEFAULT_TASK_LIMIT,
    by_attempt,
    by_name,
    dump,
    learned_group,
    newest_first,
    oldest_open_first,
)

_DRAFT_STATUS_KINDS = tuple(f"draftlist:{status.value}" for status in DraftStatus)
# The per-group keys of tasks, evidence, drafts and learned skills, deleted
# with the group.
TASK_KINDS = (
    "tasks",
    "tasklist",
    "taskopen",
    "evidence",
    "evindex",
    "drafts",
    "draftlist",
    *_DRAFT_STATUS_KINDS,
    "skills",
)

_SEP = "\x00"

# KEYS: a sorted set of ids, the hash of their records. ARGV: the last rank
# wanted (-1: all). The records of the ids from the highest score down, those
# still in the hash.
_NEWEST = """
local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]))
local out = {}
for _, id in ipairs(ids) do
  local record = redis.call('HGET', KEYS[2], id)
  if record then out[#out + 1] = record end
end
return out
"""

# KEYS: the evidence index and hash. ARGV: the lowest and highest member,
# for ZRANGEBYLEX. The records of one task's attempts.
_EVIDENCE = """
local fields = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2])
local out = {}
for _, field in ipairs(fields) do
  local record = redis.call('HGET', KEYS[2], field)
  if record then out[#out + 1] = record end
end
return out
"""


class RedisTasks:
    """``store.tasks.TaskLog`` on Redis (mixed into RedisStore)."""

    prefix: str
    _r: aioredis.Redis

    @abstractmethod
    def _key(self, group_id: str, kind: str) -> str: ...

    @abstractmethod
    def _check_open(self) -> None: ...

    @property
    def _task_groups(self) -> str:
        return f"{self.prefix}:taskgroups"

    async def _newest(self, index: str, records: str, last_rank: int) -> list[str]:
        with redis_errors():
            found = await self._r.eval(_NEWEST, 2, index, records, last_rank)
        return [str(record) for record in found]

    # -- tasks -------------------------------------------------------------
    async def save_task(self, task: Task) -> None:
        self._check_open()
        data = dump(task)
        group_id = task.group_id
        with redis_errors():
            if task.open:
                await self._r.sadd(self._task_groups, group_id)
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self._key(group_id, "tasks"), task.id, data)
                pipe.zadd(self._key(group_id, "tasklist"), {task.id: task.created_at})
                if task.open:
                    pipe.zadd(self._key(group_id, "taskopen"), {task.id: task.created_at})
                else:
                    pipe.zrem(self._key(group_id, "taskopen"), task.id)
                await pipe.execute()

    async def get_task(self, group_id: str, task_id: str) -> Task | None:
        self._check_open()
        with redis_errors():
            data = await self._r.hget(self._key(group_id, "tasks"), task_id)
        return Task.model_validate_json(data) if data else None

    async def list_tasks(self, group_id: str, limit: int = DEFAULT_TASK_LIMIT) -> list[Task]:
        self._check_open()
        if limit <= 0:
            return []
        found = await self._newest(
            self._key(group_id, "tasklist"), self._key(group_id, "tasks"), limit - 1
        )
        return [Task.model_validate_json(d) for d in found]

    async def active_task(self, group_id: str) -> Task | None:
        self._check_open()
        found = await self._newest(self._key(group_id, "taskopen"), self._key(group_id, "tasks"), 0)
        return Task.model_validate_json(found[0]) if found else None

    async def open_tasks(self) -> list[Task]:
        self._check_open()
        with redis_errors():
            groups = sorted(str(g) for g in await self._r.smembers(self._task_groups))
            if not groups:
                return []
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    keys = (self._key(group_id, "taskopen"), self._key(group_id, "tasks"))
                    pipe.eval(_NEWEST, 2, *keys, -1)
                per_group = await pipe.execute()
        tasks = [Task.model_validate_json(d) for found in per_group for d in found]
        return oldest_open_first(tasks)

    # -- evidence ----------------------------------------------------------
    async def save_evidence(self, evidence: Evidence) -> None:
        self._check_open()
        group_id = evidence.group_id
        field = f"{evidence.task_id}{_SEP}{evidence.attempt}"
        with redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self._key(group_id, "evidence"), field, dump(evidence))
                pipe.zadd(self._key(group_id, "evindex"), {field: 0})
                await pipe.execute()

    async def evidence_of(self, group_id: str, task_id: str) -> list[Evidence]:
        self._check_open()
        # Every ``task_id NUL ...`` member sorts between these two bounds, and
        # no member of another task does (not even one whose id starts so).
        low, high = f"[{task_id}{_SEP}", f"({task_id}\x01"
        keys = (self._key(group_id, "evindex"), self._key(group_id, "evidence"))
        with redis_errors():
            found = await self._r.eval(_EVIDENCE, 2, *keys, low, high)
        return by_attempt([Evidence.model_validate_json(str(d)) for d in found])

    # -- skill drafts ------------------------------------------------------
    async def _groups(self, group_ids: Collection[str] | None) -> list[str]:
        """``group_ids``, sorted; every group with team-mode records when None."""
        if group_ids is not None:
            return sorted(set(group_ids))
        with redis_errors():
            return sorted(str(g) for g in await self._r.smembers(self._task_groups))

    async def save_skill_draft(self, draft: SkillDraft) -> None:
        self._check_open()
        group_id = draft.group_id
        with redis_errors():
            await self._r.sadd(self._task_groups, group_id)
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self._key(group_id, "drafts"), draft.id, dump(draft))
                pipe.zadd(self._key(group_id, "draftlist"), {draft.id: draft.created_at})
                for status in DraftStatus:
                    key = self._key(group_id, f"draftlist:{status.value}")
                    if status is draft.status:
                        pipe.zadd(key, {draft.id: draft.created_at})
                    else:
                        pipe.zrem(key, draft.id)
                await pipe.execute()

    async def get_skill_draft(
        self, draft_id: str, group_ids: Collection[str] | None = None
    ) -> SkillDraft | None:
        self._check_open()
        groups = await self._groups(group_ids)
        if not groups:
            return None
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    pipe.hget(self._key(group_id, "drafts"), draft_id)
                found = await pipe.execute()
        data = next((d for d in found if d), None)
        return SkillDraft.model_validate_json(data) if data else None

    async def list_skill_drafts(
        self,
        status: DraftStatus | None = None,
        limit: int = DEFAULT_DRAFT_LIMIT,
        group_ids: Collection[str] | None = None,
    ) -> list[SkillDraft]:
        self._check_open()
        if limit <= 0:
            return []
        groups = await self._groups(group_ids)
        if not groups:
            return []
        kind = "draftlist" if status is None else f"draftlist:{DraftStatus(status).value}"
        # Each group's newest ``limit`` holds every draft of it that can be in
        # the newest ``limit`` of all of them.
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    keys = (self._key(group_id, kind), self._key(group_id, "drafts"))
                    pipe.eval(_NEWEST, 2, *keys, limit - 1)
                per_group = await pipe.execute()
        drafts = [SkillDraft.model_validate_json(d) for found in per_group for d in found]
        return newest_first(drafts)[:limit]

    # -- learned skills ----------------------------------------------------
    async def save_learned_skill(self, skill: Skill) -> None:
        self._check_open()
        group_id = learned_group(skill)
        with redis_errors():
            await self._r.sadd(self._task_groups, group_id)
            await self._r.hset(self._key(group_id, "skills"), skill.name, dump(skill))

    async def learned_skills(self, group_id: str | None = None) -> list[Skill]:
        self._check_open()
        groups = await self._groups(None if group_id is None else [group_id])
        if not groups:
            return []
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for group in groups:
                    pipe.hvals(self._key(group, "skills"))
                per_group = await pipe.execute()
        return by_name([Skill.model_validate_json(b) for blobs in per_group for b in blobs])
