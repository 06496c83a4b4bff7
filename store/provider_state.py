"""Provider state a whole deployment shares: credential cooldowns and provider-lane slots.

Two backends, picked like the store's (``StoreConfig.open_provider_state``):

- :class:`SQLiteProviderState`: a SQLite file in the data directory, so
  every process of one machine (the embedded default) sees the same
  cooldowns and the same slots;
- :class:`RedisProviderState`: Redis keys under the store's prefix, for a
  cluster. Cooldowns are one hash per provider; each lane is a sorted set
  of holders scored by lease expiry, taken in one Lua script.

Only credential labels are stored, never keys. Both are the
``CooldownBook`` of ``engine.credentials`` and the ``SlotBook`` of
``engine.provider_lane``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROVIDER_STATE_FILE = "providers.sqlite3"


@dataclass(frozen=True, slots=True)
class Cooldown:
    """A credential's state: cooling until ``until`` after ``errors`` failures."""

    until: float
    errors: int
    reason: str

    def active(self, now: float) -> bool:
        return now < self.until


_SCHEMA = """
CREATE TABLE IF NOT EXISTS cooldowns (
    provider TEXT NOT NULL, label TEXT NOT NULL,
    until REAL NOT NULL, errors INTEGER NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (provider, label));
CREATE TABLE IF NOT EXISTS slots (
    key TEXT NOT NULL, holder TEXT NOT NULL, expires REAL NOT NULL,
    PRIMARY KEY (key, holder));
"""


class SQLiteProviderState:
    """Cooldowns and slots in one SQLite file (every process of one machine)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteProviderState({str(self.path)!r})"

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    async def _run(self, fn: Any, *args: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return fn(self._db(), *args)

        return await asyncio.to_thread(locked)

    async def cooldowns(self, provider: str) -> dict[str, Cooldown]:
        def read(db: sqlite3.Connection) -> dict[str, Cooldown]:
            rows = db.execute(
                "SELECT label, until, errors, reason FROM cooldowns WHERE provider = ?",
                (provider,),
            ).fetchall()
            return {r[0]: Cooldown(r[1], r[2], r[3]) for r in rows}

        result: dict[str, Cooldown] = await self._run(read)
        return result

    async def put_cooldown(self, provider: str, label: str, cooldown: Cooldown) -> None:
        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO cooldowns VALUES (?, ?, ?, ?, ?)",
                (provider, label, cooldown.until, cooldown.errors, cooldown.reason),
            )

        await self._run(write)

    async def try_acquire(
        self, key: str, holder: str, limit: int, now: float, lease_s: float
    ) -> bool:
        def take(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM slots WHERE key = ? AND expires <= ?", (key, now))
                (held,) = db.execute(
                    "SELECT COUNT(*) FROM slots WHERE key = ? AND holder != ?", (key, holder)
                ).fetchone()
                ok = held < limit
                if ok:
                    db.execute(
                        "INSERT OR REPLACE INTO slots VALUES (?, ?, ?)",
                        (key, holder, now + lease_s),
                    )
                db.execute("COMMIT")
                return bool(ok)
            except BaseException:
                db.execute("ROLLBACK")
                raise

        result: bool = await self._run(take)
        return result

    async def release(self, key: str, holder: str) -> None:
        def drop(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM slots WHERE key = ? AND holder = ?", (key, holder))

        await self._run(drop)

    async def aclose(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# KEYS[1]: the lane's sorted set. ARGV: holder, limit, now, expiry, lease in ms.
# The set itself expires a lease after its last addition (nobody holds it then).
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1])
   or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
"""


class RedisProviderState:
    """Cooldowns and slots in Redis (every process of a cluster)."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis.asyncio as aioredis

        self._r = aioredis.Redis.from_url(url)
        self.prefix = f"{prefix}:prov"
        self._acquire = self._r.register_script(_ACQUIRE)

    def __repr__(self) -> str:
        return f"RedisProviderState(prefix={self.prefix!r})"

    async def cooldowns(self, provider: str) -> dict[str, Cooldown]:
        raw = await self._r.hgetall(f"{self.prefix}:cool:{provider}")
        out: dict[str, Cooldown] = {}
        for label, value in raw.items():
            data = json.loads(value)
            name = label.decode() if isinstance(label, bytes) else str(label)
            out[name] = Cooldown(data["until"], data["errors"], data["reason"])
        return out

    async def put_cooldown(self, provider: str, label: str, cooldown: Cooldown) -> None:
        value = {"until": cooldown.until, "errors": cooldown.errors, "reason": cooldown.reason}
        await self._r.hset(f"{self.prefix}:cool:{provider}", label, json.dumps(value))

    async def try_acquire(
        self, key: str, holder: str, limit: int, now: float, lease_s: float
    ) -> bool:
        lane = f"{self.prefix}:lane:{key}"
        return bool(
            await self._acquire(
                keys=[lane], args=[holder, limit, now, now + lease_s, int(lease_s * 1000) + 1000]
            )
        )

    async def release(self, key: str, holder: str) -> None:
        await self._r.zrem(f"{self.prefix}:lane:{key}", holder)

    async def aclose(self) -> None:
        await self._r.aclose()
