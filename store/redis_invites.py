"""The Redis store's invite links (``store.invites``).

All keys share the ``{invites}`` hash tag, so each script touches a single
Redis Cluster slot:

==============================  ====  ==========================================
``P:{invites}:i:<id>``          hash  one invite
``P:{invites}:all``             zset  every invite id, scored by creation time
==============================  ====  ==========================================

Redeeming is one Lua script (it runs alone on the server): it reads the
invite, decides its state and counts the use in the same step, so two
redemptions of a last use never both succeed. Invites are never dropped by
key expiry: their times are the caller's clock, and administrators list
expired and used-up ones too.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis

from store.base import StoreError
from store.invites import InviteRecord, InviteState, Redemption
from store.redis_errors import redis_errors

# KEYS: the invite, every invite. ARGV: id, creation time, then field, value pairs.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""

# KEYS: the invite. ARGV: now. Returns {state, fields...} (fields of the record after).
_REDEEM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local f = redis.call('HMGET', KEYS[1], 'uses', 'max_uses', 'expires_at', 'revoked_at')
local state = 'valid'
if f[4] then
  state = 'revoked'
elseif tonumber(f[3]) <= tonumber(ARGV[1]) then
  state = 'expired'
elseif tonumber(f[1]) >= tonumber(f[2]) then
  state = 'used_up'
else
  redis.call('HINCRBY', KEYS[1], 'uses', 1)
end
return {state, redis.call('HGETALL', KEYS[1])}
"""

# KEYS: the invite. Gives back one use, never below none.
_RELEASE = """
local uses = tonumber(redis.call('HGET', KEYS[1], 'uses') or '0')
if uses > 0 then redis.call('HINCRBY', KEYS[1], 'uses', -1) end
return uses
"""

# KEYS: the invite. ARGV: now. Revokes once; returns the record's fields ({} when unknown).
_REVOKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
if redis.call('HEXISTS', KEYS[1], 'revoked_at') == 0 then
  redis.call('HSET', KEYS[1], 'revoked_at', ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
"""


def _pairs(flat: list[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _record(invite_id: str, fields: dict[str, str]) -> InviteRecord:
    revoked = fields.get("revoked_at")
    group = fields.get("group_id")
    return InviteRecord(
        id=invite_id,
        secret_hash=fields["secret_hash"],
        created_by=fields["created_by"],
        created_at=float(fields["created_at"]),
        expires_at=float(fields["expires_at"]),
        max_uses=int(fields["max_uses"]),
        uses=int(fields["uses"]),
        group_id=group or None,
        revoked_at=float(revoked) if revoked else None,
    )


class RedisInvites:
    """``store.invites.InviteLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _invite_key(self, kind: str, name: str = "") -> str:
        return f"{self.prefix}:{{invites}}:{kind}" + (f":{name}" if name else "")

    async def create_invite(self, invite: InviteRecord) -> None:
        self._check_open()
        i = invite
        fields = {
            "secret_hash": i.secret_hash,
            "created_by": i.created_by,
            "created_at": repr(i.created_at),
            "expires_at": repr(i.expires_at),
            "max_uses": str(i.max_uses),
            "uses": str(i.uses),
        }
        if i.group_id is not None:
            fields["group_id"] = i.group_id
        if i.revoked_at is not None:
            fields["revoked_at"] = repr(i.revoked_at)
        keys = [self._invite_key("i", i.id), self._invite_key("all")]
        args = [i.id, repr(i.created_at), *(x for pair in fields.items() for x in pair)]
        with redis_errors():
            made = await self._r.eval(_CREATE, len(keys), *keys, *args)
        if not made:
            raise StoreError(f"an invite {i.id!r} exists already")

    async def get_invite(self, invite_id: str) -> InviteRecord | None:
        self._check_open()
        with redis_errors():
            fields = cast(dict[str, str], await self._r.hgetall(self._invite_key("i", invite_id)))
        return _record(invite_id, fields) if fields.get("secret_hash") else None

    async def list_invites(self, group_id: str | None = None) -> list[InviteRecord]:
        self._check_open()
        with redis_errors():
            ids = cast(list[str], await self._r.zrevrange(self._invite_key("all"), 0, -1))
            async with self._r.pipeline(transaction=False) as pipe:
                for invite_id in ids:
                    pipe.hgetall(self._invite_key("i", invite_id))
                rows = cast(list[dict[str, str]], await pipe.execute())
        found = [_record(i, f) for i, f in zip(ids, rows, strict=True) if f.get("secret_hash")]
        return [r for r in found if group_id is None or r.group_id == group_id]

    async def redeem_invite(self, invite_id: str, now: float) -> Redemption:
        self._check_open()
        with redis_errors():
            reply = await self._r.eval(_REDEEM, 1, self._invite_key("i", invite_id), repr(now))
        answer = cast(list[Any], reply)
        state = InviteState(str(answer[0]))
        if state is InviteState.UNKNOWN:
            return Redemption(state, None)
        return Redemption(state, _record(invite_id, _pairs(cast(list[Any], answer[1]))))

    async def release_invite(self, invite_id: str) -> None:
        self._check_open()
        with redis_errors():
            await self._r.eval(_RELEASE, 1, self._invite_key("i", invite_id))

    async def revoke_invite(self, invite_id: str, now: float) -> InviteRecord | None:
        self._check_open()
        with redis_errors():
            reply = await self._r.eval(_REVOKE, 1, self._invite_key("i", invite_id), repr(now))
        fields = _pairs(cast(list[Any], reply))
        return _record(invite_id, fields) if fields.get("secret_hash") else None
