"""The Redis backend: each attachment in its own key, referenced by id from its message.

``<prefix>:att:<id>`` is a hash of two fields, ``record`` (the record as
JSON) and ``data`` (the bytes), written in one MULTI/EXEC transaction; an
id that is already stored is refused and left as it was. Deleting a
group's attachments scans the attachment keys (``SCAN``) for its records.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from store.attachments.model import AttachmentExists, AttachmentRecord, AttachmentStore


class RedisAttachments(AttachmentStore):
    def __init__(self, url: str, prefix: str = "yeaft") -> None:
        self._redis: Any = aioredis.from_url(url)
        self._prefix = prefix

    def _key(self, attachment_id: str) -> str:
        return f"{self._prefix}:att:{attachment_id}"

    async def put(self, record: AttachmentRecord, data: bytes) -> None:
        key = self._key(record.id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.exists(key)
            pipe.hsetnx(key, "data", data)
            pipe.hsetnx(key, "record", json.dumps(record.to_json()))
            existed, _, _ = await pipe.execute()
        if existed:
            raise AttachmentExists(f"attachment {record.id} exists")

    async def get(self, attachment_id: str) -> AttachmentRecord | None:
        raw = await self._redis.hget(self._key(attachment_id), "record")
        return AttachmentRecord.from_json(json.loads(raw)) if raw is not None else None

    async def data(self, attachment_id: str) -> bytes | None:
        key = self._key(attachment_id)
        if not await self._redis.hexists(key, "record"):
            return None
        raw = await self._redis.hget(key, "data")
        return bytes(raw) if raw is not None else None

    async def delete_group(self, group_id: str) -> int:
        deleted, cursor = 0, 0
        while True:
            # Each SCAN step gives a batch of keys; their records are read in one round trip.
            cursor, keys = await self._redis.scan(cursor, match=self._key("*"), count=500)
            if keys:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for key in keys:
                        pipe.hget(key, "record")
                    records = await pipe.execute()
                doomed = [
                    key
                    for key, raw in zip(keys, records, strict=True)
                    if raw is not None and json.loads(raw).get("group_id") == group_id
                ]
                if doomed:
                    deleted += int(await self._redis.delete(*doomed))
            if cursor == 0:
                return deleted

    async def aclose(self) -> None:
        await self._redis.aclose()
