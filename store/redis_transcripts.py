"""The Redis store's engine transcripts (``store.base.TranscriptStore``).

``P:g:{G}:tx``   hash  VP id -> the transcript's head (or a whole transcript saved before rows)
``P:g:{G}:txn``  hash  VP id -> how many rows it holds
``P:g:{G}:txm``  hash  ``<VP id>:<n>`` -> row n (rows are numbered from 0)

A field of ``txm`` ends in the row's number, after the last colon, so no two
VPs' rows share a field whatever their ids. A save and a load are each one
Lua script, so a reader never sees half a save.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript

from store.base import StoredTranscript
from store.redis_errors import redis_errors

TRANSCRIPT_KINDS = ("tx", "txn", "txm")
# A VP's transcript (store.base.TranscriptStore). KEYS: tx (VP id -> head),
# txn (VP id -> rows held), txm ('<VP id>:<n>' -> row n). ARGV: VP id, head,
# keep, then the rows that follow the first ``keep``. Returns 0, writing
# nothing, when fewer than ``keep`` rows are held.
SAVE_TRANSCRIPT = """
local vp, keep = ARGV[1], tonumber(ARGV[3])
local held = tonumber(redis.call('HGET', KEYS[2], vp) or '0')
if held < keep then
  return 0
end
for n = keep, held - 1 do
  redis.call('HDEL', KEYS[3], vp .. ':' .. n)
end
local n = keep
for i = 4, #ARGV do
  redis.call('HSET', KEYS[3], vp .. ':' .. n, ARGV[i])
  n = n + 1
end
redis.call('HSET', KEYS[2], vp, n)
redis.call('HSET', KEYS[1], vp, ARGV[2])
return 1
"""

# KEYS and ARGV[1] as SAVE_TRANSCRIPT's. Returns nil when no head is held,
# else the head followed by the rows in order (fetched a thousand at a time:
# Lua's unpack has a stack limit).
LOAD_TRANSCRIPT = """
local vp = ARGV[1]
local head = redis.call('HGET', KEYS[1], vp)
if not head then
  return false
end
local out = {head}
local held = tonumber(redis.call('HGET', KEYS[2], vp) or '0')
for first = 0, held - 1, 1000 do
  local fields = {}
  for n = first, math.min(first + 999, held - 1) do
    fields[#fields + 1] = vp .. ':' .. n
  end
  for _, row in ipairs(redis.call('HMGET', KEYS[3], unpack(fields))) do
    if row then
      out[#out + 1] = row
    end
  end
end
return out
"""


class RedisTranscripts:
    """``store.base.TranscriptStore`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis

    def _key(self, group_id: str, kind: str) -> str:
        raise NotImplementedError  # RedisStore's own

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    @cached_property
    def _transcript_scripts(self) -> tuple[AsyncScript, AsyncScript]:
        """LOAD_TRANSCRIPT and SAVE_TRANSCRIPT, each sent by its hash once the server has it."""
        return self._r.register_script(LOAD_TRANSCRIPT), self._r.register_script(SAVE_TRANSCRIPT)

    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        self._check_open()
        with redis_errors():
            load, _ = self._transcript_scripts
            found = await load(keys=self._transcript_keys(group_id), args=[vp_id])
        if not found:
            return None
        head, *rows = (str(x) for x in found)
        return StoredTranscript(head, rows)

    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        self._check_open()
        with redis_errors():
            _, save = self._transcript_scripts
            done = await save(
                keys=self._transcript_keys(group_id), args=[vp_id, head, keep, *messages]
            )
        return bool(done)

    def _transcript_keys(self, group_id: str) -> list[str]:
        return [self._key(group_id, kind) for kind in TRANSCRIPT_KINDS]
