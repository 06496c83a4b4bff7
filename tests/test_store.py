"""The store contract, run against both backends through ``store_factory``.

Tests for one backend only (several processes on one embedded directory) say
so by narrowing the fixture's parameter.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from engine.messages import Conversation, Message, Thinking, ToolCall
from store import (
    Group,
    GroupMessage,
    GroupSettings,
    NotFound,
    Store,
    StoreError,
    StoreSettings,
    new_id,
    open_store,
)
from store.embedded import EmbeddedStore
from store.redis import RedisStore
from tests.fixtures.stores import StoreFactory

ROOT = Path(__file__).resolve().parents[1]
# Generous: a blocking read must finish long before this, or the test fails.
WAKE_TIMEOUT = 10.0


def _group(**kw: object) -> Group:
    fields: dict[str, object] = {"id": new_id("grp"), "name": "team", "roster": ["jobs", "rams"]}
    fields.update(kw)
    return Group.model_validate(fields)


def _msg(text: str, **meta: object) -> GroupMessage:
    return GroupMessage(author="alice", role="user", text=text, meta=dict(meta))


async def _parked(task: asyncio.Task[object]) -> None:
    """Give a reader task time to reach its blocking wait, and check it is there."""
    await asyncio.sleep(0.05)
    assert not task.done(), "the reader returned before anything was appended"


# -- groups ------------------------------------------------------------------
async def test_group_create_get_and_create_twice_fails(store: Store) -> None:
    group = _group(members=["alice"], default_vp="jobs", settings=GroupSettings(fanout_cap=3))
    assert await store.create_group(group) == group
    assert await store.get_group(group.id) == group
    assert await store.get_group("grp_missing") is None
    with pytest.raises(StoreError):
        await store.create_group(group.model_copy(update={"name": "again"}))
    loaded = await store.get_group(group.id)
    assert loaded is not None and loaded.name == "team"


async def test_save_group_overwrites_and_missing_raises_not_found(store: Store) -> None:
    group = await store.create_group(_group())
    renamed = group.model_copy(update={"name": "renamed", "roster": ["beck"]})
    await store.save_group(renamed)
    assert await store.get_group(group.id) == renamed
    with pytest.raises(NotFound):
        await store.save_group(_group())


async def test_list_groups_filters_by_member(store: Store) -> None:
    a = await store.create_group(_group(name="a", members=["alice", "bob"], created_at=1.0))
    b = await store.create_group(_group(name="b", members=["bob"], created_at=2.0))
    c = await store.create_group(_group(name="c", members=[], created_at=3.0))
    assert [g.id for g in await store.list_groups()] == [a.id, b.id, c.id]
    assert [g.id for g in await store.list_groups(member="bob")] == [a.id, b.id]
    assert [g.id for g in await store.list_groups(member="alice")] == [a.id]
    assert await store.list_groups(member="nobody") == []


async def test_delete_group_removes_log_events_and_transcripts(store: Store) -> None:
    group = await store.create_group(_group())
    other = await store.create_group(_group())
    for gid in (group.id, other.id):
        await store.append_message(gid, _msg("hi", clientMessageId="c1"))
        await store.append_event(gid, {"type": "yeaft_output"})
        await store.save_transcript(gid, "jobs", {"id": "c", "summary": "s"})

    assert await store.delete_group(group.id) is True
    assert await store.get_group(group.id) is None
    assert await store.read_messages(group.id) == []
    assert await store.load_transcript(group.id, "jobs") is None
    batch = await store.read_events(group.id, 0)
    assert (batch.events, batch.first_seq, batch.last_seq) == ([], 0, 0)
    assert [g.id for g in await store.list_groups()] == [other.id]
    assert await store.delete_group(group.id) is False

    # The idempotency record went with the log: the same client id is new again.
    _, created = await store.append_message(group.id, _msg("hi", clientMessageId="c1"))
    assert created
    # The other group kept everything.
    assert len(await store.read_messages(other.id)) == 1
    assert await store.load_transcript(other.id, "jobs") is not None
    assert (await store.read_events(other.id, 0)).last_seq == 1


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
    group = await store.create_group(_group(members=["alice"]))
    document = json.loads(group.model_dump_json())
    # ``model`` was a setting once; a group saved then carries it, and keys of
    # settings not yet known may come from a newer version.
    document["settings"].update({"model": None, "fanout_cap": 5, "future_knob": [1]})
    await _store_raw_group(store, group.id, json.dumps(document))
    loaded = await store.get_group(group.id)
    assert loaded is not None and loaded.settings == GroupSettings(fanout_cap=5)
    (listed,) = await store.list_groups(member="alice")
    assert listed == loaded


# -- group log ---------------------------------------------------------------
async def test_messages_append_get_and_page(store: Store) -> None:
    gid = new_id("grp")
    sent = []
    for i in range(25):
        stored, created = await store.append_message(gid, _msg(f"m{i}"))
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
    first, created = await store.append_message(gid, _msg("hello", clientMessageId="abc"))
    assert created
    again, created_again = await store.append_message(gid, _msg("resent", clientMessageId="abc"))
    assert not created_again
    assert again == first
    # The same message id is also stored once, with or without a client id.
    repeat, created_repeat = await store.append_message(gid, first.model_copy())
    assert not created_repeat and repeat == first
    # The key is per group: another group takes the same client id.
    _, created_elsewhere = await store.append_message(
        new_id("grp"), _msg("hello", clientMessageId="abc")
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
            stores[i % 2].append_message(gid, _msg(f"try {i}", clientMessageId="same"))
            for i in range(40)
        )
    )
    assert sum(created for _, created in results) == 1
    assert len({m.id for m, _ in results}) == 1
    assert len(await stores[0].read_messages(gid)) == 1


# -- transcripts -------------------------------------------------------------
async def test_transcripts_round_trip(store: Store) -> None:
    gid = new_id("grp")
    conv = Conversation(
        id=f"{gid}:jobs",
        summary="Earlier: the team agreed to ship on Friday.",
        compactions=2,
        messages=[
            Message.user("what now?", speaker="alice"),
            Message.assistant(
                "let me check",
                speaker="jobs",
                thinking=[Thinking(text="hmm", signature="sig")],
                tool_calls=[ToolCall(id="t1", name="search", arguments={"q": "x", "n": [1]})],
            ),
            Message.tool_result("t1", "found nothing", name="search", is_error=True),
            Message.assistant("nothing yet", meta={"usage": {"input_tokens": 3}}),
        ],
    )
    # The store keeps transcripts as opaque JSON documents; the engine's
    # model round-trips through them exactly.
    assert await store.load_transcript(gid, "jobs") is None
    await store.save_transcript(gid, "jobs", conv.model_dump(mode="json"))
    loaded = await store.load_transcript(gid, "jobs")
    assert loaded is not None and Conversation.model_validate(loaded) == conv
    assert await store.load_transcript(gid, "rams") is None

    shorter = Conversation(id=conv.id, summary="newer summary", compactions=3)
    await store.save_transcript(gid, "jobs", shorter.model_dump(mode="json"))
    assert await store.load_transcript(gid, "jobs") == shorter.model_dump(mode="json")


# -- event log ---------------------------------------------------------------
async def test_event_seq_starts_at_one_and_is_stored_in_the_envelope(store: Store) -> None:
    gid = new_id("grp")
    envelope = {"type": "yeaft_output", "seq": 99, "data": {"content": [], "x": {}}}
    assert await store.append_event(gid, envelope) == 1
    assert await store.append_event(gid, {}) == 2
    assert envelope["seq"] == 99, "the caller's dict is not modified"

    batch = await store.read_events(gid, 0)
    assert batch.events == [
        (1, {"type": "yeaft_output", "seq": 1, "data": {"content": [], "x": {}}}),
        (2, {"seq": 2}),
    ]
    assert (batch.gap, batch.first_seq, batch.last_seq) == (False, 1, 2)


async def test_concurrent_event_appends_are_gap_free(store: Store) -> None:
    gid = new_id("grp")
    seqs = await asyncio.gather(*(store.append_event(gid, {"n": i}) for i in range(200)))
    assert sorted(seqs) == list(range(1, 201))
    batch = await store.read_events(gid, 0, limit=500)
    assert [seq for seq, _ in batch.events] == list(range(1, 201))
    # Each envelope sits under the seq its own append returned.
    by_n = {env["n"]: seq for seq, env in batch.events}
    assert [by_n[i] for i in range(200)] == seqs


async def test_read_events_after_a_seq_with_limit(store: Store) -> None:
    gid = new_id("grp")
    for i in range(10):
        await store.append_event(gid, {"n": i})
    batch = await store.read_events(gid, 4, limit=3)
    assert [seq for seq, _ in batch.events] == [5, 6, 7]
    assert [env["n"] for _, env in batch.events] == [4, 5, 6]
    assert (batch.gap, batch.first_seq, batch.last_seq) == (False, 1, 10)
    assert (await store.read_events(gid, 10)).events == []
    assert (await store.read_events(gid, 42)).last_seq == 10
    empty = await store.read_events(new_id("grp"), 0)
    assert (empty.events, empty.gap, empty.first_seq, empty.last_seq) == ([], False, 0, 0)


async def test_blocking_read_returns_at_once_when_events_exist(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, {"n": 1})
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [seq for seq, _ in batch.events] == [1]
    assert time.monotonic() - started < 1.0


async def test_blocking_read_wakes_when_an_event_arrives(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, {"n": 1})
    reader = asyncio.create_task(store.read_events(gid, 1, wait=WAKE_TIMEOUT))
    await _parked(reader)
    started = time.monotonic()
    await store.append_event(gid, {"n": 2})
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert time.monotonic() - started < 1.0
    assert batch.events == [(2, {"n": 2, "seq": 2})]
    assert batch.last_seq == 2


async def test_blocking_read_returns_empty_after_timeout(store: Store) -> None:
    gid = new_id("grp")
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=0.2)
    elapsed = time.monotonic() - started
    assert batch.events == [] and batch.last_seq == 0
    assert 0.18 <= elapsed < 2.0


async def test_cancelled_blocking_read_leaves_the_store_usable(store: Store) -> None:
    gid = new_id("grp")
    reader = asyncio.create_task(store.read_events(gid, 0, wait=WAKE_TIMEOUT))
    await _parked(reader)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert await store.append_event(gid, {"n": 1}) == 1
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [seq for seq, _ in batch.events] == [1]


async def test_retention_trims_and_an_old_reader_gets_a_gap(store_factory: StoreFactory) -> None:
    store = store_factory(event_retention=5)
    gid = new_id("grp")
    for i in range(12):
        await store.append_event(gid, {"n": i})

    behind = await store.read_events(gid, 0)
    assert behind.gap is True
    assert (behind.first_seq, behind.last_seq) == (8, 12)
    assert [seq for seq, _ in behind.events] == [8, 9, 10, 11, 12]
    # Wanting seq 7, which is gone, is a gap too; wanting 8 is not.
    assert (await store.read_events(gid, 6)).gap is True
    caught_up = await store.read_events(gid, 7)
    assert caught_up.gap is False
    assert [seq for seq, _ in caught_up.events] == [8, 9, 10, 11, 12]
    assert (await store.read_events(gid, 12)).gap is False


async def test_groups_never_see_each_others_events_or_messages(store: Store) -> None:
    a, b = new_id("grp"), new_id("grp")
    assert await store.append_event(a, {"g": "a"}) == 1
    assert await store.append_event(b, {"g": "b"}) == 1
    assert await store.append_event(a, {"g": "a"}) == 2
    await store.append_message(a, _msg("for a"))
    await store.append_message(b, _msg("for b"))

    assert {env["g"] for _, env in (await store.read_events(a, 0)).events} == {"a"}
    assert [env["g"] for _, env in (await store.read_events(b, 0)).events] == ["b"]
    assert [m.text for m in await store.read_messages(a)] == ["for a"]
    assert [m.text for m in await store.read_messages(b)] == ["for b"]

    # A reader parked on one group is not woken by the other's events.
    reader = asyncio.create_task(store.read_events(a, 2, wait=0.3))
    await _parked(reader)
    await store.append_event(b, {"g": "b"})
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert batch.events == [] and batch.last_seq == 2


async def test_many_parked_readers_each_wake_for_their_own_group(store: Store) -> None:
    # More readers than redis-py's default pool size, on as many groups.
    groups = [new_id("grp") for _ in range(150)]
    readers = [asyncio.create_task(store.read_events(g, 0, wait=WAKE_TIMEOUT)) for g in groups]
    await asyncio.sleep(0.2)  # let them all park; correctness does not depend on it
    assert not any(r.done() for r in readers)
    await asyncio.gather(*(store.append_event(g, {"g": g}) for g in groups))
    batches = await asyncio.wait_for(asyncio.gather(*readers), WAKE_TIMEOUT)
    assert [b.events for b in batches] == [[(1, {"g": g, "seq": 1})] for g in groups]


async def test_a_second_instance_sees_the_data_and_wakes_on_events(
    store_factory: StoreFactory,
) -> None:
    writer, watcher = store_factory(), store_factory()
    group = await writer.create_group(_group())
    await writer.append_message(group.id, _msg("hi"))
    assert await watcher.get_group(group.id) == group
    assert [m.text for m in await watcher.read_messages(group.id)] == ["hi"]

    reader = asyncio.create_task(watcher.read_events(group.id, 0, wait=WAKE_TIMEOUT))
    await _parked(reader)
    await writer.append_event(group.id, {"n": 1})
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert batch.events == [(1, {"n": 1, "seq": 1})]


async def test_closed_store_refuses_calls(store: Store) -> None:
    await store.close()
    await store.close()  # closing twice is harmless
    with pytest.raises(StoreError):
        await store.get_group("grp_x")
    with pytest.raises(StoreError):
        await store.append_event("grp_x", {})


# -- several processes on one embedded directory ------------------------------
_APPENDER = """
import asyncio, json, sys, time
from pathlib import Path
from store.embedded import EmbeddedStore

