"""The store contract for groups, messages, transcripts and users, on both backends.

Every test here runs against both backends through ``store`` / ``store_factory``
(see ``tests/fixtures/stores.py``). This file also covers opening a store from
its URL or settings, and a closed store refusing calls. The event log is tested
in ``tests/test_store_events.py``; data written by earlier versions in
``tests/test_store_legacy.py``; shared sample records live in
``tests/fixtures/store_samples.py``.
"""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest

from store import (
    GroupMessage,
    GroupSettings,
    NotFound,
    Store,
    StoreConfig,
    StoreError,
    StoreSettings,
    new_id,
    open_store,
)
from store.embedded import EmbeddedStore
from store.memory import SQLiteMemory
from store.memory.redis_backend import RedisMemory
from store.redis import RedisStore
from tests.fixtures.store_samples import notice, sample_group, user_message
from tests.fixtures.stores import StoreFactory


# -- groups ------------------------------------------------------------------
async def test_group_create_get_and_create_twice_fails(store: Store) -> None:
    group = sample_group(members=["alice"], default_vp="jobs", settings=GroupSettings(fanout_cap=3))
    assert await store.create_group(group) == group
    assert await store.get_group(group.id) == group
    assert await store.get_group("grp_missing") is None
    with pytest.raises(StoreError):
        await store.create_group(group.model_copy(update={"name": "again"}))
    loaded = await store.get_group(group.id)
    assert loaded is not None and loaded.name == "team"


async def test_save_group_overwrites_and_missing_raises_not_found(store: Store) -> None:
    group = await store.create_group(sample_group())
    renamed = group.model_copy(update={"name": "renamed", "roster": ["beck"]})
    await store.save_group(renamed)
    assert await store.get_group(group.id) == renamed
    with pytest.raises(NotFound):
        await store.save_group(sample_group())


async def test_list_groups_filters_by_member(store: Store) -> None:
    a = await store.create_group(sample_group(name="a", members=["alice", "bob"], created_at=1.0))
    b = await store.create_group(sample_group(name="b", members=["bob"], created_at=2.0))
    c = await store.create_group(sample_group(name="c", members=[], created_at=3.0))
    assert [g.id for g in await store.list_groups()] == [a.id, b.id, c.id]
    assert [g.id for g in await store.list_groups(member="bob")] == [a.id, b.id]
    assert [g.id for g in await store.list_groups(member="alice")] == [a.id]
    assert await store.list_groups(member="nobody") == []


async def test_delete_group_removes_log_events_and_transcripts(store: Store) -> None:
    group = await store.create_group(sample_group())
    other = await store.create_group(sample_group())
    for gid in (group.id, other.id):
        await store.append_message(gid, user_message("hi", clientMessageId="c1"))
        await store.append_event(gid, notice())
        await store.save_transcript(gid, "jobs", '{"id": "c"}', ['{"role": "user"}'])

    assert await store.delete_group(group.id) is True
    assert await store.get_group(group.id) is None
    assert await store.read_messages(group.id) == []
    assert await store.load_transcript(group.id, "jobs") is None
    batch = await store.read_events(group.id, 0)
    assert (batch.events, batch.first_seq, batch.last_seq) == ([], 0, 0)
    assert [g.id for g in await store.list_groups()] == [other.id]
    assert await store.delete_group(group.id) is False

    # The idempotency record went with the log: the same client id is new again.
    _, created = await store.append_message(group.id, user_message("hi", clientMessageId="c1"))
    assert created
    # The other group kept everything.
    assert len(await store.read_messages(other.id)) == 1
    assert await store.load_transcript(other.id, "jobs") is not None
    assert (await store.read_events(other.id, 0)).last_seq == 1


# -- group log ---------------------------------------------------------------
async def test_messages_append_get_and_page(store: Store) -> None:
    gid = new_id("grp")
    sent = []
    for i in range(25):
        stored, created = await store.append_message(gid, user_message(f"m{i}"))
        assert created and stored.text == f"m{i}"
        sent.append(stored)

    newest = await store.read_messages(gid, limit=10)
    assert [m.text for m in newest] == [f"m{i}" for i in range(15, 25)]
    older = await store.read_messages(gid, before=newest[0].id, limit=10)
    assert [m.text for m in older] == [f"m{i}" for i in range(5, 15)]
    oldest = await store.read_messages(gid, before=older[0].id, limit=10)
    assert [m.text for m in oldest] == [f"m{i}" for i in range(5)]
    assert await store.read_messages(gid, before=oldest[0].id) == []
    assert await store.read_messages(gid, before="msg_unknown") == []
    assert await store.read_messages(gid, limit=0) == []
    assert await store.read_messages(gid) == sent

    assert await store.get_message(gid, sent[3].id) == sent[3]
    assert await store.get_message(gid, "msg_unknown") is None
    assert await store.get_message(new_id("grp"), sent[3].id) is None


