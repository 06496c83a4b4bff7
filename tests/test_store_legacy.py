"""Stores written by an earlier version still open and read, on each backend.

Covers group documents carrying retired or unknown settings (both backends),
an embedded database made before event headers were stored, and redis events
stored without a header. Sample records come from
``tests/fixtures/store_samples.py``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from store import GroupSettings, Store, new_id
from store.embedded import DB_FILENAME, EmbeddedStore
from store.redis import RedisStore
from tests.fixtures.store_samples import notice, sample_group
from tests.fixtures.stores import StoreFactory


async def _store_raw_group(store: Store, group_id: str, data: str) -> None:
    """Put a group document into the backend as an earlier version would have written it."""
    if isinstance(store, EmbeddedStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute("UPDATE groups SET data = ? WHERE id = ?", (data, group_id))
        conn.close()
    else:
        assert isinstance(store, RedisStore)
        await store._r.set(store._key(group_id, "group"), data)


async def test_groups_stored_with_retired_settings_still_load(store: Store) -> None:
    group = await store.create_group(sample_group(members=["alice"]))
    document = json.loads(group.model_dump_json())
    # ``model`` was a setting once; a group saved then carries it, and keys of
    # settings not yet known may come from a newer version.
    document["settings"].update({"model": None, "fanout_cap": 5, "future_knob": [1]})
    await _store_raw_group(store, group.id, json.dumps(document))
    loaded = await store.get_group(group.id)
    assert loaded is not None and loaded.settings == GroupSettings(fanout_cap=5)
    (listed,) = await store.list_groups(member="alice")
    assert listed == loaded


# -- stores written by an earlier version ------------------------------------
# The embedded schema before event headers were stored, as that version made it.
_SCHEMA_WITHOUT_HEADERS = """
CREATE TABLE groups (id TEXT PRIMARY KEY, created_at REAL NOT NULL, data TEXT NOT NULL);
CREATE TABLE messages (
    pos INTEGER PRIMARY KEY,
    group_id TEXT NOT NULL,
    id TEXT NOT NULL,
    client_id TEXT,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX messages_by_id ON messages (group_id, id);
CREATE UNIQUE INDEX messages_by_client_id
    ON messages (group_id, client_id) WHERE client_id IS NOT NULL;
CREATE INDEX messages_by_pos ON messages (group_id, pos);
CREATE TABLE transcripts (
    group_id TEXT NOT NULL,
    vp_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, vp_id)
) WITHOUT ROWID;
CREATE TABLE event_heads (group_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE events (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX events_by_seq ON events (group_id, seq);
CREATE TABLE users (username TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
"""

# Envelopes as that version's producers wrote them (dicts, ``seq`` added last).
_OLD_ENVELOPES: list[dict[str, Any]] = [
    {
        "type": "yeaft_output",
        "conversationId": "grp_old",
        "groupId": "grp_old",
        "vpId": "linus",
        "turnId": "t1",
        "data": {
            "type": "result",
            "subtype": "success",
            "session_id": "grp_old",
            "is_error": False,
            "duration_ms": 1200,
            "total_cost_usd": 0.0,
            "usage": {"input_tokens": 3, "output_tokens": 4},
        },
    },
    {"type": "agent_status", "groupId": "grp_old", "vpId": "linus", "state": "idle"},
    {
        "type": "ask_user_question",
        "requestId": "ask_1",
        "prompt": "which colour?",
        "choices": None,
        "groupId": "grp_old",
        "vpId": "steve",
        "turnId": "t2",
        "expiresAt": 1.5,
    },
]
_OLD_HEADERS = [
    ("yeaft_output", "linus", "result"),
    ("agent_status", "linus", None),
    ("ask_user_question", "steve", None),
]


def _old_text(envelope: dict[str, Any], seq: int) -> str:
    return json.dumps({**envelope, "seq": seq}, separators=(",", ":"), ensure_ascii=False)


async def test_an_embedded_database_made_before_event_headers_opens_and_reads(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    texts = [_old_text(env, seq) for seq, env in enumerate(_OLD_ENVELOPES, 1)]
    conn = sqlite3.connect(data_dir / DB_FILENAME)
    conn.executescript(_SCHEMA_WITHOUT_HEADERS)
    conn.executemany(
        "INSERT INTO events (group_id, seq, data) VALUES ('grp_old', ?, ?)",
        list(enumerate(texts, 1)),
    )
    conn.execute("INSERT INTO event_heads VALUES ('grp_old', 3)")
    conn.commit()
    conn.close()

    store = EmbeddedStore(data_dir)
    try:
        events = (await store.read_events("grp_old", 0)).events
        assert [e.text for e in events] == texts, "old events are read back unchanged"
        assert [(e.type, e.vp_id, e.data_type) for e in events] == _OLD_HEADERS
        assert [e.frame().seq for e in events] == [1, 2, 3]
        assert await store.head("grp_old") == 3
        assert await store.append_event("grp_old", notice(n=4)) == 4
        (newest,) = (await store.read_events("grp_old", 3)).events
        assert (newest.seq, newest.type, newest.vp_id, newest.data_type) == (
            4,
            "yeaft_output",
            "steve",
            "system",
        )
    finally:
        await store.close()
    # A second open finds the database already migrated.
    again = EmbeddedStore(data_dir)
    try:
        assert [e.seq for e in (await again.read_events("grp_old", 0)).events] == [1, 2, 3, 4]
    finally:
        await again.close()


@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_a_redis_event_stored_without_a_header_is_read_from_its_json(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    assert isinstance(store, RedisStore)
    gid = new_id("grp")
    texts = [_old_text(env, seq) for seq, env in enumerate(_OLD_ENVELOPES, 1)]
    client = aioredis.Redis.from_url(store.url, decode_responses=True)
    try:
        for seq, text in enumerate(texts, 1):
            await client.xadd(store._key(gid, "events"), {"d": text}, id=f"{seq}-0")
        await client.set(store._key(gid, "eseq"), len(texts))
    finally:
        await client.aclose()

    assert await store.append_event(gid, notice(n=4)) == 4
    events = (await store.read_events(gid, 0)).events
    assert [e.text for e in events[:3]] == texts
    assert [(e.type, e.vp_id, e.data_type) for e in events] == [
        *_OLD_HEADERS,
        ("yeaft_output", "steve", "system"),
    ]
