"""The Redis store: the backend for several machines (redis-py asyncio).

Key layout (``P`` is the prefix, ``G`` a group id). Every per-group key
carries ``{G}`` as a Redis Cluster hash tag, so each Lua script
(``store.redis_scripts``) only touches keys of one slot:

=======================  ======  ===============================================
``P:groups``             set     ids of all groups (the index for list_groups)
``P:g:{G}:group``        string  the Group as JSON
``P:g:{G}:msgs``         hash    message id -> GroupMessage JSON
``P:g:{G}:order``        zset    message id scored by append position
``P:g:{G}:mpos``         string  counter of append positions
``P:g:{G}:cmid``         hash    clientMessageId -> message id
``P:g:{G}:turns``        hash    turn id -> TurnRecord JSON (without phase and end)
``P:g:{G}:tphase``       hash    turn id -> ``requested``, ``started`` or ``finished:<end>``
``P:g:{G}:topen``        set     ids of the turns not finished
``P:g:{G}:ttrig``        hash    trigger message id -> its turn ids, space-separated
``P:users``              hash    username -> user record JSON
=======================  ======  ===============================================

The keys of the event log (``events``, ``eseq``) are described in
``store.redis_events``, with its appends and blocking reads; those of
search, read marks and usage totals (``terms``, ``reads``, ``uturns``,
``usage``) in ``store.redis_chat``, those of budgets in
``store.redis_budgets``, those of tasks, evidence and skills in
``store.redis_tasks``, those of transcripts in ``store.redis_transcripts``,
those of failed logins in ``store.redis_logins``, those of reactions and
pins in ``store.redis_reactions``, those of threads in ``store.redis_threads``,
those of people's mentions in
``store.redis_mentions``, the audit log's in ``store.redis_audit``, those of
invite links in ``store.redis_invites``, those of person quotas and usage
rows in ``store.redis_quotas`` and the disabled accounts' in
``store.redis_disabled``.

Atomicity comes from Lua scripts (one script runs alone on the server):
the idempotent message append; the event append (``store.redis_events``);
and a turn's finish, which appends its result only if the turn is not
finished yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from protocol import EventFrame
from store import redis_scripts as scripts
from store._shared import DEFAULT_EVENT_RETENTION, check_retention, client_message_id
from store.appends import AppendQueue
from store.base import (
    Group,
    GroupMessage,
    NotFound,
    Store,
    StoreError,
    decode_user,
    encode_user,
    user_record_key,
)
from store.chatviews import TurnUsage
from store.events import encode_event
from store.mentions import counts_as_activity
from store.redis_audit import RedisAudit
from store.redis_budgets import BUDGET_KINDS, RedisBudgets
from store.redis_chat import CHAT_KINDS, RedisChatViews, search_postings, usage_values
from store.redis_disabled import RedisDisabled
from store.redis_errors import redis_errors as _redis_errors
from store.redis_events import (
    BLOCKING_SOCKET_TIMEOUT_S,
    EVENT_KINDS,
    RedisEvents,
    body_and_header,
    header_fields,
    longest_block,
)
from store.redis_invites import RedisInvites
from store.redis_logins import RedisLogins
from store.redis_members import RedisMembers
from store.redis_mentions import MENTION_KINDS, RedisMentions, mention_postings
from store.redis_quotas import RedisQuotas
from store.redis_reactions import REACTION_KINDS, RedisReactions
from store.redis_sessions import RedisSessions
from store.redis_tasks import TASK_KINDS, RedisTasks
from store.redis_threads import THREAD_KINDS, RedisThreads
from store.redis_transcripts import TRANSCRIPT_KINDS, RedisTranscripts
from store.turns import TurnEnd, TurnRecord, finish_frames
from store.versions import MessageVersions

_GROUP_KINDS = (
    "group",
    "msgs",
    "order",
    "mpos",
    "cmid",
    *TRANSCRIPT_KINDS,
    *EVENT_KINDS,
    "turns",
    "tphase",
    "topen",
    "ttrig",
    *CHAT_KINDS,
    *BUDGET_KINDS,
    *TASK_KINDS,
    *REACTION_KINDS,
    *THREAD_KINDS,
    *MENTION_KINDS,
)
_TURN_KINDS = ("turns", "tphase", "topen", "ttrig")
_FINISHED = "finished"


class RedisStore(
    RedisMembers,
    RedisEvents,
    # Before RedisChatViews, which calls its _usage_rows_key.
    RedisQuotas,
    RedisChatViews,
    RedisBudgets,
    RedisTasks,
    RedisTranscripts,
    RedisLogins,
    RedisSessions,
    RedisReactions,
    MessageVersions,
    RedisThreads,
    RedisMentions,
    RedisAudit,
    RedisInvites,
    RedisDisabled,
    Store,
):
    """A Store on a Redis server; all keys live under ``prefix``.

    ``max_block_s`` is the longest single XREAD BLOCK (``store.redis_events``).
    """

    def __init__(
        self,
        url: str,
        prefix: str = "yeaft",
        *,
        event_retention: int = DEFAULT_EVENT_RETENTION,
        max_connections: int = 64,
        max_blocking_reads: int = 10_000,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.event_retention = check_retention(event_retention)
        # RESP2 is pinned so reply shapes (XREAD, script results) do not depend
        # on the client library's default protocol.
        common: dict[str, Any] = {"decode_responses": True, "protocol": 2}
        # Ordinary commands share a bounded pool: a burst of concurrent calls
        # waits for a connection instead of opening hundreds of sockets.
        self._pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=None, **common
        )
        self._r = aioredis.Redis(connection_pool=self._pool)
        # Blocking reads hold a connection for up to their whole wait, so they
        # get their own pool, one connection per parked reader. Its cap is only
        # a safety net (redis-py's default of 100 would fail a busy gateway).
        self._blocking_pool = aioredis.ConnectionPool.from_url(
            url,
            max_connections=max_blocking_reads,
            socket_timeout=BLOCKING_SOCKET_TIMEOUT_S,
            **common,
        )
        # A socket_timeout in the URL wins over the one above; blocks follow it.
        self.max_block_s = longest_block(
            self._blocking_pool.connection_kwargs.get("socket_timeout")
        )
        self._blocking = aioredis.Redis(connection_pool=self._blocking_pool)
        self._create_group = self._r.register_script(scripts.CREATE_GROUP)
        self._append_message = self._r.register_script(scripts.APPEND_MESSAGE)
        self._append_event = self._r.register_script(scripts.APPEND_EVENT)
        # Appends waiting together go in one round trip (store.appends).
        self._appends = AppendQueue(self._write_appends)
        self._read_events = self._r.register_script(scripts.READ_EVENTS)
        # Per group a blocking read was made of here: the head it last reached.
        self._reached: dict[str, int] = {}
        self._add_turns = self._r.register_script(scripts.ADD_TURNS)
        self._start_turn = self._r.register_script(scripts.START_TURN)
        self._finish_turn = self._r.register_script(scripts.FINISH_TURN)
        self._closed = False

    # -- keys --------------------------------------------------------------
    def _key(self, group_id: str, kind: str) -> str:
        return f"{self.prefix}:g:{{{group_id}}}:{kind}"

    @property
    def _index(self) -> str:
        return f"{self.prefix}:groups"

    @property
    def _users(self) -> str:
        return f"{self.prefix}:users"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    # -- groups ------------------------------------------------------------
    async def create_group(self, group: Group) -> Group:
        self._check_open()
        with _redis_errors():
            created = await self._create_group(
                keys=[self._key(group.id, "group"), self._index],
                args=[group.model_dump_json(), group.id],
            )
        if not created:
            raise StoreError(f"group {group.id!r} already exists")
        return group

    async def get_group(self, group_id: str) -> Group | None:
        self._check_open()
        with _redis_errors():
            data = await self._r.get(self._key(group_id, "group"))
        return Group.model_validate_json(data) if data else None

    async def save_group(self, group: Group) -> Group:
        self._check_open()
        with _redis_errors():
            done = await self._r.set(self._key(group.id, "group"), group.model_dump_json(), xx=True)
        if not done:
            raise NotFound(f"group {group.id!r} not found")
        return group

    async def delete_group(self, group_id: str) -> bool:
        self._check_open()
        with _redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(group_id, "group"))
                pipe.delete(*(self._key(group_id, k) for k in _GROUP_KINDS[1:]))
                pipe.srem(self._index, group_id)
                pipe.srem(self._task_groups, group_id)
                existed, *_ = await pipe.execute()
        return bool(existed)

    async def list_groups(self, member: str | None = None) -> list[Group]:
        self._check_open()
        with _redis_errors():
            ids = sorted(str(g) for g in await self._r.smembers(self._index))
            if not ids:
                return []
            blobs = await self._r.mget([self._key(g, "group") for g in ids])
        groups = [Group.model_validate_json(b) for b in blobs if b]
        if member is not None:
            groups = [g for g in groups if member in g.members]
        return sorted(groups, key=lambda g: (g.created_at, g.id))

    # -- group log ---------------------------------------------------------
    async def append_message(
        self,
        group_id: str,
        message: GroupMessage,
        turns: Sequence[TurnRecord] = (),
        announce: EventFrame | None = None,
    ) -> tuple[GroupMessage, bool]:
        self._check_open()
        keys = [self._key(group_id, k) for k in ("msgs", "order", "mpos", "cmid")]
        keys += [*self._turn_keys(group_id), *self._event_keys(group_id)]
        keys += [self._key(group_id, "terms"), self._key(group_id, "pments")]
        turn_args = _turn_args(turns)
        postings = list(search_postings(message))
        mentioned = mention_postings(message)
        args: list[str | int] = [message.id, message.model_dump_json()]
        args += [client_message_id(message) or "", len(turn_args), *turn_args]
        args += [len(postings), *postings, len(mentioned), *mentioned]
        if announce is not None:
            encoded = encode_event(announce)
            args += self._event_args(encoded)
        # A reply in a thread is filed there first (store.redis_threads).
        await self._post_thread(group_id, message)
        with _redis_errors():
            stored, data = await self._append_message(keys=keys, args=args)
        if int(stored):
            if counts_as_activity(message.role):
                await self._stored_activity(group_id, message)
            return message, True
        return GroupMessage.model_validate_json(data), False

    async def read_messages(
        self, group_id: str, *, before: str | None = None, limit: int = 100
    ) -> list[GroupMessage]:
        self._check_open()
        if limit <= 0:
            return []
        order = self._key(group_id, "order")
        with _redis_errors():
            if before is None:
                found = await self._r.zrange(order, 0, limit - 1, desc=True)
            else:
                pos = await self._r.zscore(order, before)
                if pos is None:
                    return []
                found = await self._r.zrange(
                    order, f"({int(pos)}", "-inf", desc=True, byscore=True, offset=0, num=limit
                )
            # Fetched newest first so ``limit`` keeps the newest; returned oldest first.
            ids = [str(i) for i in reversed(found)]
            if not ids:
                return []
            blobs = await self._r.hmget(self._key(group_id, "msgs"), ids)
        return [GroupMessage.model_validate_json(b) for b in blobs if b]

    async def get_message(self, group_id: str, message_id: str) -> GroupMessage | None:
        self._check_open()
        with _redis_errors():
            data = await self._r.hget(self._key(group_id, "msgs"), message_id)
        return GroupMessage.model_validate_json(data) if data else None

    # -- event log ---------------------------------------------------------
    # -- turn records ------------------------------------------------------
    async def add_turns(self, group_id: str, turns: Sequence[TurnRecord]) -> None:
        self._check_open()
        if not turns:
            return
        with _redis_errors():
            await self._add_turns(keys=self._turn_keys(group_id), args=_turn_args(turns))

    async def start_turn(
        self, group_id: str, turn_id: str, frame: EventFrame | None = None
    ) -> bool:
        self._check_open()
        body, fields = body_and_header(frame)
        keys = [self._key(group_id, k) for k in ("tphase", "eseq", "events")]
        with _redis_errors():
            ok = await self._start_turn(
                keys=keys, args=[turn_id, body, self.event_retention, *fields]
            )
        return bool(int(ok))

    async def finish_turn(
        self,
        group_id: str,
        turn_id: str,
        frame: EventFrame | None,
        end: TurnEnd,
        *,
        after: EventFrame | None = None,
        usage: TurnUsage | None = None,
    ) -> int | None:
        self._check_open()
        kinds = ("tphase", "topen", "eseq", "events", "uturns", "usage", "budget")
        keys = [self._key(group_id, k) for k in kinds]
        keys.append(await self._usage_rows_key(group_id, usage) if usage else keys[-1])
        args: list[str | int] = [end.value, turn_id, *(usage_values(usage) if usage else [""])]
        for each in finish_frames(frame, after):
            encoded = encode_event(each)
            fields = header_fields(encoded)
            args += [len(fields), encoded.body, self.event_retention, *fields]
        with _redis_errors():
            seq = int(await self._finish_turn(keys=keys, args=args))
        return None if seq < 0 else seq

    async def turns_of(self, group_id: str, trigger_id: str) -> list[TurnRecord]:
        self._check_open()
        with _redis_errors():
            ids = await self._r.hget(self._key(group_id, "ttrig"), trigger_id)
            return await self._records(group_id, str(ids).split() if ids else [])

    async def open_turns(self) -> list[TurnRecord]:
        self._check_open()
        with _redis_errors():
            groups = sorted(str(g) for g in await self._r.smembers(self._index))
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    pipe.smembers(self._key(group_id, "topen"))
                open_ids = await pipe.execute()
            records: list[TurnRecord] = []
            for group_id, ids in zip(groups, open_ids, strict=True):
                records += await self._records(group_id, sorted(str(i) for i in ids))
        return sorted(records, key=lambda r: (r.created_at, r.turn_id))

    def _turn_keys(self, group_id: str) -> list[str]:
        return [self._key(group_id, k) for k in _TURN_KINDS]

    async def _records(self, group_id: str, ids: list[str]) -> list[TurnRecord]:
        if not ids:
            return []
        blobs = await self._r.hmget(self._key(group_id, "turns"), ids)
        phases = await self._r.hmget(self._key(group_id, "tphase"), ids)
        records = []
        for blob, stored in zip(blobs, phases, strict=True):
            if blob and stored:
                phase, _, end = str(stored).partition(":")
                records.append(TurnRecord.restore(str(blob), phase, end or None))
        return records

    # -- users -------------------------------------------------------------
    async def get_user(self, username: str) -> dict[str, Any] | None:
        self._check_open()
        with _redis_errors():
            data = await self._r.hget(self._users, username)
        return decode_user(data) if data else None

    async def put_user(self, user: dict[str, Any]) -> None:
        self._check_open()
        username = user_record_key(user)
        data = encode_user(user)
        with _redis_errors():
            await self._r.hset(self._users, username, data)

    async def create_user(self, user: dict[str, Any]) -> bool:
        self._check_open()
        username = user_record_key(user)
        data = encode_user(user)
        with _redis_errors():
            return bool(await self._r.hsetnx(self._users, username, data))

    async def list_users(self) -> list[dict[str, Any]]:
        self._check_open()
        with _redis_errors():
            blobs = await self._r.hvals(self._users)
        users = [decode_user(b) for b in blobs]
        return sorted(users, key=lambda u: str(u.get("username", "")))

    async def identity_user(self, identity: str) -> str | None:
        self._check_open()
        with _redis_errors():
            name = await self._r.hget(f"{self.prefix}:identities", identity)
        return str(name) if name else None

    async def link_identity(self, identity: str, username: str) -> bool:
        self._check_open()
        with _redis_errors():
            return bool(await self._r.hsetnx(f"{self.prefix}:identities", identity, username))

    # -- lifecycle ---------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._r.aclose()
        await self._blocking.aclose()
        await self._pool.aclose()
        await self._blocking_pool.aclose()


def _turn_args(turns: Sequence[TurnRecord]) -> list[str]:
    """Turn records as the (id, trigger, JSON) triplets the turn scripts take."""
    return [v for t in turns for v in (t.turn_id, t.trigger_id, t.static_json())]
