"""The store's event log, on both backends: seqs, headers, blocking reads, retention.

Every test runs against both backends through ``store`` / ``store_factory``
(see ``tests/fixtures/stores.py``), except those for several processes on one
embedded directory, which narrow the fixture's parameter to ``embedded``.
Shared sample frames and readers' helpers live in
``tests/fixtures/store_samples.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from protocol import (
    AgentState,
    AgentStatus,
    AskUserQuestion,
    AssistantData,
    AssistantMessage,
    ResultData,
    ResultUsage,
    TextBlock,
    YeaftOutput,
    dump,
    parse_server_frame,
)
from store import Store, new_id
from store.embedded import EmbeddedStore
from store.events import EventHeader
from store.redis import RedisStore
from tests.fixtures.store_samples import (
    WAKE_TIMEOUT,
    detail_of,
    details_of,
    notice,
    parked,
    sample_group,
    user_message,
)
from tests.fixtures.stores import StoreFactory

ROOT = Path(__file__).resolve().parents[1]


# -- event log ---------------------------------------------------------------
async def test_event_seq_starts_at_one_and_is_spliced_into_the_stored_text(store: Store) -> None:
    gid = new_id("grp")
    # Empty lists and objects must survive the splice as they are.
    frame = notice(note="héllo 🚀", empty=[], obj={}).model_copy(update={"seq": 99})
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
        notice(),
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
        await store.append_event(gid, notice(n=i))
    assert await store.append_event(other, notice()) == 1
    # Trimming the oldest events does not lower the head.
    assert await store.head(gid) == 5
    assert (await store.read_events(gid, 0)).first_seq == 3
    assert await store.head(other) == 1
    await store.delete_group(gid)
    assert await store.head(gid) == 0


async def test_concurrent_event_appends_are_gap_free(store: Store) -> None:
    gid = new_id("grp")
    seqs = await asyncio.gather(*(store.append_event(gid, notice(n=i)) for i in range(200)))
    assert sorted(seqs) == list(range(1, 201))
    batch = await store.read_events(gid, 0, limit=500)
    assert [e.seq for e in batch.events] == list(range(1, 201))
    # Each envelope sits under the seq its own append returned.
    by_n = {detail["n"]: seq for seq, detail in details_of(batch.events)}
    assert [by_n[i] for i in range(200)] == seqs


async def test_read_events_after_a_seq_with_limit(store: Store) -> None:
    gid = new_id("grp")
    for i in range(10):
        await store.append_event(gid, notice(n=i))
    batch = await store.read_events(gid, 4, limit=3)
    assert details_of(batch.events) == [(5, {"n": 4}), (6, {"n": 5}), (7, {"n": 6})]
    assert (batch.gap, batch.first_seq, batch.last_seq) == (False, 1, 10)
    assert (await store.read_events(gid, 10)).events == []
    assert (await store.read_events(gid, 42)).last_seq == 10
    empty = await store.read_events(new_id("grp"), 0)
    assert (empty.events, empty.gap, empty.first_seq, empty.last_seq) == ([], False, 0, 0)


async def test_blocking_read_returns_at_once_when_events_exist(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, notice(n=1))
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [e.seq for e in batch.events] == [1]
    assert time.monotonic() - started < 1.0


async def test_blocking_read_wakes_when_an_event_arrives(store: Store) -> None:
    gid = new_id("grp")
    await store.append_event(gid, notice(n=1))
    reader = asyncio.create_task(store.read_events(gid, 1, wait=WAKE_TIMEOUT))
    await parked(reader)
    started = time.monotonic()
    await store.append_event(gid, notice(n=2))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert time.monotonic() - started < 1.0
    assert details_of(batch.events) == [(2, {"n": 2})]
    assert batch.last_seq == 2


async def test_blocking_read_returns_empty_after_timeout(store: Store) -> None:
    gid = new_id("grp")
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=0.2)
    elapsed = time.monotonic() - started
    assert batch.events == [] and batch.last_seq == 0
    assert 0.18 <= elapsed < 2.0


async def test_an_idle_blocking_read_longer_than_a_socket_timeout_is_quiet_and_empty(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # redis-py's default socket timeout is 5 s: a wait past it used to fail
    # with TimeoutError, and the gateway's tail logged a traceback for it.
    caplog.set_level(logging.WARNING)
    gid = new_id("grp")
    started = time.monotonic()
    batch = await store.read_events(gid, 0, wait=5.5)
    assert time.monotonic() - started >= 5.4
    assert (batch.events, batch.gap, batch.last_seq) == ([], False, 0)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_redis_blocks_stay_within_the_socket_timeout_the_url_sets(
    store_factory: StoreFactory,
) -> None:
    assert isinstance(default := store_factory(), RedisStore)
    assert default.max_block_s == 10.0  # half the blocking connections' 20 s timeout
    store = RedisStore(f"{store_factory.url}?socket_timeout=0.4", prefix=store_factory.prefix)
    try:
        assert store.max_block_s == 0.2
        gid = new_id("grp")
        batch = await store.read_events(gid, 0, wait=1.0)  # five blocks, no timeout
        assert batch.events == []
        # A reader many blocks into its wait still wakes for an event.
        reader = asyncio.create_task(store.read_events(gid, 0, wait=WAKE_TIMEOUT))
        await asyncio.sleep(0.5)
        assert not reader.done()
        await store.append_event(gid, notice(n=1))
        assert [e.seq for e in (await asyncio.wait_for(reader, WAKE_TIMEOUT)).events] == [1]
    finally:
        await store.close()


@pytest.mark.parametrize("store_factory", ["redis"], indirect=True)
async def test_a_redis_blocking_read_from_a_reached_head_blocks_without_a_snapshot(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tail back from delivering a batch asks from the head it reached: it
    # goes straight to XREAD, which still answers at once for an event
    # appended in between.
    store = store_factory()
    assert isinstance(store, RedisStore)
    snapshot = store._snapshot
    snapshots = 0

    async def counted(*args: object) -> object:
        nonlocal snapshots
        snapshots += 1
        return await snapshot(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_snapshot", counted)
    gid = new_id("grp")
    await store.append_event(gid, notice(n=1))
    assert [e.seq for e in (await store.read_events(gid, 0, wait=WAKE_TIMEOUT)).events] == [1]
    assert snapshots == 1
    reader = asyncio.create_task(store.read_events(gid, 1, wait=WAKE_TIMEOUT))
    await parked(reader)
    assert snapshots == 1
    await store.append_event(gid, notice(n=2))
    assert details_of((await asyncio.wait_for(reader, WAKE_TIMEOUT)).events) == [(2, {"n": 2})]
    assert snapshots == 2
    # Appended while nobody waited: XREAD answers at once.
    await store.append_event(gid, notice(n=3))
    batch = await asyncio.wait_for(store.read_events(gid, 2, wait=WAKE_TIMEOUT), WAKE_TIMEOUT)
    assert details_of(batch.events) == [(3, {"n": 3})] and snapshots == 3
    # Not from the reached head: a snapshot first, as before.
    await store.append_event(gid, notice(n=4))
    batch = await store.read_events(gid, 1, wait=WAKE_TIMEOUT)
    assert [e.seq for e in batch.events] == [2, 3, 4] and snapshots == 4
    # A wait that times out from a reached head still answers with the log's state.
    batch = await store.read_events(gid, 4, wait=0.2)
    assert (batch.events, batch.last_seq) == ([], 4)


async def test_cancelled_blocking_read_leaves_the_store_usable(store: Store) -> None:
    gid = new_id("grp")
    reader = asyncio.create_task(store.read_events(gid, 0, wait=WAKE_TIMEOUT))
    await parked(reader)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert await store.append_event(gid, notice(n=1)) == 1
    batch = await store.read_events(gid, 0, wait=WAKE_TIMEOUT)
    assert [e.seq for e in batch.events] == [1]


async def test_retention_trims_and_an_old_reader_gets_a_gap(store_factory: StoreFactory) -> None:
    store = store_factory(event_retention=5)
    gid = new_id("grp")
    for i in range(12):
        await store.append_event(gid, notice(n=i))

    behind = await store.read_events(gid, 0)
    assert behind.gap is True
    assert (behind.first_seq, behind.last_seq) == (8, 12)
    assert details_of(behind.events) == [(seq, {"n": seq - 1}) for seq in range(8, 13)]
    # Wanting seq 7, which is gone, is a gap too; wanting 8 is not.
    assert (await store.read_events(gid, 6)).gap is True
    caught_up = await store.read_events(gid, 7)
    assert caught_up.gap is False
    assert [e.seq for e in caught_up.events] == [8, 9, 10, 11, 12]
    assert (await store.read_events(gid, 12)).gap is False


async def test_groups_never_see_each_others_events_or_messages(store: Store) -> None:
    a, b = new_id("grp"), new_id("grp")
    assert await store.append_event(a, notice(g="a")) == 1
    assert await store.append_event(b, notice(g="b")) == 1
    assert await store.append_event(a, notice(g="a")) == 2
    await store.append_message(a, user_message("for a"))
    await store.append_message(b, user_message("for b"))

    assert {detail_of(e)["g"] for e in (await store.read_events(a, 0)).events} == {"a"}
    assert [detail_of(e)["g"] for e in (await store.read_events(b, 0)).events] == ["b"]
    assert [m.text for m in await store.read_messages(a)] == ["for a"]
    assert [m.text for m in await store.read_messages(b)] == ["for b"]

    # A reader parked on one group is not woken by the other's events.
    reader = asyncio.create_task(store.read_events(a, 2, wait=0.3))
    await parked(reader)
    await store.append_event(b, notice(g="b"))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert batch.events == [] and batch.last_seq == 2


async def test_many_parked_readers_each_wake_for_their_own_group(store: Store) -> None:
    # More readers than redis-py's default pool size, on as many groups.
    groups = [new_id("grp") for _ in range(150)]
    readers = [asyncio.create_task(store.read_events(g, 0, wait=WAKE_TIMEOUT)) for g in groups]
    await asyncio.sleep(0.2)  # let them all park; correctness does not depend on it
    assert not any(r.done() for r in readers)
    await asyncio.gather(*(store.append_event(g, notice(g=g)) for g in groups))
    batches = await asyncio.wait_for(asyncio.gather(*readers), WAKE_TIMEOUT)
    assert [details_of(b.events) for b in batches] == [[(1, {"g": g})] for g in groups]


async def test_a_second_instance_sees_the_data_and_wakes_on_events(
    store_factory: StoreFactory,
) -> None:
    writer, watcher = store_factory(), store_factory()
    group = await writer.create_group(sample_group())
    await writer.append_message(group.id, user_message("hi"))
    assert await watcher.get_group(group.id) == group
    assert [m.text for m in await watcher.read_messages(group.id)] == ["hi"]

    reader = asyncio.create_task(watcher.read_events(group.id, 0, wait=WAKE_TIMEOUT))
    await parked(reader)
    await writer.append_event(group.id, notice(n=1))
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    assert details_of(batch.events) == [(1, {"n": 1})]


# -- several processes on one embedded directory ------------------------------
_APPENDER = """
import asyncio, json, sys, time
from pathlib import Path
from protocol import SystemData, YeaftOutput
from store.embedded import EmbeddedStore
from store.redis import RedisStore

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
    # The wait covers the child's start-up too, which a loaded machine can make
    # longer than WAKE_TIMEOUT; the wake-up delay is checked below, on its own.
    reader = asyncio.create_task(store.read_events(gid, 0, wait=120))
    await parked(reader)
    child = await _run_appender(store_factory.data_dir, gid, 1, "child")
    batch = await asyncio.wait_for(reader, WAKE_TIMEOUT)
    woke_at = time.time()
    assert details_of(batch.events) == [(1, {"from": "child", "n": 0})]
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
            *(store.append_event(gid, notice(**{"from": "parent", "n": i})) for i in range(150))
        ),
    )
    child_seqs = [s for r in results[:2] for s in r["seqs"]]  # type: ignore[attr-defined]
    all_seqs = sorted(child_seqs + list(results[2]))
    assert all_seqs == list(range(1, 451))
    batch = await store.read_events(gid, 0, limit=1000)
    assert [e.seq for e in batch.events] == list(range(1, 451))
    details = [detail for _, detail in details_of(batch.events)]
    for tag in ("p1", "p2", "parent"):
        mine = [d["n"] for d in details if d["from"] == tag]
        assert mine == list(range(150)), f"{tag}'s events are out of order"


async def test_frames_appended_together_take_consecutive_seqs(store: Store) -> None:
    gid = new_id("grp")
    assert await store.append_event(gid, AgentStatus(state=AgentState.THINKING)) == 1
    together = [AgentStatus(state=AgentState.STREAMING), notice(note="after the status")]
    assert await store.append_events(gid, together) == [2, 3]
    assert await store.append_events(gid, []) == []
    batch = await store.read_events(gid, 0)
    assert [e.seq for e in batch.events] == [1, 2, 3]
    assert json.loads(batch.events[1].text)["state"] == "streaming"
    assert json.loads(batch.events[2].text)["data"]["detail"] == {"note": "after the status"}
    assert await store.head(gid) == 3