async def test_message_fields_round_trip(store: Store) -> None:
    gid = new_id("grp")
    msg = GroupMessage(
        author="jobs",
        role="assistant",
        text="ship it 🚀",
        mentions=["rams", "beck"],
        meta={"causedBy": ["msg_a", "msg_b"], "clientMessageId": "c-9", "nested": {"x": [1, 2.5]}},
    )
    await store.append_message(gid, msg)
    assert await store.read_messages(gid) == [msg]


async def test_append_is_idempotent_on_client_message_id(store: Store) -> None:
    gid = new_id("grp")
    first, created = await store.append_message(gid, user_message("hello", clientMessageId="abc"))
    assert created
    again, created_again = await store.append_message(
        gid, user_message("resent", clientMessageId="abc")
    )
    assert not created_again
    assert again == first
    # The same message id is also stored once, with or without a client id.
    repeat, created_repeat = await store.append_message(gid, first.model_copy())
    assert not created_repeat and repeat == first
    # The key is per group: another group takes the same client id.
    _, created_elsewhere = await store.append_message(
        new_id("grp"), user_message("hello", clientMessageId="abc")
    )
    assert created_elsewhere
    assert [m.text for m in await store.read_messages(gid)] == ["hello"]


async def test_concurrent_appends_of_one_client_message_id_store_it_once(
    store_factory: StoreFactory,
) -> None:
    # Two instances, so the race also crosses connections (and, for the
    # embedded store, the per-instance threads).
    stores = [store_factory(), store_factory()]
    gid = new_id("grp")
    results = await asyncio.gather(
        *(
            stores[i % 2].append_message(gid, user_message(f"try {i}", clientMessageId="same"))
            for i in range(40)
        )
    )
    assert sum(created for _, created in results) == 1
    assert len({m.id for m, _ in results}) == 1
    assert len(await stores[0].read_messages(gid)) == 1


# -- closing -----------------------------------------------------------------
async def test_closed_store_refuses_calls(store: Store) -> None:
    await store.close()
    await store.close()  # closing twice is harmless
    with pytest.raises(StoreError):
        await store.get_group("grp_x")
    with pytest.raises(StoreError):
        await store.append_event("grp_x", notice())
    with pytest.raises(StoreError):
        await store.head("grp_x")


# -- opening a store ---------------------------------------------------------
async def test_open_store_picks_the_backend(tmp_path: Path) -> None:
    for url in (None, "", "embedded"):
        embedded = open_store(url, tmp_path)
        assert isinstance(embedded, EmbeddedStore)
        await embedded.close()
    remote = open_store("redis://127.0.0.1:6379/0", tmp_path, redis_prefix="p")
    assert isinstance(remote, RedisStore) and remote.prefix == "p"
    await remote.close()
    with pytest.raises(StoreError):
        open_store("postgres://db", tmp_path)


async def test_store_config_opens_the_store_and_the_memory_from_one_url(tmp_path: Path) -> None:
    local = StoreConfig("embedded", tmp_path, event_retention=7)
    assert pickle.loads(pickle.dumps(local)) == local
    store, memory = local.open_store(), local.open_memory()
    try:
        assert isinstance(store, EmbeddedStore) and store.event_retention == 7
        assert store.data_dir == tmp_path
        assert isinstance(memory, SQLiteMemory) and memory.path == tmp_path / "memory.sqlite3"
    finally:
        await store.close()
        await memory.close()

    remote = StoreConfig("redis://127.0.0.1:6379/0", tmp_path, redis_prefix="p")
    assert remote.backend == "redis"
    remote_store, remote_memory = remote.open_store(), remote.open_memory()
    assert isinstance(remote_store, RedisStore) and remote_store.prefix == "p"
    assert isinstance(remote_memory, RedisMemory) and remote_memory.prefix == "p:mem:"
    await remote_store.close()
    await remote_memory.close()

    # A bad URL is refused when the config is made, as a StoreError and a ValueError.
    for exc in (StoreError, ValueError):
        with pytest.raises(exc, match="unsupported store URL"):
            StoreConfig("postgres://db", tmp_path)
    with pytest.raises(ValueError):
        StoreConfig(None, tmp_path, event_retention=0)


