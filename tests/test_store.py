"""The store contract, run against both backends through ``store_factory``.

Tests for one backend only (several processes on one embedded directory) say
so by narrowing the fixture's parameter.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from engine.messages import Conversation, Message, Thinking, ToolCall
from protocol import (
    AgentState,
    AgentStatus,
    AskUserQuestion,
    AssistantData,
    AssistantMessage,
    ResultData,
    ResultUsage,
    SystemData,
    TextBlock,
    YeaftOutput,
    dump,
    parse_server_frame,
)
from store import (
    Group,
    GroupMessage,
    GroupSettings,
    NotFound,
    Store,
    StoreConfig,
    StoredEvent,
    StoreError,
    StoreSettings,
    new_id,
    open_store,
)
from store.embedded import DB_FILENAME, EmbeddedStore
from store.events import EventHeader
from store.memory import RedisMemory, SQLiteMemory
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


def _out(vp_id: str = "steve", **detail: object) -> YeaftOutput:
    """A notice frame; ``detail`` tells events apart in a test."""
    return YeaftOutput(
        conversation_id="c",
        group_id="g",
        vp_id=vp_id,
        turn_id="t",
        data=SystemData(subtype="notice", detail=dict(detail)),
    )


def _detail(event: StoredEvent) -> dict[str, Any]:
    detail: dict[str, Any] = event.envelope()["data"]["detail"]
    return detail


def _details(events: list[StoredEvent]) -> list[tuple[int, dict[str, Any]]]:
    """(seq, detail) per event, checking the stored text carries the same seq."""
    assert all(e.envelope()["seq"] == e.seq for e in events)
    return [(e.seq, _detail(e)) for e in events]


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
        await store.append_event(gid, _out())
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
async def test_event_seq_starts_at_one_and_is_spliced_into_the_stored_text(store: Store) -> None:
    gid = new_id("grp")
    # Empty lists and objects must survive the splice as they are.
    frame = _out(note="héllo 🚀", empty=[], obj={}).model_copy(update={"seq": 99})
    assert await store.append_event(gid, frame) == 1
    assert await store.append_event(gid, AgentStatus(state=AgentState.IDLE)) == 2
    assert frame.seq == 99, "the caller's frame is not modified"

    batch = await store.read_events(gid, 0)
    first, second = batch.events
    assert first.seq == 1 and first.text.startswith('{"seq":1,"type":"yeaft_output",')
    assert json.loads(first.text) == {**dump(frame), "seq": 1}
    assert "🚀" in first.text, "text is stored as UTF-8, not escaped"
    assert parse_server_frame(first.text) == frame.model_copy(update={"seq": 1})
    assert first.frame() == frame.model_copy(update={"seq": 1})
    assert second.text == '{"seq":2,"type":"agent_status","state":"idle"}'
    assert second.frame() == AgentStatus(state=AgentState.IDLE, seq=2)
    assert (batch.gap, batch.first_seq, batch.last_seq) == (False, 1, 2)


async def test_stored_events_carry_the_header_a_filter_reads(store: Store) -> None:
    gid = new_id("grp")
    result = ResultData(
        subtype="success",
        session_id=gid,
        is_error=False,
        duration_ms=5,
        total_cost_usd=0.0,
        usage=ResultUsage(),
    )
    text = AssistantData(message=AssistantMessage(content=[TextBlock(text="hi")]))
    frames = [
        _out(),
        YeaftOutput(conversation_id=gid, group_id=gid, vp_id="linus", turn_id="t", data=result),
        YeaftOutput(conversation_id=gid, group_id=gid, vp_id="Linus", turn_id="t", data=text),
        AgentStatus(group_id=gid, vp_id="linus", state=AgentState.STREAMING, turn_id="t"),
        AgentStatus(state=AgentState.ERROR),
        AskUserQuestion(request_id="r1", prompt="which?", choices=["a"], vp_id="steve"),
        AskUserQuestion(request_id="r2", prompt="anyone?"),
    ]
    for frame in frames:
        await store.append_event(gid, frame)
    events = (await store.read_events(gid, 0)).events
    assert [(e.type, e.vp_id, e.data_type) for e in events] == [
        ("yeaft_output", "steve", "system"),
        ("yeaft_output", "linus", "result"),
        ("yeaft_output", "Linus", "assistant"),
        ("agent_status", "linus", None),
        ("agent_status", None, None),
        ("ask_user_question", "steve", None),
        ("ask_user_question", None, None),
    ]
    for event, frame in zip(events, frames, strict=True):
        # The header says what the text says, and the text is the frame.
        assert EventHeader.of_envelope(event.envelope()) == EventHeader(
            event.type, event.vp_id, event.data_type
        )
        assert event.frame() == frame.model_copy(update={"seq": event.seq})


async def test_head_is_the_newest_seq_assigned(store_factory: StoreFactory) -> None:
    store = store_factory(event_retention=3)
    gid, other = new_id("grp"), new_id("grp")
    assert await store.head(gid) == 0
    for i in range(5):
        await store.append_event(gid, _out(n=i))
    assert await store.append_event(other, _out()) == 1
    # Trimming the oldest events does not lower the head.
    assert await store.head(gid) == 5
    assert (await store.read_events(gid, 0)).first_seq == 3
    assert await store.head(other) == 1
    await store.delete_group(gid)
    assert await store.head(gid) == 0


async def test_concurrent_event_appends_are_gap_free(store: Store) -> None:
    gid = new_id("grp")
    seqs = await asyncio.gather(*(store.append_event(gid, _out(n=i)) for i in range(200)))
    assert sorted(seqs) == list(range(1, 201))
    batch = await store.read_events(gid, 0, limit=500)
    assert [e.seq for e in batch.events] == list(range(1, 201))
    # Each envelope sits under the seq its own append returned.
    by_n = {detail["n"]: seq for seq, detail in _details(batch.events)}
    assert [by_n[i] for i in range(200)] == seqs


async def test_read_events_after_a_seq_with_limit(store: Store) -> None:
    gid = new_id("grp")
    for i in range(10):
        await store.append_event(gid, _out(n=i))
    batch = await store.read_events(gid, 4, limit=3)
    assert _details(batch.events) == [(5, {"n": 4}), (6, {"n": 5}), (7, {"n": 6})]
    assert (batch.gap, batch.first_seq, batch.last_seq) == (False, 1, 10)
    assert (await store.read_events(gid, 10)).events == []
    assert (await store.read_events(gid, 42)).last_seq == 10
    empty = await store.read_events(new_id("grp"), 0)
    assert (empty.events, empty.gap, empty.first_seq, empty.last_seq) == ([], False, 0, 0)


async def test_blocking_read_returns_at_once_when_events_exist(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, _out(n=1))
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [e.seq for e in batch.events] == [1]
    assert time.monotonic() - started < 1.0


async def test_blocking_read_wakes_when_an_event_arrives(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, _out(n=1))
    reader = asyncio.create_task(store.read_events(gid, 1, wait=WAKE_TIMEOUT))
    await _parked(reader)
    started = time.monotonic()
    await store.append_event(gid, _out(n=2))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert time.monotonic() - started < 1.0
    assert _details(batch.events) == [(2, {"n": 2})]
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
    assert await store.append_event(gid, _out(n=1)) == 1
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [e.seq for e in batch.events] == [1]


async def test_retention_trims_and_an_old_reader_gets_a_gap(store_factory: StoreFactory) -> None:
    store = store_factory(event_retention=5)
    gid = new_id("grp")
    for i in range(12):
        await store.append_event(gid, _out(n=i))

    behind = await store.read_events(gid, 0)
    assert behind.gap is True
    assert (behind.first_seq, behind.last_seq) == (8, 12)
    assert _details(behind.events) == [(seq, {"n": seq - 1}) for seq in range(8, 13)]
    # Wanting seq 7, which is gone, is a gap too; wanting 8 is not.
    assert (await store.read_events(gid, 6)).gap is True
    caught_up = await store.read_events(gid, 7)
    assert caught_up.gap is False
    assert [e.seq for e in caught_up.events] == [8, 9, 10, 11, 12]
    assert (await store.read_events(gid, 12)).gap is False


async def test_groups_never_see_each_others_events_or_messages(store: Store) -> None:
    a, b = new_id("grp"), new_id("grp")
    assert await store.append_event(a, _out(g="a")) == 1
    assert await store.append_event(b, _out(g="b")) == 1
    assert await store.append_event(a, _out(g="a")) == 2
    await store.append_message(a, _msg("for a"))
    await store.append_message(b, _msg("for b"))

    assert {_detail(e)["g"] for e in (await store.read_events(a, 0)).events} == {"a"}
    assert [_detail(e)["g"] for e in (await store.read_events(b, 0)).events] == ["b"]
    assert [m.text for m in await store.read_messages(a)] == ["for a"]
    assert [m.text for m in await store.read_messages(b)] == ["for b"]

    # A reader parked on one group is not woken by the other's events.
    reader = asyncio.create_task(store.read_events(a, 2, wait=0.3))
    await _parked(reader)
    await store.append_event(b, _out(g="b"))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert batch.events == [] and batch.last_seq == 2


async def test_many_parked_readers_each_wake_for_their_own_group(store: Store) -> None:
    # More readers than redis-py's default pool size, on as many groups.
    groups = [new_id("grp") for _ in range(150)]
    readers = [asyncio.create_task(store.read_events(g, 0, wait=WAKE_TIMEOUT)) for g in groups]
    await asyncio.sleep(0.2)  # let them all park; correctness does not depend on it
    assert not any(r.done() for r in readers)
    await asyncio.gather(*(store.append_event(g, _out(g=g)) for g in groups))
    batches = await asyncio.wait_for(asyncio.gather(*readers), WAKE_TIMEOUT)
    assert [_details(b.events) for b in batches] == [[(1, {"g": g})] for g in groups]


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
    await writer.append_event(group.id, _out(n=1))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert _details(batch.events) == [(1, {"n": 1})]


async def test_closed_store_refuses_calls(store: Store) -> None:
    await store.close()
    await store.close()  # closing twice is harmless
    with pytest.raises(StoreError):
        await store.get_group("grp_x")
    with pytest.raises(StoreError):
        await store.append_event("grp_x", _out())
    with pytest.raises(StoreError):
        await store.head("grp_x")


# -- several processes on one embedded directory ------------------------------
_APPENDER = """
import asyncio, json, sys, time
from pathlib import Path
from protocol import SystemData, YeaftOutput
from store.embedded import EmbeddedStore

