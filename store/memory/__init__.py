"""Long-term memory storage: the item model, scopes and two backends.

``store.StoreConfig.open_memory`` picks the backend from the deployment's
store URL: nothing (or ``"embedded"``) gives the SQLite FTS5 file under the
data directory, ``redis://`` gives the Redis index
(``store.memory.redis_backend``, imported only where Redis is used). The
recall policy on top lives in ``engine/memory.py``.
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
    vp_notes_scope,
    vp_scope,
)

__all__ = [
    "KINDS",
    "Kind",
    "MemoryBackend",
    "MemoryItem",
    "SQLiteMemory",
    "group_scope",
    "new_memory_id",
    "scope_label",
    "scope_vp",
    "user_scope",
    "vp_notes_scope",
    "vp_scope",
]
