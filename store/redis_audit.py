"""The Redis store's audit log (``store.audit``): one stream, never trimmed.

====================  ======  ================================================
``P:audit``           stream  one entry per action: field ``e``, the entry's
                              JSON (without its id: the stream id is the id)
====================  ======  ================================================

An entry's stream id is its ``at`` in milliseconds (``<ms>-*``), or, when
an entry with a later time is in the stream already (a gateway whose clock
is behind another's), the next id after it. So ids keep the order entries
were appended in, and an entry's id is never earlier than its ``at``: a
read with ``since`` walks the stream newest first and stops at the first id
before it. ``until`` and the other filters are checked on each entry.
Nothing here trims, edits or deletes the stream (``XADD`` has no
``MAXLEN``): the log keeps every entry, as the embedded one does.
"""

from __future__ import annotations

import re
from typing import cast

import redis.asyncio as aioredis

from store.audit import AuditEntry, AuditPage, AuditQuery, BadAuditCursor, page_of
from store.redis_errors import redis_errors

# KEYS: the stream. ARGV: the entry's time in ms, its JSON. Returns its id.
_APPEND = """
local ok, id = pcall(redis.call, 'XADD', KEYS[1], ARGV[1] .. '-*', 'e', ARGV[2])
if not ok then id = redis.call('XADD', KEYS[1], '*', 'e', ARGV[2]) end
return id
"""
_BATCH = 500
_STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")

StreamItems = list[tuple[str, dict[str, str]]]


def _bounds(query: AuditQuery) -> tuple[str, str]:
    """The (max, min) stream ids of a newest-first walk for ``query``."""
    if query.before is not None:
        if not _STREAM_ID.fullmatch(query.before):
            raise BadAuditCursor(f"{query.before!r} is not an audit entry id")
        newest = "(" + query.before
    else:
        newest = "+"
    # An id's milliseconds are at least its entry's, rounded down.
    oldest = "-" if query.since is None else str(max(0, int(query.since * 1000) - 1))
    return newest, oldest


class RedisAudit:
    """``store.audit.AuditLog`` on Redis (mixed into RedisStore)."""

    _r: aioredis.Redis
    prefix: str

    def _check_open(self) -> None:
        raise NotImplementedError  # RedisStore's own

    def _audit_key(self) -> str:
        return f"{self.prefix}:audit"

    async def append_audit(self, entry: AuditEntry) -> str:
        self._check_open()
        body = entry.model_dump_json(exclude={"id"})
        at_ms = max(1, int(entry.at * 1000))
        with redis_errors():
            entry_id = await self._r.eval(_APPEND, 1, self._audit_key(), at_ms, body)
        return str(entry_id)

    async def read_audit(self, query: AuditQuery) -> AuditPage:
        self._check_open()
        newest, oldest = _bounds(query)
        found: list[AuditEntry] = []
        while len(found) <= query.limit:
            with redis_errors():
                items = cast(
                    StreamItems,
                    await self._r.xrevrange(self._audit_key(), newest, oldest, count=_BATCH),
                )
            for entry_id, fields in items:
                entry = AuditEntry.model_validate_json(fields["e"]).model_copy(
                    update={"id": entry_id}
                )
                if query.matches(entry):
                    found.append(entry)
            if len(items) < _BATCH:
                break
            newest = "(" + items[-1][0]
        return page_of(found, query.limit)
