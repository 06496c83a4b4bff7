"""Waking the embedded store's blocked event readers when their group moves.

One :class:`EventWaker` per store instance keeps the futures of the
coroutines blocked in ``read_events`` and, while there is any, one thread
that wakes them. The thread sleeps on this process's wake-up socket
(``store.notify``); when a datagram arrives (a commit in another process), or
every ``poll_interval`` seconds as a safety net, it reads the events table's
global AUTOINCREMENT counter and, when that moved, wakes the waiters of the
groups that got the new rows. A commit in this process wakes the waiters of
every instance on the same file directly.

Every wake-up also moves its groups' stamps (:meth:`EventWaker.stamp`). A
reader takes the stamp before it reads; a read that reached the head is
remembered with it (:meth:`EventWaker.reached`), so the next blocking read
from that head, with the stamp unmoved, knows there is nothing to read yet
and waits at once (:meth:`EventWaker.unmoved`) instead of reading to find
nothing, as a gateway's tail would after every batch it delivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Collection, Iterable
from pathlib import Path

from store.embedded_schema import event_counter
from store.notify import Notifier
from store.sqlite import connect

log = logging.getLogger(__name__)

# A group's wake-up stamp: (wake-ups of every group, wake-ups of the group).
Stamp = tuple[int, int]

# When the thread falls this many event rows behind (it was idle, or a burst
# arrived), scanning them to find the groups is not worth it: it wakes every
# waiter instead, and each re-reads its own group once.
_SCAN_LIMIT = 1_000

# The thread looks at the log at most once per this many seconds: a wake-up
# after a quiet spell looks at once, one during a stream of commits waits
# for the rest of the spell and covers them all with one look.
_MIN_GAP_S = 0.003

# Every live waker per database file in this process, so a writer can wake
# the waiters of its siblings at once.
_PEERS: dict[str, weakref.WeakSet[EventWaker]] = {}
_PEERS_LOCK = threading.Lock()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class EventWaker:
    """The blocked readers of one store instance, and the thread that wakes them."""

    def __init__(self, path: Path, poll_interval: float, busy_timeout: float) -> None:
        self.path = path
        self.poll_interval = poll_interval
        self._busy_timeout = busy_timeout
        # The counter when the store opened; the thread starts from here, and
        # every waiter reads after this point, so no later commit is missed.
        self.base = 0
        self._lock = threading.Lock()
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._has_waiters = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._notifier = Notifier(path)
        # Stamps: one count per group a blocking reader has stamped (moved by
        # each wake-up of that group) and one for wake-ups of every group.
        # Both maps hold one entry per group ever tailed here, no more.
        self._moves: dict[str, int] = {}
        self._epoch = 0
        # Per group: the seq a read found to be the head, and its stamp.
        self._heads: dict[str, tuple[int, Stamp]] = {}
        with _PEERS_LOCK:
            _PEERS.setdefault(str(path), weakref.WeakSet()).add(self)

    def add(self, group_id: str) -> asyncio.Future[None]:
        """A future resolved when ``group_id`` may have new events (register, then read)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiters.setdefault(group_id, set()).add(fut)
            if not self._has_waiters.is_set():  # set() takes the event's lock
                self._has_waiters.set()
            if self._thread is None:
                # Bound before the first waiter reads: a commit after that
                # read either sends to this socket or is seen by the first
                # look at the counter, which the thread makes on starting.
                self._notifier.listen()
                self._thread = threading.Thread(
                    target=self._run, name="yeaft-store-waker", daemon=True
                )
                self._thread.start()
        return fut

    def remove(self, group_id: str, fut: asyncio.Future[None]) -> None:
        with self._lock:
            futs = self._waiters.get(group_id)
            if futs is not None:
                futs.discard(fut)
                if not futs:
                    del self._waiters[group_id]
            if not self._waiters:
                self._has_waiters.clear()

    def stamp(self, group_id: str) -> Stamp:
        """Where ``group_id``'s wake-ups stand; take it before a read."""
        with self._lock:
            return self._epoch, self._moves.setdefault(group_id, 0)

    def reached(self, group_id: str, seq: int, stamp: Stamp) -> None:
        """A read taken at ``stamp`` found ``seq`` to be the group's newest event."""
        with self._lock:
            self._heads[group_id] = (seq, stamp)

    def unmoved(self, group_id: str, after_seq: int) -> bool:
        """Whether a read after ``after_seq`` is sure to find nothing yet.

        True when an earlier read found ``after_seq`` to be the head and the
        group was not woken since it was taken: every commit after that
        read's snapshot wakes the group (from the writer, or from the thread
        once a waiter is registered), and moves its stamp.
        """
        with self._lock:
            head = self._heads.get(group_id)
            return head is not None and head == (
                after_seq,
                (self._epoch, self._moves.get(group_id, 0)),
            )

    def notify(self, group_ids: Iterable[str] | None) -> None:
        """Wake the waiters of these groups (of all groups for None); thread-safe."""
        with self._lock:
            if group_ids is None:
                woken = [f for futs in self._waiters.values() for f in futs]
                self._waiters.clear()
                self._epoch += 1
            else:
                groups = list(group_ids)
                woken = [f for g in groups for f in self._waiters.pop(g, ())]
                for g in groups:
                    if g in self._moves:
                        self._moves[g] += 1
            if not self._waiters:
                self._has_waiters.clear()
        for fut in woken:
            # A waiter may live on another thread's loop (the waker thread
            # always does this from its own), so go through the loop's queue.
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                fut.get_loop().call_soon_threadsafe(_resolve, fut)

    def wake(self, group_id: str) -> None:
        """A commit to ``group_id`` just happened here: wake every waiting reader of it."""
        self.wake_all((group_id,))

    def wake_all(self, group_ids: Collection[str]) -> None:
        """A commit to these groups just happened here: wake their readers, here and elsewhere."""
        with _PEERS_LOCK:
            peers = list(_PEERS.get(str(self.path), ()))
        for peer in peers:
            peer.notify(group_ids)
        try:
            # One datagram per process says "look"; the log says at what.
            self._notifier.send(next(iter(group_ids)))
        except OSError:
            # The waiting processes still look on their own (poll_interval).
            log.debug("wake-up datagrams for %s failed", group_ids, exc_info=True)

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        base = self.base
        try:
            while not self._stop.is_set():
                if not self._has_waiters.is_set():
                    self._has_waiters.wait()
                    continue
                try:
                    if conn is None:
                        conn = connect(self.path, self._busy_timeout)
                    top = event_counter(conn)
                    if top > base:
                        if top - base > _SCAN_LIMIT:
                            self.notify(None)
                        else:
                            rows = conn.execute(
                                "SELECT DISTINCT group_id FROM events"
                                " WHERE row_id > ? AND row_id <= ?",
                                (base, top),
                            ).fetchall()
                            self.notify(r[0] for r in rows)
                        base = top
                except sqlite3.Error:
                    log.warning("event waker on %s failed; retrying", self.path, exc_info=True)
                    # Back off so a broken file does not flood the log.
                    self._stop.wait(1.0)
                    continue
                # Until a writer's datagram (or close()) arrives, or for
                # poll_interval at most: the safety net for a lost one.
                looked = time.monotonic()
                if self._notifier.wait(self.poll_interval):
                    rest = _MIN_GAP_S - (time.monotonic() - looked)
                    if rest > 0:
                        time.sleep(rest)
        finally:
            if conn is not None:
                conn.close()

    async def close(self) -> None:
        """Release every blocked reader and stop the thread."""
        with _PEERS_LOCK:
            peers = _PEERS.get(str(self.path))
            if peers is not None:
                peers.discard(self)
                if not peers:
                    del _PEERS[str(self.path)]
        self._stop.set()
        self.notify(None)  # blocked readers return what they have
        self._has_waiters.set()  # let an idle thread see the stop flag
        self._notifier.poke_self()  # and one waiting for a datagram
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        self._notifier.close()
