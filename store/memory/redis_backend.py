"""The Redis memory backend: a small inverted index with BM25 in Python.

A plain Redis has no full-text search (RediSearch is a module we cannot count
on), so this keeps its own index. Per scope ``S``, under a key prefix ``P``:

- ``P item:<id>``         JSON: the item, its term frequencies and length
- ``P s:S#all``           sorted set id -> created_at (listing, newest first)
- ``P s:S#kind:<kind>``   the same, per kind
- ``P s:S#t:<term>``      hash id -> term frequency (the postings of a term)
- ``P s:S#len``           hash id -> document length in terms
- ``P s:S#stats``         hash ``n`` (documents) and ``total`` (terms)

Postings are kept per scope because every search is limited to a VP's few
scopes: reading only their postings is the scope filter, and the BM25
statistics (document count, document frequency, average length) are summed
over exactly the scopes searched.

A search reads the whole postings of each query term in each scope, which is
cheap at the size one user's or one group's memory reaches (thousands of
items), and keeps every write to a handful of small hash updates.

Writes are optimistic transactions (WATCH the item key, MULTI/EXEC), so
concurrent writers from several processes never leave the index and the items
out of step. Terms come from ``text.index_terms``; a tag counts twice, as the
SQLite backend weights its tag column.
"""

from __future__ import annotations

import builtins
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from store.memory.model import MemoryBackend, MemoryItem
from store.memory.text import index_terms, query_terms

# Standard BM25 constants, the same FTS5's bm25() uses.
K1 = 1.2
B = 0.75
TAG_WEIGHT = 2
_MAX_RETRIES = 50

# Queues a transaction's commands on a pipeline already in MULTI.
Writes = Callable[[Any], None]


def _frequencies(text: str, tags: list[str]) -> dict[str, int]:
    tf = Counter(index_terms(text))
    for term in index_terms(" ".join(tags)):
        tf[term] += TAG_WEIGHT
    return dict(tf)


