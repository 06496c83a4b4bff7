"""Which coordinator shard owns a group: a stable hash of its id.

Every process computes the same answer (CRC-32, not Python's salted
``hash``), so every gateway replica sends a group's traffic to one
coordinator, and a restarted coordinator finds exactly its own groups' turns.
"""

from __future__ import annotations

import zlib


def shard_of(group_id: str, shards: int) -> int:
    return zlib.crc32(group_id.encode()) % max(1, shards)
