"""Push wake-ups of the embedded store: a commit in another process wakes a reader.

The reader's safety-net interval is set far beyond the test's bounds, so only
the writer's datagram (``store.notify``) can wake it in time; with the
datagram suppressed, the safety net alone still delivers every envelope.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from protocol import SystemData, YeaftOutput
from store import new_id
from store.embedded import EmbeddedStore
from store.notify import notify_dir
from tests.fixtures.store_samples import details_of, parked

ROOT = Path(__file__).resolve().parents[1]

_WRITER = r"""
import asyncio, json, sys, time
from pathlib import Path
from protocol import SystemData, YeaftOutput
from store.embedded import EmbeddedStore
from store.notify import Notifier

if sys.argv[4] == "mute":
    Notifier.send = lambda self, group_id: None

async def main(data_dir, group, count):
    store = EmbeddedStore(Path(data_dir))
    for i in range(count):
        data = SystemData(subtype="notice", detail={"from": "child", "n": i})
        frame = YeaftOutput(
            conversation_id=group, group_id=group, vp_id="c", turn_id="t", data=data
        )
        await store.append_event(group, frame)
    print(json.dumps({"done_at": time.time()}), flush=True)
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def _write_from_child(data_dir: Path, group_id: str, count: int, mode: str) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WRITER,
        str(data_dir),
        group_id,
        str(count),
        mode,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return float(json.loads(out.decode().strip().splitlines()[-1])["done_at"])


async def _read_all(store: EmbeddedStore, gid: str, count: int, wait: float) -> list[int]:
    """Blocking reads until ``count`` envelopes came; their ``n`` values in order."""
    seen: list[int] = []
    after = 0
    while len(seen) < count:
        batch = await store.read_events(gid, after, wait=wait)
        seen += [d["n"] for _, d in details_of(batch.events)]
        after = batch.last_seq
    return seen


async def test_a_commit_in_another_process_wakes_the_reader_without_polling(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path, poll_interval=3600)
    gid = new_id("grp")
    try:
        assert (await store.read_events(gid, 0)).last_seq == 0
        reader = asyncio.create_task(store.read_events(gid, 0, wait=3600))
        await parked(reader)
        assert any(notify_dir(store.path).iterdir()), "the waiting process has a socket"
        done_at = await _write_from_child(tmp_path, gid, 1, "send")
        batch = await asyncio.wait_for(reader, 30)
        assert details_of(batch.events) == [(1, {"from": "child", "n": 0})]
        # Far below the hour the reader would otherwise wait.
        assert time.time() - done_at < 5
        # Many commits in a row: every one arrives, in order, with no poll.
        seen = await asyncio.wait_for(
            asyncio.gather(
                _read_all(store, gid, 41, 3600), _write_from_child(tmp_path, gid, 40, "send")
            ),
            60,
        )
        assert seen[0] == [0, *range(40)]
    finally:
        await store.close()
    assert not any(notify_dir(store.path).iterdir()), "close() removes the socket"


async def test_a_lost_wake_up_costs_latency_not_an_envelope(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path, poll_interval=0.2)
    gid = new_id("grp")
    try:
        await store.read_events(gid, 0)
        seen, _ = await asyncio.wait_for(
            asyncio.gather(
                _read_all(store, gid, 5, 3600), _write_from_child(tmp_path, gid, 5, "mute")
            ),
            60,
        )
        assert seen == list(range(5))
    finally:
        await store.close()


async def test_a_socket_left_by_a_dead_process_is_removed_by_the_next_writer(
    tmp_path: Path,
) -> None:
    store = EmbeddedStore(tmp_path)
    gid = new_id("grp")
    directory = notify_dir(store.path)
    directory.mkdir(parents=True)
    stale = directory / "999999999-dead-0.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(stale))  # bound, then closed: nobody receives there
    try:
        await _write_from_child(tmp_path, gid, 1, "send")
        assert not stale.exists()
        assert (await store.read_events(gid, 0)).last_seq == 1
    finally:
        await store.close()


