"""The Redis store's reactions and pins (``store.reactions``).

Keys (``{G}`` is the group's hash tag, so a step and its event append touch
one Redis Cluster slot):

=========================  ======  ============================================
``P:g:{G}:reactions``      hash    message id -> its reactions (JSON)
``P:g:{G}:pins``           string  the group's pins (JSON)
=========================  ======  ============================================

A step is an optimistic transaction: WATCH the key, read it, apply the rule
in Python (the same :func:`~store.reactions.apply_reaction` as the embedded
store), then write it and append the event (the event log's own script) in
one MULTI/EXEC. When another client wrote the key in between, EXEC fails
and the step runs again on what that client left.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript

from store.events import EncodedEvent, encode_event
from store.reactions import (
    Pin,
    PinChange,
    Reaction,
    ReactionChange,
    apply_pin,
    apply_reaction,
    decode_pins,
    decode_reactions,
    encode_pins,
    encode_reactions,
    pins_frame,
    reactions_frame,
)
from store.redis_errors import redis_errors

REACTION_KINDS = ("reactions", "pins")

T = TypeVar("T")


class RedisReactions:
    """``store.reactions.ReactionLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    _append_event: AsyncScript

    @abstractmethod
    def _key(self, group_id: str, kind: str) -> str: ...

    @abstractmethod
    def _check_open(self) -> None: ...

    @abstractmethod
    def _event_keys(self, group_id: str) -> list[str]: ...

    @abstractmethod
    def _event_args(self, encoded: EncodedEvent) -> list[str | int]: ...

    @abstractmethod
    async def _watched(
        self, key: str, attempt: Callable[[Pipeline], Awaitable[T]], gave_up: str
    ) -> T: ...

    async def _write_with_event(
        self,
        pipe: Pipeline,
        group_id: str,
        write: Callable[[Pipeline], object],
        event: EncodedEvent,
    ) -> int:
        """Queue ``write`` and the event's append in one MULTI/EXEC; the event's seq."""
        pipe.multi()
        write(pipe)
        await self._append_event(
            keys=self._event_keys(group_id), args=self._event_args(event), client=pipe
        )
        replies = await pipe.execute()
        return int(replies[-1])

    async def react(
        self, group_id: str, message_id: str, emoji: str, user: str, *, on: bool | None, ts: float
    ) -> ReactionChange:
        self._check_open()
        key = self._key(group_id, "reactions")

        async def attempt(pipe: Pipeline) -> ReactionChange:
            current = decode_reactions(await pipe.hget(key, message_id))
            now_on, after = apply_reaction(current, emoji, user, on)
            if after is None:
                return ReactionChange(message_id, emoji, user, now_on, current)
            change = ReactionChange(message_id, emoji, user, now_on, after)
            event = encode_event(reactions_frame(group_id, change, ts))

            def write(p: Pipeline) -> None:
                if after:
                    p.hset(key, message_id, encode_reactions(after))
                else:
                    p.hdel(key, message_id)

            seq = await self._write_with_event(pipe, group_id, write, event)
            return ReactionChange(message_id, emoji, user, now_on, after, seq)

        gave_up = f"reactions on {message_id!r} kept losing races; try again"
        return await self._watched(key, attempt, gave_up)

    async def reactions_of(
        self, group_id: str, message_ids: Sequence[str]
    ) -> dict[str, tuple[Reaction, ...]]:
        self._check_open()
        wanted = list(dict.fromkeys(message_ids))
        if not wanted:
            return {}
        with redis_errors():
            blobs = await self._r.hmget(self._key(group_id, "reactions"), wanted)
        return {m: decode_reactions(b) for m, b in zip(wanted, blobs, strict=True) if b}

    async def pin(
        self, group_id: str, message_id: str, user: str, *, pinned: bool, ts: float
    ) -> PinChange:
        self._check_open()
        key = self._key(group_id, "pins")

        async def attempt(pipe: Pipeline) -> PinChange:
            current = decode_pins(await pipe.get(key))
            after = apply_pin(current, message_id, user, pinned, ts)
            if after is None:
                return PinChange(message_id, pinned, current)
            change = PinChange(message_id, pinned, after)
            event = encode_event(pins_frame(group_id, change, user, ts))
            seq = await self._write_with_event(
                pipe, group_id, lambda p: p.set(key, encode_pins(after)), event
            )
            return PinChange(message_id, pinned, after, seq)

        return await self._watched(key, attempt, "pinning kept losing races; try again")

    async def pins_of(self, group_id: str) -> tuple[Pin, ...]:
        self._check_open()
        with redis_errors():
            return decode_pins(await self._r.get(self._key(group_id, "pins")))
