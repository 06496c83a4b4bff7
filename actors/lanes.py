"""Session lanes: turns of one key run one at a time, in arrival order.

Different keys run concurrently, under one global cap for the process. This
is the two-level queue (session lane inside a global lane) that keeps a
conversation's history linear without serialising unrelated work.

"Arrival order" is the coordinator's order, not the order Ray delivers the
calls in (Ray does not keep the order of calls to an async actor): a turn
the coordinator stamped with a :class:`LaneStamp` enters its lane only after
the turns stamped before it, or once it has waited ``gap_s`` for a missing
one (then it goes on, and the lane forgets the gap). See
docs/architecture.md, "Session lanes across the Ray hop".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

# How long a turn waits for the turns stamped before it that have not come.
LANE_GAP_S = 2.0
# The (lane, epoch) sequences a process remembers, newest last.
SEQUENCES_KEPT = 4096


@dataclass(frozen=True, slots=True)
class LaneStamp:
    """Where a turn stands in its (group, VP) lane, as the coordinator sent it.

    ``epoch`` names the coordinator's sequence (a new one after each
    coordinator start, so a restart never reuses numbers); ``seq`` counts the
    lane's turns in it from 1; ``floor`` is the lowest ``seq`` the coordinator
    still had in flight when it sent this one (turns below it have ended or
    will never be sent: nobody waits for them).
    """

    epoch: str
    seq: int
    floor: int


class _Sequence:
    """The next ``seq`` a lane lets in for one epoch, and those let in ahead of it."""

    __slots__ = ("ahead", "changed", "next")

    def __init__(self, floor: int) -> None:
        self.next = floor
        self.ahead: set[int] = set()
        self.changed = asyncio.Event()

    def admit(self, seq: int, jump: bool = False) -> None:
        """``seq`` is in (or will never come); ``jump``: give up on the turns before it."""
        if jump and seq >= self.next:
            self.next = seq + 1
            self.ahead = {s for s in self.ahead if s > seq}
        elif seq >= self.next:
            self.ahead.add(seq)
        while self.next in self.ahead:
            self.ahead.discard(self.next)
            self.next += 1
        self.changed.set()
        self.changed = asyncio.Event()

    def raise_floor(self, floor: int) -> None:
        if floor > self.next:
            self.admit(floor - 1, jump=True)


Sleep = Callable[[float], Awaitable[None]]


class Lanes:
    """One FIFO lane per key inside a global concurrency cap.

    ``hold(key)`` waits for the key's lane (asyncio.Lock wakes waiters in
    order, so arrival order holds) and then for a global slot. Idle lanes are
    forgotten, so a long-lived actor does not accumulate them. ``gap_s`` and
    ``sleep`` time the wait for a missing stamp (tests pass their own sleep).
    """

    def __init__(
        self,
        max_concurrent: int,
        gap_s: float = LANE_GAP_S,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._global = asyncio.Semaphore(max_concurrent)
        self._locks: dict[str, asyncio.Lock] = {}
        self._waiting: dict[str, int] = {}
        self._sequences: OrderedDict[tuple[str, str], _Sequence] = OrderedDict()
        self.gap_s = gap_s
        self._sleep = sleep
        self._clock = clock
        # Turns that went in after waiting out a gap (tests and logs read it).
        self.gaps = 0

    def busy(self, key: str) -> bool:
        """Whether a turn holds the lane ``key`` or waits for it (in its turn)."""
        return key in self._waiting

    def _sequence(self, key: str, stamp: LaneStamp) -> _Sequence:
        seq = self._sequences.get((key, stamp.epoch))
        if seq is None:
            seq = self._sequences[(key, stamp.epoch)] = _Sequence(stamp.floor)
            while len(self._sequences) > SEQUENCES_KEPT:
                self._sequences.popitem(last=False)
        else:
            self._sequences.move_to_end((key, stamp.epoch))
            seq.raise_floor(stamp.floor)
        return seq

    async def _in_turn(self, key: str, stamp: LaneStamp) -> None:
        """Wait until the turns stamped before ``stamp`` are in the lane, at most ``gap_s``."""
        sequence = self._sequence(key, stamp)
        if stamp.seq <= sequence.next:
            return
        timer = asyncio.ensure_future(self._sleep(self.gap_s))
        started = self._clock()
        try:
            while stamp.seq > sequence.next:
                changed = asyncio.ensure_future(sequence.changed.wait())
                await asyncio.wait({timer, changed}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                if timer.done() and stamp.seq > sequence.next:
                    self.gaps += 1
                    log.warning(
                        "lane %s: turn %d went in after %.1fs without turns %d-%d",
                        key,
                        stamp.seq,
                        self._clock() - started,
                        sequence.next,
                        stamp.seq - 1,
                    )
                    sequence.admit(stamp.seq, jump=True)
                    return
        finally:
            timer.cancel()

    def passed(self, key: str, stamp: LaneStamp | None) -> None:
        """The stamped turn waits for the lane no longer: later ones need not wait for it."""
        if stamp is not None:
            self._sequence(key, stamp).admit(stamp.seq)

    @contextlib.asynccontextmanager
    async def hold(self, key: str, stamp: LaneStamp | None = None) -> AsyncIterator[None]:
        """Hold the lane ``key`` (and a global slot) for the body of the block.

        A stamped turn first waits for its turn (see the module doc); from
        then on to taking the lock nothing awaits, so the lock's FIFO order
        is the stamps' order.
        """
        if stamp is not None:
            await self._in_turn(key, stamp)
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        try:
            # The next stamp is let in now, but runs only once this task
            # awaits: by then the lock has queued this turn ahead of it.
            self.passed(key, stamp)
            async with lock, self._global:
                yield
        finally:
            self._waiting[key] -= 1
            if not self._waiting[key]:
                del self._waiting[key]
                self._locks.pop(key, None)
