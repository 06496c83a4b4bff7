"""The Redis store's sign-in sessions (``store.sessions``).

All keys share the ``{sessions}`` hash tag, so each script touches a single
Redis Cluster slot:

==============================  ====  ==========================================
``P:{sessions}:s:<id>``         hash  one session
``P:{sessions}:u:<name>``       zset  a user's session ids, scored by creation
``P:{sessions}:all``            zset  every session id, scored by its expiry
==============================  ====  ==========================================

Ending and touching are scripts that only write a session whose key still
exists, so neither brings back a session that was dropped, and a touch never
clears an end. Expired sessions are dropped by ``prune_sessions`` (run by
every ``record_session``), not by key expiry: the times are the caller's
clock, which need not be the server's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import redis.asyncio as aioredis

from store.redis_errors import redis_errors
from store.sessions import SessionRecord, SignIn

# KEYS: the session, every session. ARGV: last seen, new expiry ('' for none), id.
_TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'ended') == 1 then
  return 0
end
if tonumber(ARGV[1]) > tonumber(redis.call('HGET', KEYS[1], 'last_seen')) then
  redis.call('HSET', KEYS[1], 'last_seen', ARGV[1])
end
if ARGV[2] ~= '' and tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[1], 'expires')) then
  redis.call('HSET', KEYS[1], 'expires', ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
end
return 1
"""

# KEYS: the user's sessions. ARGV: now, kept id, session key prefix, '1' for all, ids...
# Returns the ids it ended.
_END = """
local now, keep, pre, all = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4] == '1'
local wanted = {}
for i = 5, #ARGV do wanted[ARGV[i]] = true end
local ended = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local k = pre .. id
  if redis.call('EXISTS', k) == 0 then
    redis.call('ZREM', KEYS[1], id)
  elseif id ~= keep and (all or wanted[id]) and redis.call('HEXISTS', k, 'ended') == 0
      and tonumber(redis.call('HGET', k, 'expires')) > now then
    redis.call('HSET', k, 'ended', ARGV[1])
    table.insert(ended, id)
  end
end
return ended
"""

# KEYS: every session. ARGV: now, session key prefix, user index prefix.
_PRUNE = """
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, id in ipairs(gone) do
  local k = ARGV[2] .. id
  local user = redis.call('HGET', k, 'username')
  redis.call('DEL', k)
  if user then redis.call('ZREM', ARGV[3] .. user, id) end
  redis.call('ZREM', KEYS[1], id)
end
return #gone
"""


def _record(session_id: str, fields: dict[str, str]) -> SessionRecord:
    ended = fields.get("ended")
    return SessionRecord(
        id=session_id,
        username=fields["username"],
        created=float(fields["created"]),
        expires=float(fields["expires"]),
        last_seen=float(fields["last_seen"]),
        how=SignIn(fields["how"]),
        user_agent=fields.get("user_agent", ""),
        address=fields.get("address", ""),
        ended=float(ended) if ended else None,
        label=fields.get("label", ""),
    )


class RedisSessions:
    """``store.sessions.SessionLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _session_key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}:{{sessions}}:{kind}" + (f":{name}" if name else "")

    async def record_session(self, session: SessionRecord) -> None:
        self._check_open()
        s = session
        key = self._session_key("s", s.id)
        fields = {
            "username": s.username,
            "created": repr(s.created),
            "expires": repr(s.expires),
            "last_seen": repr(s.last_seen),
            "how": s.how.value,
            "user_agent": s.user_agent,
            "address": s.address,
            "label": s.label,
        }
        if s.ended is not None:
            fields["ended"] = repr(s.ended)
        with redis_errors():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping=cast(Any, fields))
                pipe.zadd(self._session_key("u", s.username), {s.id: s.created})
                pipe.zadd(self._session_key("all"), {s.id: s.expires})
                await pipe.execute()
        await self.prune_sessions(s.created)

    async def get_session(self, session_id: str) -> SessionRecord | None:
        self._check_open()
        with redis_errors():
            fields = cast(dict[str, str], await self._r.hgetall(self._session_key("s", session_id)))
        return _record(session_id, fields) if fields.get("username") else None

    async def user_sessions(self, username: str, now: float) -> list[SessionRecord]:
        self._check_open()
        with redis_errors():
            ids = cast(list[str], await self._r.zrevrange(self._session_key("u", username), 0, -1))
            async with self._r.pipeline(transaction=False) as pipe:
                for session_id in ids:
                    pipe.hgetall(self._session_key("s", session_id))
                rows = cast(list[dict[str, str]], await pipe.execute())
        found = [_record(i, f) for i, f in zip(ids, rows, strict=True) if f.get("username")]
        return [s for s in found if s.username == username and s.live(now)]

    async def touch_session(
        self, session_id: str, last_seen: float, expires: float | None = None
    ) -> None:
        self._check_open()
        keys = [self._session_key("s", session_id), self._session_key("all")]
        args = [repr(last_seen), "" if expires is None else repr(expires), session_id]
        with redis_errors():
            await self._r.eval(_TOUCH, len(keys), *keys, *args)

    async def end_sessions(
        self, username: str, session_ids: Sequence[str] | None, now: float, keep: str = ""
    ) -> list[str]:
        self._check_open()
        args: list[Any] = [
            repr(now),
            keep,
            self._session_key("s") + ":",
            "1" if session_ids is None else "0",
            *(session_ids or ()),
        ]
        with redis_errors():
            ended = await self._r.eval(_END, 1, self._session_key("u", username), *args)
        return [str(i) for i in cast(list[str], ended)]

    async def prune_sessions(self, now: float) -> int:
        self._check_open()
        args = [repr(now), self._session_key("s") + ":", self._session_key("u") + ":"]
        with redis_errors():
            return int(await self._r.eval(_PRUNE, 1, self._session_key("all"), *args))