def test_store_settings_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("YEAFT_DATA_DIR", "YEAFT_REDIS_URL", "YEAFT_REDIS_PREFIX", "YEAFT_EVENT_RETENTION"):
        monkeypatch.delenv(var, raising=False)
    defaults = StoreSettings()
    assert defaults.redis_url is None and defaults.redis_prefix == "yeaft"
    assert defaults.event_retention == 10_000
    assert defaults.data_dir == Path("~/.yeaft").expanduser()


async def test_store_settings_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("YEAFT_REDIS_URL", raising=False)
    monkeypatch.setenv("YEAFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("YEAFT_EVENT_RETENTION", "7")
    assert StoreSettings().store_config() == StoreConfig(None, tmp_path, 7, "yeaft")
    store = StoreSettings().open()
    try:
        assert isinstance(store, EmbeddedStore)
        assert store.data_dir == tmp_path and store.event_retention == 7
    finally:
        await store.close()

    monkeypatch.setenv("YEAFT_REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("YEAFT_REDIS_PREFIX", "elsewhere")
    remote = StoreSettings().open()
    assert isinstance(remote, RedisStore) and remote.prefix == "elsewhere"
    await remote.close()


# -- users -------------------------------------------------------------------
async def test_users_put_get_replace_and_list(store: Store) -> None:
    assert await store.get_user("ann") is None
    assert await store.list_users() == []
    ann = {"username": "ann", "passwordHash": "scrypt$x", "createdAt": 1.5, "tags": ["a", "ü"]}
    await store.put_user(ann)
    await store.put_user({"username": "Bob", "passwordHash": "h"})
    await store.put_user({"username": "bob", "passwordHash": "h2"})
    assert await store.get_user("ann") == ann
    # Usernames are exact keys: the store does not fold case.
    assert await store.get_user("ANN") is None
    assert [u["username"] for u in await store.list_users()] == ["Bob", "ann", "bob"]
    await store.put_user({**ann, "passwordHash": "scrypt$y"})
    replaced = await store.get_user("ann")
    assert replaced is not None and replaced["passwordHash"] == "scrypt$y"
    assert len(await store.list_users()) == 3


async def test_users_refuse_records_without_a_username(store: Store) -> None:
    for bad in ({}, {"username": ""}, {"username": 7}, {"username": "x", "v": {1, 2}}):
        with pytest.raises(StoreError):
            await store.put_user(bad)
    assert await store.list_users() == []


async def test_users_survive_reopening_and_are_shared_by_instances(
    store_factory: StoreFactory,
) -> None:
    first = store_factory()
    await first.put_user({"username": "ann", "passwordHash": "h"})
    await first.close()
    second = store_factory()
    assert await second.get_user("ann") == {"username": "ann", "passwordHash": "h"}


async def test_users_are_not_touched_by_group_deletion(store: Store) -> None:
    group = await store.create_group(sample_group(members=["ann"]))
    await store.put_user({"username": "ann", "passwordHash": "h"})
    assert await store.delete_group(group.id)
    assert await store.get_user("ann") is not None


async def test_creating_a_user_is_atomic_across_instances(store_factory: StoreFactory) -> None:
    # Two processes starting at once on an empty store both try to make the
    # first account: exactly one record is written, and it is not replaced.
    first, second = store_factory(), store_factory()
    made = await asyncio.gather(
        *(
            s.create_user({"username": "admin", "passwordHash": f"h{i}"})
            for i, s in enumerate((first, second) * 4)
        )
    )
    assert made.count(True) == 1
    winner = made.index(True)
    assert await second.get_user("admin") == {"username": "admin", "passwordHash": f"h{winner}"}
    assert [u["username"] for u in await first.list_users()] == ["admin"]


async def test_a_turns_first_read_is_the_group_and_its_newest_messages(store: Store) -> None:
    group = await store.create_group(sample_group())
    for i in range(5):
        await store.append_message(group.id, user_message(f"m{i}"))
    found, newest = await store.group_and_messages(group.id, 3)
    assert found is not None and found.id == group.id and found.roster == group.roster
    assert [m.text for m in newest] == ["m2", "m3", "m4"]
    assert newest == await store.read_messages(group.id, limit=3)
    assert await store.group_and_messages("grp_missing", 3) == (None, [])
