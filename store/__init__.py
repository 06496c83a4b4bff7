"""Persistence and event logs: one Store interface, an embedded and a Redis backend.

``open_store`` picks the backend from a URL; ``StoreSettings`` reads that URL
and the data directory from the environment (``YEAFT_REDIS_URL``,
``YEAFT_DATA_DIR``, ...), so every process of a deployment opens the same
store the same way.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from store._shared import DEFAULT_EVENT_RETENTION
from store.base import (
    EventBatch,
    Group,
    GroupMessage,
    GroupSettings,
    NotFound,
    Store,
    StoreError,
    new_id,
)

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def open_store(
    url: str | None,
    data_dir: Path,
    *,
    event_retention: int = DEFAULT_EVENT_RETENTION,
    redis_prefix: str = "yeaft",
) -> Store:
    """Open the store a URL names.

    ``None``, ``""`` or ``"embedded"`` give the embedded store under
    ``data_dir``; ``redis://``, ``rediss://`` and ``unix://`` URLs give the
    Redis store with every key under ``redis_prefix``. Nothing connects
    until the first call, so this is safe to call from async code.
    """
    if not url or url == "embedded":
        from store.embedded import EmbeddedStore

        return EmbeddedStore(data_dir, event_retention=event_retention)
    if url.startswith(_REDIS_SCHEMES):
        # Imported here so a process using the embedded store never loads redis.
        from store.redis import RedisStore

        return RedisStore(url, redis_prefix, event_retention=event_retention)
    raise StoreError(f"unsupported store URL {url!r}: use 'embedded' or a redis:// URL")


class StoreSettings(BaseSettings):
    """Where the store lives, from ``YEAFT_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="YEAFT_", extra="ignore")

    # YEAFT_DATA_DIR: the embedded store's directory (and other local state).
    data_dir: Path = Path("~/.yeaft")
    # YEAFT_REDIS_URL: when set, the Redis store is used instead.
    redis_url: str | None = None
    # YEAFT_REDIS_PREFIX: the prefix of every Redis key.
    redis_prefix: str = "yeaft"
    # YEAFT_EVENT_RETENTION: events kept per group before the oldest are trimmed.
    event_retention: int = DEFAULT_EVENT_RETENTION

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    def open(self) -> Store:
        """Open the store these settings describe."""
        return open_store(
            self.redis_url,
            self.data_dir,
            event_retention=self.event_retention,
            redis_prefix=self.redis_prefix,
        )


__all__ = [
    "EventBatch",
    "Group",
    "GroupMessage",
    "GroupSettings",
    "NotFound",
    "Store",
    "StoreError",
    "StoreSettings",
    "new_id",
    "open_store",
]