def frame(group, tag, i):
    detail = {"from": tag, "n": i}
    data = SystemData(subtype="notice", detail=detail)
    return YeaftOutput(conversation_id=group, group_id=group, vp_id=tag, turn_id="t", data=data)

async def main(data_dir, group, count, tag):
    store = EmbeddedStore(Path(data_dir))
    seqs = [await store.append_event(group, frame(group, tag, i)) for i in range(count)]
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
    assert _details(batch.events) == [(1, {"from": "child", "n": 0})]
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
        asyncio.gather(
            *(store.append_event(gid, _out(**{"from": "parent", "n": i})) for i in range(150))
        ),
    )
    child_seqs = [s for r in results[:2] for s in r["seqs"]]  # type: ignore[attr-defined]
    all_seqs = sorted(child_seqs + list(results[2]))
    assert all_seqs == list(range(1, 451))
    batch = await store.read_events(gid, 0, limit=1000)
    assert [e.seq for e in batch.events] == list(range(1, 451))
    details = [detail for _, detail in _details(batch.events)]
    for tag in ("p1", "p2", "parent"):
        mine = [d["n"] for d in details if d["from"] == tag]
        assert mine == list(range(150)), f"{tag}'s events are out of order"


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
        assert await store.append_event("grp_old", _out(n=4)) == 4
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

    assert await store.append_event(gid, _out(n=4)) == 4
    events = (await store.read_events(gid, 0)).events
    assert [e.text for e in events[:3]] == texts
    assert [(e.type, e.vp_id, e.data_type) for e in events] == [
        *_OLD_HEADERS,
        ("yeaft_output", "steve", "system"),
    ]


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
    group = await store.create_group(_group(members=["ann"]))
    await store.put_user({"username": "ann", "passwordHash": "h"})
    assert await store.delete_group(group.id)
    assert await store.get_user("ann") is not None
