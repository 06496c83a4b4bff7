"""The Redis store's team-mode records (``store.tasks``).

Keys (beside those in ``store.redis``; ``P`` is the prefix, ``{G}`` the
group's hash tag):

==============================  ======  ==========================================
``P:g:{G}:tasks``               hash    task id -> Task JSON
``P:g:{G}:tasklist``            zset    every task id, scored by ``created_at``
``P:g:{G}:taskopen``            zset    the open task ids, scored by ``created_at``
``P:g:{G}:evidence``            hash    ``task id NUL attempt`` -> Evidence JSON
``P:g:{G}:evindex``             zset    the same fields, all scored 0 (by task, by lex)
``P:taskgroups``                set     ids of the groups that have had an open task
``P:{skills}:drafts``           hash    draft id -> SkillDraft JSON
``P:{skills}:drafts:all``       zset    every draft id, scored by ``created_at``
``P:{skills}:drafts:status:S``  zset    the ids of the drafts in status S, likewise
``P:{skills}:learned``          hash    skill name -> Skill JSON
==============================  ======  ==========================================

Equal scores sort by member, so a sorted set read backwards gives newest
first by ``created_at`` and then id, the order the embedded store's indexes
give. A list is one Lua script (the ids and their records read in one
step), a save one MULTI/EXEC transaction. The skill keys share the
``{skills}`` hash tag, so those transactions stay in one Redis Cluster slot.

A group enters ``P:taskgroups`` (before its task is written, so a crash in
between leaves a group with nothing open there, never an open task unseen
by ``open_tasks``) and leaves it when the group is deleted, with its task
and evidence keys; drafts and learned skills are not a group's and stay.
"""

from __future__ import annotations

from abc import abstractmethod

import redis.asyncio as aioredis

from protocol.tasks import DraftStatus, Evidence, Skill, SkillDraft, Task
from store.redis_errors import redis_errors
from store.tasks import (
    DEFAULT_DRAFT_LIMIT,
    DEFAULT_TASK_LIMIT,
    by_attempt,
    by_name,
    dump,
    oldest_open_first,
)

# The per-group keys of tasks and evidence, deleted with the group.
TASK_KINDS = ("tasks", "tasklist", "taskopen", "evidence", "evindex")

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

    def _skill_key(self, kind: str) -> str:
        return f"{self.prefix}:{{skills}}:{kind}"

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
    async def save_skill_draft(self, draft: SkillDraft) -> None:
        self._check_open()
        with redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self._skill_key("drafts"), draft.id, dump(draft))
                pipe.zadd(self._skill_key("drafts:all"), {draft.id: draft.created_at})
                for status in DraftStatus:
                    key = self._skill_key(f"drafts:status:{status.value}")
                    if status is draft.status:
                        pipe.zadd(key, {draft.id: draft.created_at})
                    else:
                        pipe.zrem(key, draft.id)
                await pipe.execute()

    async def get_skill_draft(self, draft_id: str) -> SkillDraft | None:
        self._check_open()
        with redis_errors():
            data = await self._r.hget(self._skill_key("drafts"), draft_id)
        return SkillDraft.model_validate_json(data) if data else None

    async def list_skill_drafts(
        self, status: DraftStatus | None = None, limit: int = DEFAULT_DRAFT_LIMIT
    ) -> list[SkillDraft]:
        self._check_open()
        if limit <= 0:
            return []
        kind = "drafts:all" if status is None else f"drafts:status:{DraftStatus(status).value}"
        found = await self._newest(self._skill_key(kind), self._skill_key("drafts"), limit - 1)
        return [SkillDraft.model_validate_json(d) for d in found]

    # -- learned skills ----------------------------------------------------
    async def save_learned_skill(self, skill: Skill) -> None:
        self._check_open()
        with redis_errors():
            await self._r.hset(self._skill_key("learned"), skill.name, dump(skill))

    async def learned_skills(self) -> list[Skill]:
        self._check_open()
        with redis_errors():
            blobs = await self._r.hvals(self._skill_key("learned"))
        return by_name([Skill.model_validate_json(b) for b in blobs])