async def main(data_dir, group, count, tag):
    store = EmbeddedStore(Path(data_dir))
    seqs = [await store.append_event(group, {"from": tag, "n": i}) for i in range(count)]
    print(json.dumps({"seqs": seqs, "done_at": time.time()}), flush=True)
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""


async def _run_appender(data_dir: Path, group_id: str, count: int, tag: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _APPENDER,
        str(data_dir),
        group_id,
        str(count),
        tag,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_an_event_from_another_process_wakes_a_blocking_reader(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    gid = new_id("grp")
    assert isinstance(store, EmbeddedStore)
    # Touch the database first so the child finds the schema in place.
    assert (await store.read_events(gid, 0)).last_seq == 0
    reader = asyncio.create_task(store.read_events(gid, 0, wait=WAKE_TIMEOUT))
    await _parked(reader)
    child = await _run_appender(store_factory.data_dir, gid, 1, "child")
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    woke_at = time.time()
    assert batch.events == [(1, {"from": "child", "n": 0, "seq": 1})]
    # The child reports after its commit, so this bounds the poller's delay
    # from above (plus the child's shutdown); it must be far below the wait.
    assert woke_at - float(str(child["done_at"])) < 1.0


@pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)
async def test_concurrent_appends_from_several_processes_are_gap_free(
    store_factory: StoreFactory,
) -> None:
    store = store_factory()
    gid = new_id("grp")
    await store.read_events(gid, 0)
    results = await asyncio.gather(
        _run_appender(store_factory.data_dir, gid, 150, "p1"),
        _run_appender(store_factory.data_dir, gid, 150, "p2"),
        asyncio.gather(*(store.append_event(gid, {"from": "parent", "n": i}) for i in range(150))),
    )
    child_seqs = [s for r in results[:2] for s in r["seqs"]]  # type: ignore[attr-defined]
    all_seqs = sorted(child_seqs + list(results[2]))
    assert all_seqs == list(range(1, 451))
    batch = await store.read_events(gid, 0, limit=1000)
    assert [seq for seq, _ in batch.events] == list(range(1, 451))
    for tag in ("p1", "p2", "parent"):
        mine = [env["n"] for _, env in batch.events if env["from"] == tag]
        assert mine == list(range(150)), f"{tag}'s events are out of order"


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
    group = await store.create_group(_group(members=["ann"]))
    await store.put_user({"username": "ann", "passwordHash": "h"})
    assert await store.delete_group(group.id)
    assert await store.get_user("ann") is not None
