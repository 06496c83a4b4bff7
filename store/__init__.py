"""Persistence and event logs: one Store interface, an embedded and a Redis backend.

``StoreConfig`` names where a deployment's store and memory live and opens
them (the URL decides the backend, in one place); ``StoreSettings`` reads
that from the environment (``YEAFT_REDIS_URL``, ``YEAFT_DATA_DIR``, ...), so
every process of a deployment opens the same store the same way.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from store._shared import DEFAULT_EVENT_RETENTION
from store.base import (
    EventLog,
    Group,
    GroupLog,
    GroupMessage,
    GroupSettings,
    GroupStore,
    NotFound,
    Store,
    StoreError,
    TranscriptStore,
    UserStore,
    new_id,
)
from store.config import StoreConfig, UnsupportedStoreURL, redact_url
from store.events import EventBatch, StoredEvent


def open_store(
    url: str | None,
    data_dir: Path,
    *,
    event_retention: int = DEFAULT_EVENT_RETENTION,
    redis_prefix: str = "yeaft",
) -> Store:
    """Open the store a URL names: ``StoreConfig(...).open_store()`` in one call."""
    return StoreConfig(url, data_dir, event_retention, redis_prefix).open_store()


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

    def store_config(self) -> StoreConfig:
        """These settings as the picklable config every process opens the store from."""
        return StoreConfig(
            url=self.redis_url,
            data_dir=self.data_dir,
            event_retention=self.event_retention,
            redis_prefix=self.redis_prefix,
        )

    def open(self) -> Store:
        """Open the store these settings describe."""
        return self.store_config().open_store()


__all__ = [
    "EventBatch",
    "EventLog",
    "Group",
    "GroupLog",
    "GroupMessage",
    "GroupSettings",
    "GroupStore",
    "NotFound",
    "Store",
    "StoreConfig",
    "StoreError",
    "StoreSettings",
    "StoredEvent",
    "TranscriptStore",
    "UnsupportedStoreURL",
    "UserStore",
    "new_id",
    "open_store",
    "redact_url",
]
