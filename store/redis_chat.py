"""The Redis store's search, deletion, read marks and usage totals (``ChatViews``).

Keys (beside those in ``store.redis``; ``{G}`` is the group's hash tag):

=======================  ======  ===============================================
``P:g:{G}:terms``        zset    ``term NUL messageId``, all scored 0 (the index)
``P:g:{G}:reads``        hash    username -> log position of the last message read
``P:g:{G}:uturns``       set     turn ids whose usage is counted
``P:g:{G}:usage``        hash    ``turns``, ``input``, ``output``, ``cost`` totals
=======================  ======  ===============================================

RediSearch is not assumed, so search is an inverted index kept on append:
one sorted set per group whose members sort by term, read by prefix with
ZREVRANGEBYLEX (at most ``MAX_POSTINGS_PER_TERM`` ids per query word and
group). It is written just after a message is stored, not in the same
script: a crash in between leaves one message unsearchable, never a
message lost. Changing a stored message (a deletion, a supersede) is an
optimistic WATCH/MULTI transaction on the message hash.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import redis.asyncio as aioredis
from redis.exceptions import WatchError

from protocol import EventFrame
from protocol.inbox import ActivityEvent
from store import redis_scripts as scripts
from store._shared import as_deleted, as_superseded, last_shown
from store.base import GroupMessage, StoreError
from store.chatviews import (
    LAST_MESSAGE_WINDOW,
    MAX_POSTINGS_PER_TERM,
    MAX_SEARCH_HITS,
    UNREAD_CAP,
    UNREAD_SCAN,
    GroupSummary,
    LastMessage,
    SearchHit,
    TurnUsage,
    UsageTotals,
    counts_as_unread,
    is_searchable,
    query_terms,
    snippet,
    terms_of,
)
from store.mentions import ACTIVITY_LOG, counts_as_mention, deleted_activity, read_activity
from store.redis_errors import redis_errors
from store.redis_mentions import mention_postings
from store.threads import thread_of

log = logging.getLogger(__name__)

CHAT_KINDS = ("terms", "reads", "uturns", "usage")

_SEP = "\x00"
_PATCH_ATTEMPTS = 20

# Raise the read mark to the message's position, never lower it: 0 for an
# unknown message, 2 when the mark moved, else 1.
_MARK_READ = """
local pos = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not pos then return 0 end
local current = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
if tonumber(pos) > current then
  redis.call('HSET', KEYS[2], ARGV[2], pos)
  return 2
end
return 1
"""


def usage_values(usage: TurnUsage) -> list[str | int]:
    """A turn's usage as the usage scripts take it after its turn id (``count_usage``)."""
    return [
        int(usage.input_tokens),
        int(usage.output_tokens),
        repr(float(usage.cost_usd)),
        len(usage.accounts),
        *usage.accounts,
        usage.row.field() if usage.row is not None else "",
    ]


def search_postings(message: GroupMessage) -> dict[str, float]:
    """The search index members of a message (score 0: ordered by text), none if unsearchable."""
    if not is_searchable(message.role, message.meta):
        return {}
    return {f"{term}{_SEP}{message.id}": 0.0 for term in terms_of(message.text)}


