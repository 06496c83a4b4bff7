"""The Redis store's index of people's mentions, and its activity events (``store.mentions``).

Keys (beside those in ``store.redis``; ``{G}`` is the group's hash tag):

=======================  ======  ===============================================
``P:g:{G}:pments``       zset    ``username NUL messageId``, all scored 0
=======================  ======  ===============================================

Message ids are time-ordered, so a person's mentions in a group, newest
first, are one ZREVRANGEBYLEX on their name as the prefix. The postings are
added by the message append script, with the message, and rewritten with it
when it changes (a deleted message mentions nobody). The activity log
(:data:`store.mentions.ACTIVITY_LOG`) is an event log like a group's; its
appends go right after the message's or the mark's own step.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis.asyncio as aioredis

from protocol import EventFrame
from protocol.inbox import excerpt_of
from store.base import GroupMessage, StoreError
from store.mentions import (
    ACTIVITY_LOG,
    MAX_MENTIONS_LISTED,
    Mention,
    message_activity,
)
from store.redis_errors import redis_errors
from store.threads import thread_of

log = logging.getLogger(__name__)

MENTION_KINDS = ("pments",)

_SEP = "\x00"


def mention_postings(message: GroupMessage) -> list[str]:
    """The index members of a message's mentions (none for a deleted one)."""
    if message.meta.get("deleted"):
        return []
    return [f"{user}{_SEP}{message.id}" for user in message.people if user != message.author]


class RedisMentions:
    """``MentionLog`` on Redis (mixed into RedisStore, which provides the attributes)."""

    _r: aioredis.Redis

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        raise NotImplementedError  # RedisEvents' own

    async def _stored_activity(self, group_id: str, message: GroupMessage) -> None:
        """Tell every gateway a message was stored (after its own step: another slot).

        A failure here costs a push, not the message, which is stored: it is
        logged, not raised (a client reads its whole inbox on reconnecting).
        """
        event = message_activity(
            group_id, message.id, message.author, message.ts, message.people, message.text
        )
        try:
            await self.append_event(ACTIVITY_LOG, event)
        except StoreError:
            log.warning("activity of message %s not appended", message.id, exc_info=True)

    async def mentions_of(
        self, username: str, group_ids: Sequence[str], *, limit: int = 50
    ) -> list[Mention]:
        self._check_open()
        groups = list(dict.fromkeys(group_ids))
        limit = max(1, min(limit, MAX_MENTIONS_LISTED))
        if not groups:
            return []
        low = b"[" + username.encode() + _SEP.encode()
        high = b"(" + username.encode() + _SEP.encode() + b"\xff"
        with redis_errors():
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    pipe.zrevrangebylex(self._key(group_id, "pments"), high, low, 0, limit)
                found = await pipe.execute()
            ids = [[str(m).split(_SEP, 1)[1] for m in members] for members in found]
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id, some in zip(groups, ids, strict=True):
                    if some:
                        pipe.hmget(self._key(group_id, "msgs"), some)
                blobs = iter(await pipe.execute())
        mentions: list[Mention] = []
        for group_id, some in zip(groups, ids, strict=True):
            if not some:
                continue
            for blob in next(blobs):
                if not blob:
                    continue
                m = GroupMessage.model_validate_json(blob)
                if m.author != username and not m.meta.get("deleted"):
                    mentions.append(
                        Mention(
                            group_id, m.id, m.author, excerpt_of(m.text), m.ts, thread_of(m.meta)
                        )
                    )
        mentions.sort(key=lambda x: (x.ts, x.message_id), reverse=True)
        return mentions[:limit]
