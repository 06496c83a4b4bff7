"""The Redis store's failed-login counts and lockouts (``store.logins``).

All keys share the ``{logins}`` hash tag, so the one script that counts a
failure touches a single Redis Cluster slot:

==========================  ====  ==============================================
``P:{logins}:uf:<name>``    zset  an account's failures: ``<nonce>|<address>``
                                  scored by time; expires with the window
``P:{logins}:af:<address>`` zset  an address's failures (any account): nonces
                                  scored by time; expires with the window
``P:{logins}:locks``        zset  locks (``store.logins.lock_member``) scored
                                  by the time they end
==========================  ====  ==============================================

A failure is one Lua script (prune, count, lock), so gateways on one Redis
count every failure once and agree on the locks.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

import redis.asyncio as aioredis

from store.logins import Lockouts, LoginRules, collect, lock_member, parse_lock_member
from store.redis_errors import redis_errors

# KEYS: account failures, address failures, locks.
# ARGV: name, address, now, window, max failures, address max failures, lockout, nonce.
# Returns until when the address is locked out of the account, as text ('' for not).
_FAILURE = """
local u, a, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local window, maxf, amax = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local lockout, nonce = tonumber(ARGV[7]), ARGV[8]
local ttl = math.ceil(window * 1000) + 1000
local function member(user, addr) return string.len(user) .. ':' .. user .. addr end
local function lock(m, untl)
  local old = tonumber(redis.call('ZSCORE', KEYS[3], m) or '0')
  if untl > old then redis.call('ZADD', KEYS[3], string.format('%.6f', untl), m) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', now - window))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.6f', now - window))
redis.call('ZADD', KEYS[2], ARGV[3], nonce)
redis.call('PEXPIRE', KEYS[2], ttl)
local locked = 0
local account = tonumber(redis.call('ZSCORE', KEYS[3], member(u, '')) or '0')
if account > now then
  lock(member(u, a), account)
  locked = account
else
  redis.call('ZADD', KEYS[1], ARGV[3], nonce .. '|' .. a)
  redis.call('PEXPIRE', KEYS[1], ttl)
  if redis.call('ZCARD', KEYS[1]) >= maxf then
    locked = now + lockout
    lock(member(u, ''), locked)
    for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
      lock(member(u, string.sub(m, string.find(m, '|', 1, true) + 1)), locked)
    end
    redis.call('DEL', KEYS[1])
  end
end
if redis.call('ZCARD', KEYS[2]) >= amax then
  local everywhere = now + lockout
  lock(member('', a), everywhere)
  redis.call('DEL', KEYS[2])
  if everywhere > locked then locked = everywhere end
end
if locked > 0 then return string.format('%.6f', locked) end
return ''
"""


class RedisLogins:
    """``store.logins.LoginLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _login_key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}:{{logins}}:{kind}" + (f":{name}" if name else "")

    async def login_locked_until(self, username: str, address: str, now: float) -> float | None:
        self._check_open()
        members = [lock_member(username, address), lock_member("", address)]
        with redis_errors():
            scores = await self._r.zmscore(self._login_key("locks"), members)
        held = [float(s) for s in scores if s is not None and float(s) > now]
        return max(held) if held else None

    async def record_login_failure(
        self, username: str, address: str, now: float, rules: LoginRules
    ) -> float | None:
        self._check_open()
        keys = [
            self._login_key("uf", username),
            self._login_key("af", address),
            self._login_key("locks"),
        ]
        args: list[Any] = [
            username,
            address,
            f"{now:.6f}",
            repr(float(rules.window)),
            rules.max_failures,
            rules.address_max_failures,
            repr(float(rules.lockout)),
            uuid.uuid4().hex,
        ]
        with redis_errors():
            locked = await self._r.eval(_FAILURE, len(keys), *keys, *args)
        return float(locked) if locked else None

    async def forget_login_failures(self, username: str, address: str) -> None:
        self._check_open()
        key = self._login_key("uf", username)
        with redis_errors():
            failures = cast(list[str], await self._r.zrange(key, 0, -1))
            mine = [m for m in failures if m.partition("|")[2] == address]
            if mine:
                await self._r.zrem(key, *mine)

    async def lift_lockout(self, username: str) -> bool:
        self._check_open()
        key = self._login_key("locks")
        with redis_errors():
            members = cast(list[str], await self._r.zrange(key, 0, -1))
            mine = [m for m in members if parse_lock_member(m)[0] == username]
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(self._login_key("uf", username))
                if mine:
                    pipe.zrem(key, *mine)
                await pipe.execute()
        return bool(mine)

    async def lockouts(self, now: float) -> Lockouts:
        self._check_open()
        with redis_errors():
            found = await self._r.zrangebyscore(
                self._login_key("locks"), f"({now:.6f}", "+inf", withscores=True
            )
        held = cast(list[tuple[str, float]], found)
        rows = [(*parse_lock_member(str(m)), float(s)) for m, s in held]
        return collect(rows)
