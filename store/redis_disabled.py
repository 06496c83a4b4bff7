"""The Redis store's disabled accounts (``store.disabled``).

==================  ====  ==================================================
``P:disabled``      hash  username -> ``{"at": <epoch s>, "by": <name|null>}``
==================  ====  ==================================================

``HSETNX`` makes a disable atomic (the first mark stays), ``HDEL`` an enable.
"""

from __future__ import annotations

import json
from typing import cast

import redis.asyncio as aioredis

from store.disabled import DisabledMark
from store.redis_errors import redis_errors


def _mark(username: str, data: str | bytes) -> DisabledMark:
    fields = json.loads(data)
    by = fields.get("by")
    return DisabledMark(username, float(fields["at"]), by if isinstance(by, str) else None)


class RedisDisabled:
    """``store.disabled.DisabledAccounts`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    @property
    def _disabled_key(self) -> str:
        return f"{self.prefix}:disabled"

    async def disable_account(self, mark: DisabledMark) -> bool:
        self._check_open()
        data = json.dumps({"at": mark.at, "by": mark.by}, separators=(",", ":"))
        with redis_errors():
            return bool(await self._r.hsetnx(self._disabled_key, mark.username, data))

    async def enable_account(self, username: str) -> bool:
        self._check_open()
        with redis_errors():
            return bool(await self._r.hdel(self._disabled_key, username))

    async def disabled_mark(self, username: str) -> DisabledMark | None:
        self._check_open()
        with redis_errors():
            data = await self._r.hget(self._disabled_key, username)
        return _mark(username, data) if data is not None else None

    async def disabled_accounts(self) -> list[DisabledMark]:
        self._check_open()
        with redis_errors():
            found = cast(dict[str, str], await self._r.hgetall(self._disabled_key))
        return [_mark(name, found[name]) for name in sorted(found)]
