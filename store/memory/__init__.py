"""Long-term memory storage: the item model, scopes and two backends.

``store.StoreConfig.open_memory`` picks the backend from the deployment's
store URL: nothing (or ``"embedded"``) gives the SQLite FTS5 file under the
data directory, ``redis://`` gives the Redis index. The recall policy on top
lives in ``engine/memory.py``.
"""

from __future__ import annotations

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
    "scope_label",
    "scope_vp",
    "user_scope",
    "vp_scope",
]
