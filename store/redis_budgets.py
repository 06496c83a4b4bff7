"""The Redis store's budget ledgers (``store.budgets``).

``P:g:{G}:budget``    hash  ``<account>|st``, ``|su`` (spent tokens, USD), ``|rt``, ``|ru``
                            (reserved tokens, USD)
``P:g:{G}:breserve``  hash  turn id -> JSON {a: accounts, t: tokens, u: usd} of a running turn

Reserve and settle are each one Lua script, so they are atomic against every
other client of the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from store.budgets import RESERVE_TOKENS, RESERVE_USD, BudgetLimit, BudgetRefusal, BudgetSpend
from store.redis_errors import redis_errors

BUDGET_KINDS = ("budget", "breserve")

# ARGV: turn id, tokens, usd, then (account, max tokens, max usd) per account.
_RESERVE = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return '' end
local n = (#ARGV - 3) / 3
local function num(field) return tonumber(redis.call('HGET', KEYS[1], field) or '0') end
for i = 0, n - 1 do
  local a = ARGV[4 + i * 3]
  local mt, mu = tonumber(ARGV[5 + i * 3]), tonumber(ARGV[6 + i * 3])
  if mt > 0 and num(a .. '|st') + num(a .. '|rt') >= mt then return a .. '|tokens' end
  if mu > 0 and num(a .. '|su') + num(a .. '|ru') >= mu then return a .. '|usd' end
end
local accounts = {}
for i = 0, n - 1 do
  local a = ARGV[4 + i * 3]
  redis.call('HINCRBY', KEYS[1], a .. '|rt', ARGV[2])
  redis.call('HINCRBYFLOAT', KEYS[1], a .. '|ru', ARGV[3])
  accounts[#accounts + 1] = a
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({a = accounts, t = ARGV[2], u = ARGV[3]}))
return ''
"""

# ARGV: turn id, tokens used, usd used.
_SETTLE = """
local held = redis.call('HGET', KEYS[2], ARGV[1])
if not held then return 0 end
local r = cjson.decode(held)
for _, a in ipairs(r.a) do
  redis.call('HINCRBY', KEYS[1], a .. '|rt', -tonumber(r.t))
  redis.call('HINCRBYFLOAT', KEYS[1], a .. '|ru', -tonumber(r.u))
  redis.call('HINCRBY', KEYS[1], a .. '|st', ARGV[2])
  redis.call('HINCRBYFLOAT', KEYS[1], a .. '|su', ARGV[3])
end
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""


async def reserve_on(
    r: aioredis.Redis,
    keys: list[str],
    turn_id: str,
    limits: Sequence[BudgetLimit],
    tokens: int,
    usd: float,
) -> BudgetRefusal | None:
    """Reserve on the ledger ``keys`` (its hash, its reservations): one script."""
    args: list[Any] = [turn_id, int(tokens), repr(float(usd))]
    for limit in limits:
        args += [limit.account, int(limit.max_tokens), repr(float(limit.max_usd))]
    with redis_errors():
        refused = await r.eval(_RESERVE, 2, *keys, *args)
    return BudgetRefusal.parse(str(refused or ""))


async def settle_on(
    r: aioredis.Redis, keys: list[str], turn_id: str, tokens: int, usd: float
) -> bool:
    args: list[Any] = [turn_id, int(tokens), repr(float(usd))]
    with redis_errors():
        done = await r.eval(_SETTLE, 2, *keys, *args)
    return bool(int(done))


async def charge_on(
    r: aioredis.Redis, key: str, accounts: Sequence[str], tokens: int, usd: float
) -> None:
    with redis_errors():
        async with r.pipeline(transaction=True) as pipe:
            for account in accounts:
                pipe.hincrby(key, f"{account}|st", int(tokens))
                pipe.hincrbyfloat(key, f"{account}|su", float(usd))
            await pipe.execute()


async def spend_on(r: aioredis.Redis, key: str, accounts: Sequence[str]) -> list[BudgetSpend]:
    fields = [f"{a}|{k}" for a in accounts for k in ("st", "su", "rt", "ru")]
    with redis_errors():
        values = await r.hmget(key, fields) if fields else []
    out = []
    for i, account in enumerate(accounts):
        st, su, rt, ru = (v or "0" for v in values[i * 4 : i * 4 + 4])
        out.append(BudgetSpend(account, int(st), float(su), int(rt), float(ru)))
    return out


class RedisBudgets:
    """``store.budgets.Budgets`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _budget_keys(self, group_id: str) -> list[str]:
        return [self._key(group_id, kind) for kind in BUDGET_KINDS]

    async def reserve_budget(
        self,
        group_id: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        self._check_open()
        return await reserve_on(self._r, self._budget_keys(group_id), turn_id, limits, tokens, usd)

    async def settle_budget(self, group_id: str, turn_id: str, tokens: int, usd: float) -> bool:
        self._check_open()
        return await settle_on(self._r, self._budget_keys(group_id), turn_id, tokens, usd)

    async def charge_budget(
        self, group_id: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        self._check_open()
        await charge_on(self._r, self._key(group_id, "budget"), accounts, tokens, usd)

    async def budget_spend(self, group_id: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        self._check_open()
        return await spend_on(self._r, self._key(group_id, "budget"), accounts)