class RedisMemory(MemoryBackend):
    """Memory in Redis under ``prefix``; any number of processes may share it."""

    def __init__(self, url: str, *, prefix: str = "yeaft:mem:") -> None:
        self.url = url
        self.prefix = prefix
        self._redis: Any = aioredis.from_url(url, decode_responses=True)

    # -- keys -------------------------------------------------------------

    def _item_key(self, item_id: str) -> str:
        return f"{self.prefix}item:{item_id}"

    def _scope_key(self, scope: str, suffix: str) -> str:
        # "#" never occurs in a scope, so no scope's keys can collide with
        # another's.
        return f"{self.prefix}s:{scope}#{suffix}"

    # -- transactions -----------------------------------------------------

    async def _transact(
        self, key: str, plan: Callable[[dict[str, Any] | None], tuple[Any, Writes | None]]
    ) -> Any:
        """Read ``key``, let ``plan`` decide, and write atomically.

        ``plan`` gets the stored record (or ``None``) and returns the result
        and the writes to queue, or ``None`` to write nothing. A concurrent
        change to ``key`` between the read and the write makes Redis refuse
        the transaction, and the whole step is tried again on fresh data.
        """
        async with self._redis.pipeline(transaction=True) as pipe:
            for _ in range(_MAX_RETRIES):
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    result, writes = plan(None if raw is None else json.loads(raw))
                    if writes is None:
                        await pipe.reset()
                        return result
                    pipe.multi()
                    writes(pipe)
                    await pipe.execute()
                    return result
                except WatchError:
                    continue
        raise RuntimeError(f"memory item {key!r} kept changing; gave up after {_MAX_RETRIES}")

    def _queue_index(self, pipe: Any, item: MemoryItem, tf: dict[str, int]) -> None:
        length = sum(tf.values())
        for term, n in tf.items():
            pipe.hset(self._scope_key(item.scope, f"t:{term}"), item.id, n)
        pipe.hset(self._scope_key(item.scope, "len"), item.id, length)
        pipe.hincrby(self._scope_key(item.scope, "stats"), "n", 1)
        pipe.hincrby(self._scope_key(item.scope, "stats"), "total", length)

    def _queue_unindex(self, pipe: Any, item: MemoryItem, tf: dict[str, int]) -> None:
        for term in tf:
            pipe.hdel(self._scope_key(item.scope, f"t:{term}"), item.id)
        pipe.hdel(self._scope_key(item.scope, "len"), item.id)
        pipe.hincrby(self._scope_key(item.scope, "stats"), "n", -1)
        pipe.hincrby(self._scope_key(item.scope, "stats"), "total", -sum(tf.values()))

    def _record(self, item: MemoryItem, tf: dict[str, int]) -> str:
        return json.dumps({"item": item.model_dump(), "tf": tf}, ensure_ascii=False)

    # -- MemoryBackend ----------------------------------------------------

    async def add(self, item: MemoryItem) -> MemoryItem:
        item = item.model_copy(deep=True)
        tf = _frequencies(item.text, item.tags)

        def plan(old: dict[str, Any] | None) -> tuple[MemoryItem, Writes]:
            if old is not None:
                raise ValueError(f"memory id {item.id!r} already exists")

            def writes(pipe: Any) -> None:
                order = {item.id: item.created_at}
                pipe.set(self._item_key(item.id), self._record(item, tf))
                pipe.zadd(self._scope_key(item.scope, "all"), order)
                pipe.zadd(self._scope_key(item.scope, f"kind:{item.kind}"), order)
                self._queue_index(pipe, item, tf)

            return item, writes

        result: MemoryItem = await self._transact(self._item_key(item.id), plan)
        return result

    async def update(
        self, item_id: str, text: str | None = None, tags: builtins.list[str] | None = None
    ) -> MemoryItem | None:
        def plan(old: dict[str, Any] | None) -> tuple[MemoryItem | None, Writes | None]:
            if old is None:
                return None, None
            before = MemoryItem.model_validate(old["item"])
            item = before.model_copy(deep=True)
            if text is not None:
                item.text = text
            if tags is not None:
                item.tags = builtins.list(tags)
            item.updated_at = time.time()
            tf = _frequencies(item.text, item.tags)

            def writes(pipe: Any) -> None:
                self._queue_unindex(pipe, before, old["tf"])
                self._queue_index(pipe, item, tf)
                pipe.set(self._item_key(item.id), self._record(item, tf))

            return item, writes

        result: MemoryItem | None = await self._transact(self._item_key(item_id), plan)
        return result

    async def delete(self, item_id: str) -> bool:
        def plan(old: dict[str, Any] | None) -> tuple[bool, Writes | None]:
            if old is None:
                return False, None
            item = MemoryItem.model_validate(old["item"])

            def writes(pipe: Any) -> None:
                self._queue_unindex(pipe, item, old["tf"])
                pipe.zrem(self._scope_key(item.scope, "all"), item.id)
                pipe.zrem(self._scope_key(item.scope, f"kind:{item.kind}"), item.id)
                pipe.delete(self._item_key(item.id))

            return True, writes

        result: bool = await self._transact(self._item_key(item_id), plan)
        return result

    async def get(self, item_id: str) -> MemoryItem | None:
        return _parse(await self._redis.get(self._item_key(item_id)))

    async def _load(self, ids: builtins.list[str]) -> builtins.list[MemoryItem | None]:
        if not ids:
            return []
        raws = await self._redis.mget([self._item_key(i) for i in ids])
        return [_parse(r) for r in raws]

    async def list(
        self, scope: str, kind: str | None = None, limit: int = 50
    ) -> builtins.list[MemoryItem]:
        if limit <= 0:
            return []
        key = self._scope_key(scope, "all" if kind is None else f"kind:{kind}")
        ids = await self._redis.zrevrange(key, 0, limit - 1)
        # An item deleted between the two reads is simply left out.
        return [item for item in await self._load(ids) if item is not None]

    async def search(
        self, scopes: builtins.list[str], query: str, limit: int = 50
    ) -> builtins.list[tuple[MemoryItem, float]]:
        terms = query_terms(query)
        scopes = builtins.list(dict.fromkeys(scopes))
        if not terms or not scopes or limit <= 0:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for scope in scopes:
            pipe.hmget(self._scope_key(scope, "stats"), ["n", "total"])
        for scope in scopes:
            for term in terms:
                pipe.hgetall(self._scope_key(scope, f"t:{term}"))
        replies = await pipe.execute()

        docs = sum(int(n or 0) for n, _ in replies[: len(scopes)])
        total = sum(int(t or 0) for _, t in replies[: len(scopes)])
        if docs <= 0:
            return []
        # postings[term] = {item id: tf}; df is the number of such ids.
        postings: dict[str, dict[str, int]] = {t: {} for t in terms}
        owner: dict[str, str] = {}
        it = iter(replies[len(scopes) :])
        for scope in scopes:
            for term in terms:
                for item_id, n in next(it).items():
                    postings[term][item_id] = int(n)
                    owner[item_id] = scope
        if not owner:
            return []
        lengths = await self._lengths(owner)
        scores = _bm25(postings, lengths, docs, total / docs)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
        items = await self._load(best)
        return [(item, scores[item.id]) for item in items if item is not None]

    async def _lengths(self, owner: dict[str, str]) -> dict[str, int]:
        by_scope: dict[str, builtins.list[str]] = {}
        for item_id, scope in owner.items():
            by_scope.setdefault(scope, []).append(item_id)
        pipe = self._redis.pipeline(transaction=False)
        for scope, ids in by_scope.items():
            pipe.hmget(self._scope_key(scope, "len"), ids)
        replies = await pipe.execute()
        lengths: dict[str, int] = {}
        for ids, values in zip(by_scope.values(), replies, strict=True):
            for item_id, value in zip(ids, values, strict=True):
                lengths[item_id] = int(value or 1)
        return lengths

    async def clear(self) -> int:
        """Delete every key under this backend's prefix; returns how many."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "*"
        keys = [k async for k in self._redis.scan_iter(match=pattern, count=500)]
        for i in range(0, len(keys), 500):
            await self._redis.delete(*keys[i : i + 500])
        return len(keys)

    async def close(self) -> None:
        await self._redis.aclose()


def _parse(raw: str | None) -> MemoryItem | None:
    return None if raw is None else MemoryItem.model_validate(json.loads(raw)["item"])


def _bm25(
    postings: dict[str, dict[str, int]], lengths: dict[str, int], docs: int, avg_len: float
) -> dict[str, float]:
    """BM25 of every document that holds at least one query term."""
    scores: dict[str, float] = {}
    for hits in postings.values():
        if not hits:
            continue
        # The "+1" form of the IDF stays positive for a term that is in most
        # documents, which in a small scope is common.
        idf = math.log(1.0 + (docs - len(hits) + 0.5) / (len(hits) + 0.5))
        for item_id, tf in hits.items():
            norm = K1 * (1.0 - B + B * lengths.get(item_id, 1) / max(avg_len, 1e-9))
            scores[item_id] = scores.get(item_id, 0.0) + idf * tf * (K1 + 1.0) / (tf + norm)
    return scores
