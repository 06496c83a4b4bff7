"""The SQLite-on-its-own-thread helper both embedded backends use."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from store import StoreError
from store.memory import SQLiteMemory
from store.sqlite import SQLiteThread, is_busy, write_txn


def _table(conn: sqlite3.Connection) -> None:
    with write_txn(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")


async def test_an_operation_that_finds_the_database_locked_is_retried(tmp_path: Path) -> None:
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_table)
    calls = 0

    def op(conn: sqlite3.Connection) -> int:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise sqlite3.OperationalError("database is locked")
        return int(conn.execute("SELECT 42").fetchone()[0])

    try:
        assert await db.run(op) == 42
        assert calls == 3
    finally:
        await db.close()


async def test_retries_give_up_after_the_busy_timeout(tmp_path: Path) -> None:
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_table, busy_timeout=0.2, label="probe")
    calls = 0

    def op(conn: sqlite3.Connection) -> None:
        nonlocal calls
        calls += 1
        raise sqlite3.OperationalError("database is busy")

    started = time.monotonic()
    try:
        with pytest.raises(StoreError, match="probe"):
            await db.run(op)
    finally:
        await db.close()
    assert calls > 1
    assert time.monotonic() - started < 2.0


async def test_other_sqlite_errors_become_store_errors_at_once(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    db = SQLiteThread(path, setup=_table)
    calls = 0

    def op(conn: sqlite3.Connection) -> None:
        nonlocal calls
        calls += 1
        conn.execute("SELECT * FROM missing")

    try:
        with pytest.raises(StoreError, match=str(path)) as info:
            await db.run(op)
    finally:
        await db.close()
    assert calls == 1
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert not is_busy(info.value.__cause__)


async def test_a_write_waits_for_another_connections_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    db = SQLiteThread(path, setup=_table)
    await db.run(lambda conn: None)  # opened: WAL mode and the table exist
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")

    def insert(conn: sqlite3.Connection) -> int:
        with write_txn(conn):
            conn.execute("INSERT INTO t VALUES (2)")
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])

    try:
        writer = asyncio.create_task(db.run(insert))
        await asyncio.sleep(0.1)
        assert not writer.done(), "the write did not wait for the lock"
        other.execute("COMMIT")
        assert await asyncio.wait_for(writer, 10) == 2
    finally:
        other.close()
        await db.close()


async def test_a_closed_helper_refuses_calls_and_closing_twice_is_harmless(
    tmp_path: Path,
) -> None:
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_table)
    await db.run(lambda conn: None)
    await db.close()
    await db.close()
    assert db.closed
    with pytest.raises(StoreError, match="closed"):
        await db.run(lambda conn: None)


async def test_the_memory_backend_reports_store_errors(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.sqlite3")
    assert await memory.get("nothing") is None
    await memory.close()
    with pytest.raises(StoreError):
        await memory.get("nothing")


def _blobs(conn: sqlite3.Connection) -> None:
    with write_txn(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS b (v BLOB)")


def _insert_blob(conn: sqlite3.Connection) -> None:
    with write_txn(conn):
        conn.execute("INSERT INTO b (v) VALUES (?)", (b"x" * 8192,))


async def test_writes_leave_checkpoints_to_the_checkpointer(tmp_path: Path) -> None:
    # The thread would wait an hour: only the explicit checkpoint below runs.
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_blobs, checkpoint_interval=3600)
    try:
        for _ in range(400):
            await db.run(_insert_blob)
        done = await db.checkpoint()
        # ~1,200 pages written: a commit that checkpointed would have let the
        # WAL start over once it passed 1,000.
        assert done.wal_frames > 1_100
        assert done.copied == done.wal_frames
        assert not done.busy
    finally:
        await db.close()


async def test_the_checkpointer_copies_writes_on_its_own(tmp_path: Path) -> None:
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_blobs, checkpoint_interval=0)
    try:
        await db.run(_insert_blob)
        passed = db._checkpointer.passed
        assert await asyncio.to_thread(passed.wait, 10)
        done = db.last_checkpoint
        assert done is not None and done.wal_frames > 0
        assert done.copied == done.wal_frames
    finally:
        await db.close()


async def test_reads_asked_for_while_the_reader_is_busy_cross_over_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every gateway tail reads through one reading thread: reads that queue
    # while it is busy go over in one hop, each still gets its own answer
    # (or its own error), and a reader cancelled meanwhile harms nobody.
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_table)
    await db.run(lambda conn: conn.execute("INSERT INTO t VALUES (7)"))
    executor = db._read_executor
    submit = executor.submit
    hops = 0

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal hops
        hops += 1
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(executor, "submit", counted)
    entered = threading.Event()
    release = threading.Event()

    def held(conn: sqlite3.Connection) -> str:
        entered.set()
        release.wait(30)
        return "first"

    def value(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT v FROM t").fetchone()[0])

    def broken(conn: sqlite3.Connection) -> int:
        raise ValueError("this read's own failure")

    try:
        first = asyncio.create_task(db.read(held))
        await asyncio.to_thread(entered.wait, 30)
        assert hops == 1
        queued = [asyncio.create_task(db.read(value)) for _ in range(3)]
        failing = asyncio.create_task(db.read(broken))
        cancelled = asyncio.create_task(db.read(value))
        await asyncio.sleep(0)  # every task has queued its read
        cancelled.cancel()
        release.set()
        assert await first == "first"
        assert await asyncio.gather(*queued) == [7, 7, 7]
        with pytest.raises(ValueError, match="own failure"):
            await failing
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert hops == 1, "the five reads queued behind the first went over with it"
        assert await db.read(value) == 7
    finally:
        await db.close()


async def test_a_read_that_was_setting_the_file_up_as_the_helper_closed_is_refused(
    tmp_path: Path,
) -> None:
    # It would otherwise open a new reading connection after close() closed
    # the old one, or reach a thread pool already shut down.
    db = SQLiteThread(tmp_path / "x.sqlite3", setup=_table)
    reader = asyncio.create_task(db.read(lambda conn: 1))
    await asyncio.sleep(0)  # the read waits for the file's set-up
    await db.close()
    with pytest.raises(StoreError, match="closed"):
        await reader
    assert db._reader is None
