"""The Redis store's person quotas, ledgers and usage records (``store.quotas``).

=============================  ======  ==========================================
``P:quotas``                   hash    username -> PersonQuota JSON
``P:u:{U}:ledger``             hash    a person's ledger, fields as a group's
                                       ``budget`` (``store.redis_budgets``)
``P:u:{U}:lreserve``           hash    turn id -> reservation, as ``breserve``
``P:g:{G}:urows:<YYYY-MM>``    hash    ``day US user US vp US model US i|o|u`` ->
                                       input tokens, output tokens, USD
``P:urowgroups``               set     ids of the groups with usage rows
=============================  ======  ==========================================

A person's two keys share the hash tag ``{U}``, so reserve and settle are
each one script (the group's own scripts, on these keys): atomic against
every VP actor, whatever group the turn is in. Usage rows are written by
the script that counts a turn's usage (``store.redis_scripts.COUNT_USAGE``),
in the group's slot, one hash per month; the group joins ``urowgroups``
just before (a set member without rows costs a read, never a row lost).
Neither is removed with the group.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date

import redis.asyncio as aioredis

from store.budgets import RESERVE_TOKENS, RESERVE_USD, BudgetLimit, BudgetRefusal, BudgetSpend
from store.chatviews import TurnUsage
from store.quotas import ROW_SEP, PersonQuota, UsageKey, UsageRow
from store.redis_budgets import charge_on, reserve_on, settle_on, spend_on
from store.redis_errors import redis_errors

_METRICS = {"i": "input_tokens", "o": "output_tokens", "u": "usd"}


def months_between(first_day: str, last_day: str) -> list[str]:
    """The months (``YYYY-MM``) the days ``first_day``..``last_day`` touch."""
    first, last = date.fromisoformat(first_day), date.fromisoformat(last_day)
    months: list[str] = []
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        months.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


class RedisQuotas:
    """``store.quotas.Quotas`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _person_keys(self, username: str) -> list[str]:
        return [f"{self.prefix}:u:{{{username}}}:{k}" for k in ("ledger", "lreserve")]

    def _urows_key(self, group_id: str, month: str) -> str:
        return self._key(group_id, f"urows:{month}")

    @property
    def _urow_groups(self) -> str:
        return f"{self.prefix}:urowgroups"

    async def _usage_rows_key(self, group_id: str, usage: TurnUsage) -> str:
        """The rows key a usage script writes to; the group is indexed first."""
        if usage.row is None:
            return self._urows_key(group_id, "none")
        with redis_errors():
            await self._r.sadd(self._urow_groups, group_id)
        return self._urows_key(group_id, usage.row.month)

    async def get_person_quota(self, username: str) -> PersonQuota | None:
        self._check_open()
        with redis_errors():
            data = await self._r.hget(f"{self.prefix}:quotas", username)
        return PersonQuota.from_dict(json.loads(data)) if data else None

    async def set_person_quota(self, username: str, quota: PersonQuota | None) -> None:
        self._check_open()
        with redis_errors():
            if quota is None:
                await self._r.hdel(f"{self.prefix}:quotas", username)
            else:
                await self._r.hset(f"{self.prefix}:quotas", username, json.dumps(quota.to_dict()))

    async def reserve_person(
        self,
        username: str,
        turn_id: str,
        limits: Sequence[BudgetLimit],
        tokens: int = RESERVE_TOKENS,
        usd: float = RESERVE_USD,
    ) -> BudgetRefusal | None:
        self._check_open()
        keys = self._person_keys(username)
        return await reserve_on(self._r, keys, turn_id, limits, tokens, usd)

    async def settle_person(self, username: str, turn_id: str, tokens: int, usd: float) -> bool:
        self._check_open()
        return await settle_on(self._r, self._person_keys(username), turn_id, tokens, usd)

    async def charge_person(
        self, username: str, accounts: Sequence[str], tokens: int, usd: float
    ) -> None:
        self._check_open()
        await charge_on(self._r, self._person_keys(username)[0], accounts, tokens, usd)

    async def person_spend(self, username: str, accounts: Sequence[str]) -> list[BudgetSpend]:
        self._check_open()
        return await spend_on(self._r, self._person_keys(username)[0], accounts)

    async def usage_rows(
        self, first_day: str, last_day: str, user: str | None = None
    ) -> list[UsageRow]:
        self._check_open()
        months = months_between(first_day, last_day)
        with redis_errors():
            groups = sorted(str(g) for g in await self._r.smembers(self._urow_groups))
            async with self._r.pipeline(transaction=False) as pipe:
                for group_id in groups:
                    for month in months:
                        pipe.hgetall(self._urows_key(group_id, month))
                hashes = await pipe.execute()
        rows: dict[tuple[str, UsageKey], dict[str, float]] = {}
        pairs = [(g, m) for g in groups for m in months]
        for (group_id, _), fields in zip(pairs, hashes, strict=True):
            for name, value in fields.items():
                prefix, _, metric = str(name).rpartition(ROW_SEP)
                key = UsageKey.of_field(prefix)
                if not first_day <= key.day <= last_day or (user is not None and key.user != user):
                    continue
                row = rows.setdefault((group_id, key), {})
                row[_METRICS[metric]] = float(value)
        out = [
            UsageRow(
                key.day,
                key.user,
                group_id,
                key.vp,
                key.model,
                int(v.get("input_tokens", 0)),
                int(v.get("output_tokens", 0)),
                v.get("usd", 0.0),
            )
            for (group_id, key), v in rows.items()
        ]
        out.sort(key=lambda r: (r.day, r.user, r.group_id, r.vp, r.model))
        return out
