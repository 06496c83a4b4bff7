"""Where a deployment's store and memory live, and opening them: one decision per URL.

``StoreConfig`` is a frozen, picklable value, so it can travel to a Ray actor
on another machine and open there exactly what the driver would open. The
URL names the backend of both the store and the long-term memory:

- ``None``, ``""`` or ``"embedded"``: SQLite files under ``data_dir``;
- ``redis://``, ``rediss://`` or ``unix://``: Redis, every key under
  ``redis_prefix`` (the memory's under ``<redis_prefix>:mem:``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from store._shared import DEFAULT_EVENT_RETENTION, check_retention
from store.base import StoreError

if TYPE_CHECKING:
    from store.attachments.model import AttachmentStore
    from store.base import Store
    from store.memory.model import MemoryBackend

Backend = Literal["embedded", "redis"]

DEFAULT_DATA_DIR = Path("~/.yeaft")
MEMORY_FILE = "memory.sqlite3"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
# A password in a URL's user info (scheme://user:PASSWORD@host) or in its
# query string (unix:///path?password=PASSWORD), as redis-py reads them.
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:@/]*:)[^@/]*@|([?&]password=)[^&#]*", re.I)


def redact_url(url: str | None) -> str | None:
    """``url`` with its password replaced by ``***``: for logs, reprs and start-up lines."""
    if url is None:
        return None
    return _URL_PASSWORD.sub(lambda m: f"{m[1]}***@" if m[1] else f"{m[2]}***", url)


class UnsupportedStoreURL(StoreError, ValueError):
    """A store URL names no backend we have (a StoreError and a ValueError)."""


def backend_of(url: str | None) -> Backend:
    """The backend ``url`` names; UnsupportedStoreURL when it names none."""
    if url is None or url.strip() in ("", "embedded"):
        return "embedded"
    if url.startswith(_REDIS_SCHEMES):
        return "redis"
    raise UnsupportedStoreURL(
        f"unsupported store URL {url!r}: use 'embedded' or a redis://, rediss:// or unix:// URL"
    )


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Everything needed to open the store and the memory of one deployment.

    The URL is checked when the config is made. Opening connects to nothing
    until the first call, so ``open_store`` and ``open_memory`` are safe to
    call from async code.
    """

    url: str | None = None
    data_dir: Path = DEFAULT_DATA_DIR
    event_retention: int = DEFAULT_EVENT_RETENTION
    redis_prefix: str = "yeaft"

    def __post_init__(self) -> None:
        backend_of(self.url)
        check_retention(self.event_retention)
        object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser())

    def __repr__(self) -> str:
        # The URL may carry the Redis password; a config is logged and pickled
        # to actors, so its repr never shows it.
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["url"] = redact_url(self.url)
        return "StoreConfig(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def backend(self) -> Backend:
        return backend_of(self.url)

    @property
    def memory_prefix(self) -> str:
        """The prefix of the memory's Redis keys."""
        return f"{self.redis_prefix}:mem:"

    def open_store(self) -> Store:
        """The group store: ``EmbeddedStore`` or ``RedisStore``."""
        # Imported here so a process using the embedded store never loads redis.
        url = self._redis_url()
        if url is not None:
            from store.redis import RedisStore

            return RedisStore(url, self.redis_prefix, event_retention=self.event_retention)
        from store.embedded import EmbeddedStore

        return EmbeddedStore(self.data_dir, event_retention=self.event_retention)

    def open_memory(self) -> MemoryBackend:
        """The long-term memory: ``SQLiteMemory`` or ``RedisMemory``."""
        url = self._redis_url()
        if url is not None:
            from store.memory.redis_backend import RedisMemory

            return RedisMemory(url, prefix=self.memory_prefix)
        from store.memory.embedded import SQLiteMemory

        return SQLiteMemory(self.data_dir / MEMORY_FILE)

    def open_attachments(self) -> AttachmentStore:
        """Attachment bytes: ``FileAttachments`` or ``RedisAttachments``."""
        url = self._redis_url()
        if url is not None:
            from store.attachments.redis_backend import RedisAttachments

            return RedisAttachments(url, self.redis_prefix)
        from store.attachments.files import FileAttachments

        return FileAttachments(self.data_dir)

    def _redis_url(self) -> str | None:
        return self.url if self.backend == "redis" else None
