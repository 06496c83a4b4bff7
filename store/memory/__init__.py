"""Long-term memory storage: the item model, scopes and two backends.

``open_memory`` picks the backend from a URL: nothing (or ``"embedded"``)
gives the SQLite FTS5 file under the data directory, ``redis://`` gives the
Redis index. The recall policy on top lives in ``engine/memory.py``.
"""

from __future__ import annotations

from pathlib import Path

from store.memory.embedded import SQLiteMemory
from store.memory.model import (
    KINDS,
    Kind,
    MemoryBackend,
    MemoryItem,
    group_scope,
    new_memory_id,
    scope_label,
    scope_vp,
    user_scope,
    vp_scope,
)
from store.memory.redis_backend import RedisMemory

__all__ = [
    "KINDS",
    "Kind",
    "MemoryBackend",
    "MemoryItem",
    "RedisMemory",
    "SQLiteMemory",
    "group_scope",
    "new_memory_id",
    "open_memory",
    "scope_label",
    "scope_vp",
    "user_scope",
    "vp_scope",
]

MEMORY_FILE = "memory.sqlite3"
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def open_memory(url: str | None, data_dir: Path, *, prefix: str = "yeaft:mem:") -> MemoryBackend:
    """The memory backend ``url`` names; ``prefix`` namespaces Redis keys.

    Nothing is connected or opened until the first call, so this is cheap
    and safe to call at import or configuration time.
    """
    if url is None or url.strip() in ("", "embedded"):
        return SQLiteMemory(Path(data_dir) / MEMORY_FILE)
    if url.startswith(_REDIS_SCHEMES):
        return RedisMemory(url, prefix=prefix)
    raise ValueError(f"unknown memory backend URL {url!r}: use 'embedded' or redis://...")
