"""The Redis store's threads (``store.threads``).

Keys (``{G}`` is the group's hash tag):

=========================  ======  ============================================
``P:g:{G}:threads``        zset    ``root:reply`` postings, all of score 0
=========================  ======  ============================================

A reply's posting is written just before the message itself
(:meth:`RedisThreads._post_thread`, called by ``append_message``), so a
stored reply is always found in its thread; a posting whose message was
never stored (a crash in between, or a repeat of a ``clientMessageId``
stored under its first id) names no message and is skipped when read.
Message ids are time-ordered and of one length, so a thread's postings in
lexical order are its replies in the order they were written.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

import redis.asyncio as aioredis

from store.base import GroupMessage
from store.redis_errors import redis_errors
from store.threads import MAX_THREAD_READ, ThreadSummary, summarize, thread_of

THREAD_KINDS = ("threads",)


def _range(root_id: str) -> tuple[str, str]:
    """The lexical range of the postings under ``root_id`` (``;`` follows ``:``)."""
    return f"[{root_id}:", f"({root_id};"


class RedisThreads:
    """``store.threads.ThreadLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis

    @abstractmethod
    def _key(self, group_id: str, kind: str) -> str: ...

    @abstractmethod
    def _check_open(self) -> None: ...

    async def _post_thread(self, group_id: str, message: GroupMessage) -> None:
        """File a reply under its thread, before the reply itself is stored."""
        root = thread_of(message.meta)
        if root is not None:
            with redis_errors():
                await self._r.zadd(self._key(group_id, "threads"), {f"{root}:{message.id}": 0})

    async def _postings(self, group_id: str, root_ids: list[str], limit: int) -> list[list[str]]:
        key = self._key(group_id, "threads")
        async with self._r.pipeline(transaction=False) as pipe:
            for root in root_ids:
                low, high = _range(root)
                # Newest first, so ``limit`` keeps the newest.
                pipe.zrevrangebylex(key, high, low, start=0, num=limit)
            found = await pipe.execute()
        return [[str(p).split(":", 1)[1] for p in reversed(got)] for got in found]

    async def _messages(self, group_id: str, ids: list[str]) -> dict[str, GroupMessage]:
        if not ids:
            return {}
        blobs = await self._r.hmget(self._key(group_id, "msgs"), ids)
        return {
            i: GroupMessage.model_validate_json(b) for i, b in zip(ids, blobs, strict=True) if b
        }

    async def thread_replies(
        self, group_id: str, root_id: str, *, limit: int = MAX_THREAD_READ
    ) -> list[GroupMessage]:
        self._check_open()
        if limit <= 0:
            return []
        with redis_errors():
            [ids] = await self._postings(group_id, [root_id], limit)
            found = await self._messages(group_id, ids)
        return [found[i] for i in ids if i in found]

    async def thread_summaries(
        self, group_id: str, root_ids: Sequence[str]
    ) -> dict[str, ThreadSummary]:
        self._check_open()
        wanted = list(dict.fromkeys(root_ids))
        if not wanted:
            return {}
        with redis_errors():
            per_root = await self._postings(group_id, wanted, MAX_THREAD_READ)
            found = await self._messages(group_id, [i for ids in per_root for i in ids])
        summaries: dict[str, ThreadSummary] = {}
        for root, ids in zip(wanted, per_root, strict=True):
            summary = summarize(root, (found[i] for i in ids if i in found))
            if summary is not None:
                summaries[root] = summary
        return summaries
