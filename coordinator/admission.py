"""Admission control: a bound on the turns waiting per group and per VP actor.

What counts against a bound: every turn this coordinator dispatched that has
not finished, whether it waits in its VP's lane or runs, and whatever started
it (a person's message, a VP's reply that mentions others, a
``route_forward``). A turn is counted from the moment it is dispatched and is
released when it finishes: when the dispatcher's task for it ends, after its
outcome was handled or after it was declared lost.

What is refused: only a person's message, and only before it is stored, so a
refused message is never acknowledged and the client sees a ``busy`` error
with a ``retryAfter`` instead. The follow-ups of chains already admitted are
not refused here (the loop guard bounds each chain: 32 VP turns per person's
message), so they can take a group past its bound; new messages cannot. A
group (or VP) with nothing waiting always admits one message, so a bound
smaller than a fan-out never locks a group out.

Per VP actor: an actor serves groups of every coordinator shard, and each
coordinator sees only the turns it sent, so each holds an equal share of the
actor's bound. The actor's total stays within the bound without a call across
actors on the path of every message.

Reservations: an admitted message is stored (an await) before its turns are
dispatched, and other messages are checked meanwhile, so admitting reserves
the message's places at once. A turn dispatched for the same group and VP
takes a reservation's place rather than counting twice (whose reservation
does not matter: the count is the same), and the places left unused (the
message was a duplicate, or the loop guard refused a turn) are given back
when the message's ingest ends.

The ``retryAfter`` of a refusal estimates how long until enough turns finish
for the message to fit: the places missing times the mean time between two
finishes while the group (or the VP) had turns waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from actors.config import RuntimeConfig
from coordinator.errors import GroupError, GroupErrorCode

Clock = Callable[[], float]

# Weight of the newest gap in the mean time between finishes.
_ALPHA = 0.2
# Until a turn has finished, the gap is taken to be at least this long.
_FIRST_GAP_S = 1.0
# A retry-after is never shorter or longer than these.
_MIN_RETRY_S = 0.1
_MAX_RETRY_S = 600.0


@dataclass(slots=True)
class Load:
    """The turns counted against one bound, and how fast they drain."""

    pending: int = 0
    # The later of: when ``pending`` last rose from zero, and the last finish.
    mark: float = 0.0
    # Mean seconds between two finishes while turns were waiting (None: no finish yet).
    gap: float | None = None

    def add(self, now: float) -> None:
        if self.pending == 0:
            self.mark = now
        self.pending += 1

    def remove(self) -> None:
        self.pending = max(0, self.pending - 1)

    def finish(self, now: float) -> None:
        """One turn finished: it no longer counts, and the drain rate learns from it."""
        gap = now - self.mark
        self.gap = gap if self.gap is None else (1 - _ALPHA) * self.gap + _ALPHA * gap
        self.mark = now
        self.remove()

    def wait_for(self, places: int, now: float) -> float:
        """Seconds until ``places`` more turns have finished, estimated."""
        gap = self.gap if self.gap is not None else max(now - self.mark, _FIRST_GAP_S)
        return min(_MAX_RETRY_S, max(_MIN_RETRY_S, round(places * gap, 1)))


class Reservation:
    """The places an admitted message holds until its turns are dispatched.

    A context manager: leaving it gives back the places its turns did not
    take (see the module docstring).
    """

    def __init__(self, admission: Admission, group_id: str, vps: Sequence[str]) -> None:
        self._admission = admission
        self.group_id = group_id
        self.vps = tuple(vps)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for vp in self.vps:
            self._admission.unreserve(self.group_id, vp)


class Admission:
    """The waiting turns of one coordinator, per group and per VP, against their bounds."""

    def __init__(self, group_limit: int, vp_limit: int, clock: Clock = time.monotonic) -> None:
        if group_limit < 1 or vp_limit < 1:
            raise ValueError("admission bounds must be at least 1")
        self.group_limit = group_limit
        self.vp_limit = vp_limit
        self._clock = clock
        self._groups: dict[str, Load] = {}
        self._vps: dict[str, Load] = {}
        self._reserved: dict[tuple[str, str], int] = {}

    @classmethod
    def for_shard(cls, config: RuntimeConfig) -> Admission:
        """The bounds of one coordinator: the group bound, and its share of each VP's."""
        share = max(1, config.max_vp_pending_turns // max(1, config.coordinator_shards))
        return cls(config.max_group_pending_turns, share)

    def group(self, group_id: str) -> Load:
        return self._groups.setdefault(group_id, Load())

    def vp(self, vp_id: str) -> Load:
        return self._vps.setdefault(vp_id, Load())

    # -- a person's message ------------------------------------------------------
    def reserve(self, group_id: str, vps: Sequence[str]) -> Reservation:
        """Admit a message that will start one turn on each of ``vps``.

        Raises :class:`GroupError` ``BUSY`` (with ``retry_after``) when the
        group or one of the VPs has no room; otherwise the places are held
        until the returned reservation is left.
        """
        self._check(group_id, vps)
        now = self._clock()
        group = self.group(group_id)
        for vp in vps:
            group.add(now)
            self.vp(vp).add(now)
            key = (group_id, vp)
            self._reserved[key] = self._reserved.get(key, 0) + 1
        return Reservation(self, group_id, vps)

    def _check(self, group_id: str, vps: Sequence[str]) -> None:
        now = self._clock()
        group = self._groups.get(group_id)
        if vps and group is not None and group.pending:
            over = group.pending + len(vps) - self.group_limit
            if over > 0:
                raise self._busy(
                    f"this group has {group.pending} turns waiting (at most {self.group_limit})",
                    group.wait_for(over, now),
                )
        for vp_id in vps:
            vp = self._vps.get(vp_id)
            if vp is not None and vp.pending >= self.vp_limit:
                raise self._busy(
                    f"@{vp_id} has {vp.pending} turns waiting (at most {self.vp_limit})",
                    vp.wait_for(vp.pending + 1 - self.vp_limit, now),
                )

    @staticmethod
    def _busy(why: str, retry_after: float) -> GroupError:
        message = f"{why}: this message was not sent; send it again in about {retry_after:g} s"
        return GroupError(GroupErrorCode.BUSY, message, retry_after)

    def unreserve(self, group_id: str, vp_id: str) -> None:
        """Give back one place reserved for ``vp_id``, unless a turn has taken it."""
        key = (group_id, vp_id)
        left = self._reserved.get(key, 0)
        if left <= 0:
            return
        self._take(key, left)
        self.group(group_id).remove()
        self.vp(vp_id).remove()

    # -- turns -------------------------------------------------------------------
    def hold(self, group_id: str, vp_id: str) -> None:
        """A turn was dispatched: it takes a reserved place, or counts on its own."""
        key = (group_id, vp_id)
        left = self._reserved.get(key, 0)
        if left > 0:
            self._take(key, left)
            return
        now = self._clock()
        self.group(group_id).add(now)
        self.vp(vp_id).add(now)

    def release(self, group_id: str, vp_id: str) -> None:
        """A turn finished: it no longer counts against either bound."""
        now = self._clock()
        group = self._groups.get(group_id)
        if group is not None:
            group.finish(now)
        self.vp(vp_id).finish(now)

    def forget(self, group_id: str) -> None:
        """Drop a deleted group's count (its VPs' counts drop as its turns end)."""
        self._groups.pop(group_id, None)

    def _take(self, key: tuple[str, str], left: int) -> None:
        if left == 1:
            del self._reserved[key]
        else:
            self._reserved[key] = left - 1
