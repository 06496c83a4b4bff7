"""The Redis store's member changes, presence and VP placement.

See ``store.members`` and ``store.placement``.

A mixin of :class:`~store.redis.RedisStore`. A member change is an optimistic
transaction (``_watched``): WATCH the group's record, read it, apply the
change in Python (the same :func:`~store.members.apply_change` as the
embedded store), and write it in MULTI/EXEC; when another client wrote the
record in between, EXEC fails and the change is applied again to the record
that client left.

Presence is one sorted set per user, ``P:presence:{user}``: each gateway
process (node) with its expiry time as score, the key itself expiring with
the newest entry, so a process that dies stops counting without cleanup.

VP placement is one hash, ``P:vp_hosts`` (VP id to host number), changed
by an optimistic transaction like a member change.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from store.base import Group, NotFound, StoreError
from store.members import MemberChange
from store.membership import apply_change
from store.placement import assign
from store.redis_errors import redis_errors

# A change that loses the race this many times in a row gives up (it never
# does in practice: each retry only waits for one competing write).
_MAX_ATTEMPTS = 50

T = TypeVar("T")


class RedisMembers:
    """``MemberStore``, ``PresenceStore`` and ``PlacementStore`` on the store's connection pool."""

    prefix: str
    _r: aioredis.Redis

    @abstractmethod
    def _key(self, group_id: str, kind: str) -> str: ...

    @abstractmethod
    def _check_open(self) -> None: ...

    def _presence_key(self, user: str) -> str:
        return f"{self.prefix}:presence:{user}"

    async def _watched(
        self, key: str, attempt: Callable[[Pipeline], Awaitable[T]], gave_up: str
    ) -> T:
        """``attempt`` as an optimistic transaction on ``key``, tried again while it loses.

        ``attempt`` reads through the pipeline, which watches ``key``, then
        queues its writes after ``pipe.multi()`` and executes them; when
        another client wrote ``key`` in between, the execute fails and
        ``attempt`` runs again on what that client left.
        """
        with redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                for _ in range(_MAX_ATTEMPTS):
                    try:
                        await pipe.watch(key)
                        return await attempt(pipe)
                    except WatchError:
                        continue
                    finally:
                        await pipe.reset()
        raise StoreError(gave_up)

    async def change_members(self, group_id: str, change: MemberChange) -> Group:
        self._check_open()
        key = self._key(group_id, "group")

        async def attempt(pipe: Pipeline) -> Group:
            data = await pipe.get(key)
            if not data:
                raise NotFound(f"group {group_id!r} not found")
            group = apply_change(Group.model_validate_json(data), change)
            pipe.multi()
            pipe.set(key, group.model_dump_json(), xx=True)
            await pipe.execute()
            return group

        gave_up = f"group {group_id!r}: the member change kept losing races; try again"
        return await self._watched(key, attempt, gave_up)

    async def mark_online(self, users: Iterable[str], node: str, ttl_s: float) -> None:
        self._check_open()
        expires_ms = int((time.time() + ttl_s) * 1000)
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for user in users:
                    key = self._presence_key(user)
                    pipe.zadd(key, {node: expires_ms})
                    pipe.zremrangebyscore(key, "-inf", int(time.time() * 1000) - 1)
                    pipe.pexpire(key, int(ttl_s * 1000) + 1000)
                await pipe.execute()

    async def mark_offline(self, user: str, node: str) -> None:
        self._check_open()
        with redis_errors():
            await self._r.zrem(self._presence_key(user), node)

    async def online(self, users: Iterable[str]) -> set[str]:
        self._check_open()
        wanted = sorted(set(users))
        if not wanted:
            return set()
        now_ms = int(time.time() * 1000)
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for user in wanted:
                    pipe.zcount(self._presence_key(user), now_ms, "+inf")
                counts = await pipe.execute()
        return {user for user, count in zip(wanted, counts, strict=True) if count}

    async def place_vps(self, vp_ids: Sequence[str], hosts: int) -> list[int]:
        self._check_open()
        wanted = list(vp_ids)
        if not wanted:
            return []
        key = f"{self.prefix}:vp_hosts"

        async def attempt(pipe: Pipeline) -> list[int]:
            raw = await pipe.hgetall(key)
            placed = {str(vp_id): int(host) for vp_id, host in raw.items()}
            added = assign(placed, wanted, hosts)
            if added:
                pipe.multi()
                for vp_id, host in added.items():
                    pipe.hset(key, vp_id, host)
                await pipe.execute()
            placed.update(added)
            return [placed[vp_id] for vp_id in wanted]

        return await self._watched(key, attempt, "placing VPs kept losing races; try again")