class RedisChatViews:
    """``ChatViews`` on Redis (mixed into RedisStore, which provides the attributes)."""

    _r: aioredis.Redis

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    async def _usage_rows_key(self, group_id: str, usage: TurnUsage) -> str:
        raise NotImplementedError  # RedisQuotas' own (before this class in RedisStore)

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        raise NotImplementedError  # RedisEvents' own

    async def _activity(self, event: ActivityEvent) -> None:
        """Tell every gateway a read mark moved or a message was deleted (``store.mentions``).

        Appended after the change's own step (the activity log is in another
        cluster slot); a failure costs a push, not the change: logged, not raised.
        """
        try:
            await self.append_event(ACTIVITY_LOG, event)
        except StoreError:
            log.warning("%s activity in %s not appended", event.kind, event.group_id, exc_info=True)

    # -- search ----------------------------------------------------------------
    async def search_messages(
        self, group_ids: Sequence[str], query: str, *, limit: int = 50
    ) -> list[SearchHit]:
        self._check_open()
        terms = query_terms(query)
        groups = list(dict.fromkeys(group_ids))
        limit = max(1, min(limit, MAX_SEARCH_HITS))
        if not terms or not groups:
            return []
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    for term in terms:
                        low = b"[" + term.encode()
                        # 0xff never occurs in UTF-8: every member starting with term sorts below.
                        high = b"(" + term.encode() + b"\xff"
                        pipe.zrevrangebylex(
                            self._key(group_id, "terms"), high, low, 0, MAX_POSTINGS_PER_TERM
                        )
                found = await pipe.execute()
            wanted: list[tuple[str, list[str]]] = []
            for n, group_id in enumerate(groups):
                per_term = found[n * len(terms) : (n + 1) * len(terms)]
                sets = [{str(m).split(_SEP, 1)[1] for m in members} for members in per_term]
                common = set.intersection(*sets) if sets else set()
                # Ids are time-ordered: the newest ``limit`` of each group can win.
                wanted.append((group_id, sorted(common, reverse=True)[:limit]))
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id, some in wanted:
                    if some:
                        pipe.hmget(self._key(group_id, "msgs"), some)
                blobs = await pipe.execute()
        hits: list[SearchHit] = []
        fetched = iter(blobs)
        for group_id, ids in wanted:
            if not ids:
                continue
            for blob in next(fetched):
                if not blob:
                    continue
                m = GroupMessage.model_validate_json(blob)
                if is_searchable(m.role, m.meta):
                    hits.append(
                        SearchHit(
                            group_id,
                            m.id,
                            m.author,
                            m.role,
                            m.ts,
                            snippet(m.text, terms),
                            thread_of(m.meta),
                        )
                    )
        hits.sort(key=lambda h: (h.ts, h.message_id), reverse=True)
        return hits[:limit]

    # -- changing a stored message -----------------------------------------------
    async def _patch(
        self, group_id: str, message_id: str, change: Callable[[GroupMessage], GroupMessage]
    ) -> GroupMessage | None:
        self._check_open()
        msgs, terms = self._key(group_id, "msgs"), self._key(group_id, "terms")
        mentioned = self._key(group_id, "pments")
        with redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                for _ in range(_PATCH_ATTEMPTS):
                    try:
                        await pipe.watch(msgs)
                        data = await pipe.hget(msgs, message_id)
                        if data is None:
                            await pipe.unwatch()
                            return None
                        before = GroupMessage.model_validate_json(data)
                        after = change(before)
                        pipe.multi()
                        pipe.hset(msgs, message_id, after.model_dump_json())
                        old = list(search_postings(before))
                        if old:
                            pipe.zrem(terms, *old)
                        new = search_postings(after)
                        if new:
                            pipe.zadd(terms, new)
                        gone = mention_postings(before)
                        if gone:
                            pipe.zrem(mentioned, *gone)
                        kept = mention_postings(after)
                        if kept:
                            pipe.zadd(mentioned, dict.fromkeys(kept, 0.0))
                        await pipe.execute()
                        return after
                    except WatchError:
                        continue
        raise StoreError(f"message {message_id!r} kept changing; try again")

    async def delete_message(
        self, group_id: str, message_id: str, *, by: str, ts: float
    ) -> GroupMessage | None:
        gone = await self._patch(group_id, message_id, lambda m: as_deleted(m, by, ts))
        if gone is not None:
            await self._activity(deleted_activity(group_id, by, message_id))
        return gone

    async def supersede_message(
        self, group_id: str, message_id: str, *, turn_id: str, by: str, ts: float
    ) -> GroupMessage | None:
        return await self._patch(group_id, message_id, lambda m: as_superseded(m, turn_id, by, ts))

    # -- read marks and the group list ----------------------------------------------
    async def mark_read(self, group_id: str, username: str, message_id: str) -> bool:
        self._check_open()
        keys = [self._key(group_id, "order"), self._key(group_id, "reads")]
        with redis_errors():
            done = int(await self._r.eval(_MARK_READ, 2, *keys, message_id, username))
        if done == 2:
            await self._activity(read_activity(group_id, username, message_id))
        return bool(done)

    async def summaries(self, group_ids: Sequence[str], username: str) -> list[GroupSummary]:
        self._check_open()
        return [await self._summary(g, username) for g in group_ids]

    async def _summary(self, group_id: str, username: str) -> GroupSummary:
        order, msgs = self._key(group_id, "order"), self._key(group_id, "msgs")
        with redis_errors():
            mark = await self._r.hget(self._key(group_id, "reads"), username)
            found = await self._r.zrevrangebyscore(
                order, "+inf", f"({int(float(mark or 0))}", start=0, num=UNREAD_SCAN
            )
            after = [str(i) for i in found]
            recent = [str(i) for i in await self._r.zrevrange(order, 0, LAST_MESSAGE_WINDOW - 1)]
            unread_blobs = await self._r.hmget(msgs, after) if after else []
            recent_blobs = await self._r.hmget(msgs, recent) if recent else []
        unread = mentions = 0
        for blob in unread_blobs:
            if blob:
                m = GroupMessage.model_validate_json(blob)
                unread += counts_as_unread(m.author, m.role, m.meta, username)
                mentions += counts_as_mention(m.author, m.role, m.meta, m.people, username)
        newest = [GroupMessage.model_validate_json(b) for b in reversed(recent_blobs) if b]
        last = last_shown(newest)
        shown = LastMessage(last.id, last.author, last.role, last.text, last.ts) if last else None
        return GroupSummary(group_id, min(unread, UNREAD_CAP), shown, min(mentions, UNREAD_CAP))

    # -- usage ------------------------------------------------------------------
    async def add_usage(self, group_id: str, usage: TurnUsage) -> bool:
        self._check_open()
        keys = [self._key(group_id, k) for k in ("uturns", "usage", "budget")]
        keys.append(await self._usage_rows_key(group_id, usage))
        with redis_errors():
            added = await self._r.eval(
                scripts.ADD_USAGE, len(keys), *keys, usage.turn_id, *usage_values(usage)
            )
        return bool(int(added))

    async def group_usage(self, group_id: str) -> UsageTotals:
        self._check_open()
        with redis_errors():
            totals = await self._r.hgetall(self._key(group_id, "usage"))
        return UsageTotals(
            int(totals.get("turns", 0)),
            int(totals.get("input", 0)),
            int(totals.get("output", 0)),
            float(totals.get("cost", 0.0)),
        )