class _Reads:
    """Counts the reads a store makes on its one reading connection."""

    def __init__(self, store: EmbeddedStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        read = store._sqlite.read

        async def counted(fn: Any) -> Any:
            self.count += 1
            return await read(fn)

        monkeypatch.setattr(store._sqlite, "read", counted)


async def _append(store: EmbeddedStore, gid: str, n: int) -> None:
    data = SystemData(subtype="notice", detail={"n": n})
    frame = YeaftOutput(conversation_id=gid, group_id=gid, vp_id="c", turn_id="t", data=data)
    await store.append_event(gid, frame)


async def test_a_blocking_read_reads_once_per_wake_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every tail of a gateway reads through the store's one reading
    # connection: a blocking read registers for its wake-up first and reads
    # once, and once more when woken, never an extra read that finds nothing.
    store = EmbeddedStore(tmp_path, poll_interval=3600)
    reads = _Reads(store, monkeypatch)
    gid = new_id("grp")
    try:
        assert (await store.read_events(gid, 0)).last_seq == 0
        assert reads.count == 1
        reader = asyncio.create_task(store.read_events(gid, 0, wait=3600))
        await parked(reader)
        assert reads.count == 2
        await _append(store, gid, 0)
        batch = await asyncio.wait_for(reader, 30)
        assert details_of(batch.events) == [(1, {"n": 0})]
        assert reads.count == 3
        # Something to read at once: one read.
        assert len((await store.read_events(gid, 0, wait=3600)).events) == 1
        assert reads.count == 4
    finally:
        await store.close()


async def test_a_blocking_read_from_a_reached_head_waits_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tail back from delivering a batch asks again from the head it just
    # reached: with nothing woken since, it waits without reading. A commit
    # made meanwhile, here or in another process, is still never missed.
    store = EmbeddedStore(tmp_path, poll_interval=3600)
    sibling = EmbeddedStore(tmp_path, poll_interval=3600)
    reads = _Reads(store, monkeypatch)
    gid = new_id("grp")
    try:
        reader = asyncio.create_task(store.read_events(gid, 0, wait=3600))
        await parked(reader)
        assert reads.count == 1
        await _append(store, gid, 0)
        assert [e.seq for e in (await asyncio.wait_for(reader, 30)).events] == [1]
        assert reads.count == 2
        # From the head it reached, nothing moved: it parks without a read.
        reader = asyncio.create_task(store.read_events(gid, 1, wait=3600))
        await parked(reader)
        assert reads.count == 2
        await _append(store, gid, 1)
        assert [e.seq for e in (await asyncio.wait_for(reader, 30)).events] == [2]
        assert reads.count == 3
        # A commit through another instance on the file while nobody waits.
        await _append(sibling, gid, 2)
        batch = await asyncio.wait_for(store.read_events(gid, 2, wait=3600), 30)
        assert details_of(batch.events) == [(3, {"n": 2})] and reads.count == 4
        # A commit in another process while nobody waits: the waker thread
        # looks when the next reader registers, and wakes it.
        await _write_from_child(tmp_path, gid, 1, "send")
        batch = await asyncio.wait_for(store.read_events(gid, 3, wait=3600), 30)
        assert details_of(batch.events) == [(4, {"from": "child", "n": 0})]
        # Not reached (a full batch): the next read reads at once.
        await _append(store, gid, 3)
        await _append(store, gid, 4)
        before = reads.count
        batch = await store.read_events(gid, 4, limit=1, wait=3600)
        assert [e.seq for e in batch.events] == [5]
        batch = await asyncio.wait_for(store.read_events(gid, 5, wait=3600), 30)
        assert [e.seq for e in batch.events] == [6] and reads.count == before + 2
        # A timed-out wait from a reached head still reads before it returns.
        batch = await store.read_events(gid, 6, wait=0.05)
        assert batch.events == [] and batch.last_seq == 6
    finally:
        await sibling.close()
        await store.close()
