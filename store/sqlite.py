"""SQLite on a dedicated thread, shared by the embedded store and the embedded memory.

Why it looks like this:

- sqlite3 blocks, so every call runs on one thread per ``SQLiteThread`` that
  owns the one connection; the event loop never waits on disk, and a
  connection used by a single thread needs no locking of its own.
- WAL mode lets readers run while one writer commits, and ``busy_timeout``
  makes a writer wait for another process's write lock instead of failing.
- Some conflicts come back as "database is locked" at once, without SQLite's
  busy handler waiting: switching a fresh file to WAL while another process
  does the same, or a read transaction that cannot become a write one. Such
  an operation is retried with back-off, for at most about ``busy_timeout``.
  Every operation handed to ``run`` is therefore either read-only or one
  transaction that rolls back whole on failure, so running it again is safe.
- Every ``sqlite3.Error`` leaves as ``StoreError`` naming the file.
- The WAL is copied back into the database (a checkpoint, which syncs the
  file to disk) by a thread of its own, never by a committing write: SQLite
  would otherwise run it inside whichever COMMIT crossed 1,000 pages, and
  that write, and every write queued behind it on the thread (all the VPs of
  a process share one), would wait tens of milliseconds on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from store.base import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

_FIRST_BACKOFF = 0.01
_MAX_BACKOFF = 0.5

CHECKPOINT_INTERVAL = 2.0
"""Seconds without a write after which the checkpointer copies what was written."""
CHECKPOINT_WRITES = 500
"""Writes of this process that make the checkpointer run even while writes go on."""


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds a lock (worth retrying)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        # Extended codes keep the primary code in their low byte.
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _retrying(fn: Callable[[], T], budget: float) -> T:
    """Call ``fn``, again with back-off while it fails busy and ``budget`` seconds last."""
    deadline = time.monotonic() + budget
    delay = _FIRST_BACKOFF
    while True:
        try:
            return fn()
        except sqlite3.Error as exc:
            if not is_busy(exc) or time.monotonic() + delay > deadline:
                raise
            log.debug("sqlite busy (%s); retrying in %.3f s", exc, delay)
        time.sleep(delay)
        delay = min(delay * 2, _MAX_BACKOFF)


def connect(
    path: Path, busy_timeout: float, *, checkpoints: bool = True, any_thread: bool = False
) -> sqlite3.Connection:
    """A connection to ``path`` in WAL mode with a busy timeout, in autocommit mode.

    Transactions are explicit (``write_txn``, ``read_txn``). Call it on the
    thread that will use the connection, or pass ``any_thread`` and use it
    under a lock. ``checkpoints=False``: its commits never checkpoint
    (someone else does, see the module notes).
    """
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=not any_thread
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        # Switching a new file to WAL needs a brief exclusive lock that the
        # busy handler does not wait for; once the file is in WAL mode this
        # is a no-op.
        _retrying(lambda: conn.execute("PRAGMA journal_mode = WAL"), busy_timeout)
        # NORMAL in WAL mode survives a crash of any process; only a power
        # loss can drop the last commits. FULL would fsync every commit.
        conn.execute("PRAGMA synchronous = NORMAL")
        if not checkpoints:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction holding the database write lock from its start.

    IMMEDIATE takes the lock up front, so a read-then-write inside it cannot
    race a writer in another process, and two writers never both read and
    then both fail to upgrade.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # After a failed COMMIT the transaction may already be gone.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def read_txn(conn: sqlite3.Connection) -> Iterator[None]:
    """A read snapshot, so related SELECTs see one consistent state."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("COMMIT")


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint's outcome: frames in the WAL, and how many are now in the database."""

    busy: bool
    wal_frames: int
    copied: int


def checkpoint(conn: sqlite3.Connection) -> Checkpoint:
    """Copy what no reader still needs from the WAL into the database (never blocks writers)."""
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return Checkpoint(bool(busy), int(frames), int(copied))


class _Checkpointer:
    """The thread that checkpoints one file after writes, and sleeps while none come.

    It runs once ``writes`` writes have gathered since its last pass (a few
    pages each: about as often as SQLite's own 1,000-page rule), or once the
    writes pause for ``interval`` seconds. Not on a timer while writes go
    on: each checkpoint syncs the file to disk, and a sync every few seconds
    in each process slowed everyone's writes more than the rare large one.
    """

    def __init__(
        self, path: Path, busy_timeout: float, interval: float, writes: int, label: str
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.interval = interval
        self.writes = writes
        self.label = label
        self.last: Checkpoint | None = None
        self._count = 0  # writes since the last pass (approximate: two threads touch it)
        self._wrote = threading.Event()
        self._due = threading.Event()
        self._stop = threading.Event()
        self.passed = threading.Event()  # set by each pass of the thread
        self._lock = threading.Lock()  # one checkpoint at a time on the one connection
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None

    def wrote(self) -> None:
        """A write committed: checkpoint soon (starts the thread on the first)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"yeaft-{self.label}-checkpoint", daemon=True
            )
            self._thread.start()
        self._count += 1
        if self._count >= self.writes:
            self._due.set()
        self._wrote.set()

    def run_once(self) -> Checkpoint:
        with self._lock:
            if self._conn is None:
                self._conn = connect(self.path, self.busy_timeout, any_thread=True)
            self.last = checkpoint(self._conn)
            return self.last

    def _run(self) -> None:
        while True:
            self._wrote.wait()
            while True:
                self._wrote.clear()
                if self._due.wait(self.interval) or not self._wrote.is_set():
                    break  # enough writes, or a pause in them
            if self._stop.is_set():
                return
            self._due.clear()
            self._count = 0
            try:
                self.run_once()
            except sqlite3.Error:
                # Another process checkpointing, or a broken file: the next
                # write asks again, and the writes themselves are unaffected.
                log.debug("checkpoint of %s failed", self.path, exc_info=True)
            self.passed.set()

    def close(self) -> None:
        """Stop the thread (the last connection to close checkpoints what is left)."""
        self._stop.set()
        self._wrote.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class _ReadHops:
    """Reads waiting for the reading thread, taken over to it together.

    A call handed to a thread pool costs a submission, a wake-up of the
    thread and, for its answer, a wake-up of the event loop. Reads asked for
    while the thread is busy queue here instead, and the thread takes all of
    them at once and answers them in one call per event loop: when one
    commit wakes every gateway tail of a busy process, their reads cross in a
    few hops, not one each.
    """

    def __init__(
        self, executor: ThreadPoolExecutor, call: Callable[[Callable[..., object]], object]
    ) -> None:
        self._executor = executor
        self._call = call
        self._lock = threading.Lock()
        self._queue: list[tuple[Callable[..., object], asyncio.Future[object]]] = []
        self._running = False

    def submit(self, fn: Callable[..., object]) -> asyncio.Future[object]:
        """Queue ``fn`` for the thread; its answer (or its error) comes in the future."""
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._queue.append((fn, fut))
            start, self._running = not self._running, True
        if start:
            self._executor.submit(self._drain)
        return fut

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch, self._queue = self._queue, []
                if not batch:
                    self._running = False
                    return
            answers: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}
            for fn, fut in batch:
                try:
                    answer: _Answer = (fut, True, self._call(fn))
                except Exception as exc:
                    answer = (fut, False, exc)
                answers.setdefault(fut.get_loop(), []).append(answer)
            for loop, items in answers.items():
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(_settle, items)


_Answer = tuple["asyncio.Future[object]", bool, object]


def _settle(answers: list[_Answer]) -> None:
    for fut, ok, value in answers:
        if fut.done():  # its reader was cancelled meanwhile
            continue
        if ok:
            fut.set_result(value)
        else:
            assert isinstance(value, BaseException)
            fut.set_exception(value)


class SQLiteThread:
    """One connection to one SQLite file, used only from one dedicated thread.

    The file is opened on first use, on that thread (opening is disk I/O),
    and ``setup`` runs once on the new connection (schema, migrations). A
    failed setup closes the connection and the next call tries again.

    Reads that need not see an open transaction of this connection go to a
    second connection on a thread of its own (:meth:`read`): in WAL mode they
    then never wait behind a write queued before them (a turn's context read
    behind the previous turn's transcript save, say), and they still see
    every write that committed before they were asked for.
    """

    def __init__(
        self,
        path: Path,
        *,
        setup: Callable[[sqlite3.Connection], None],
        busy_timeout: float = 10.0,
        label: str = "sqlite",
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
        checkpoint_writes: int = CHECKPOINT_WRITES,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.label = label
        self._setup = setup
        self._checkpointer = _Checkpointer(
            path, busy_timeout, checkpoint_interval, checkpoint_writes, label
        )
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"yeaft-{label}")
        self._reader: sqlite3.Connection | None = None
        self._read_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"yeaft-{label}-read"
        )
        self._reads = _ReadHops(self._read_executor, self._call_reader)
        self._ready = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the connection's thread; StoreError for any SQLite failure.

        ``fn`` may run more than once (see the module notes), so it must be
        read-only or one transaction.
        """
        if self._closed:
            raise StoreError(f"{self.label} ({self.path}) is closed")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self._call, fn)
        self._checkpointer.wrote()
        return result

    async def checkpoint(self) -> Checkpoint:
        """Checkpoint now, on the checkpointer's connection (what its thread does after writes)."""
        try:
            return await asyncio.to_thread(self._checkpointer.run_once)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.label} ({self.path}): {exc}") from exc

    @property
    def last_checkpoint(self) -> Checkpoint | None:
        """The outcome of the latest checkpoint, or None before the first."""
        return self._checkpointer.last

    async def set_up(self) -> None:
        """Return once the writing connection has set the file up (its schema)."""
        if not self._ready:
            await self.run(lambda _conn: None)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run the read-only ``fn`` on the reading connection (see the class notes)."""
        if self._closed:
            raise StoreError(f"{self.label} ({self.path}) is closed")
        # The writing connection sets the file up before anyone reads.
        await self.set_up()
        if self._closed:  # while it set up: its reading thread is going away
            raise StoreError(f"{self.label} ({self.path}) is closed")
        return cast(T, await self._reads.submit(fn))

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return _retrying(lambda: fn(self._connection()), self.busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.label} ({self.path}): {exc}") from exc

    def _call_reader(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # On the reading thread; several in a row when reads queued up.
        try:
            if self._reader is None:
                self._reader = connect(self.path, self.busy_timeout)
            reader = self._reader
            return _retrying(lambda: fn(reader), self.busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.label} ({self.path}): {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path, self.busy_timeout, checkpoints=False)
            try:
                self._setup(conn)
            except BaseException:
                conn.close()  # also releases a write lock the setup held
                raise
            self._conn = conn
            self._ready = True
        return self._conn

    async def close(self) -> None:
        """Close the connection after the calls already queued; idempotent."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._read_executor, self._close_reader)
        await loop.run_in_executor(self._executor, self._close_conn)
        await asyncio.to_thread(self._checkpointer.close)
        self._read_executor.shutdown(wait=False)
        self._executor.shutdown(wait=False)

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
