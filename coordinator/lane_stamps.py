"""The order of each (group, VP) lane's turns, stamped on them as they are sent.

Ray does not keep the order of calls to an async actor, so two turns sent to
one VP a moment apart may reach it second-first. Every turn the coordinator
sends carries a :class:`~actors.lanes.LaneStamp`: its place in its lane's
sequence, which the VP host lets turns into the lane by (``actors.lanes``).

The sequence lives in this coordinator's memory under an ``epoch`` drawn at
its start. A restarted coordinator draws a new epoch and counts from 1
again: the VP keeps the sequences of different epochs apart, so no number is
ever confused with one from before the restart. ``floor`` tells the VP which
turns it need not wait for (they ended, or were never sent), so a VP that
restarted, and knows no sequence, picks up where the coordinator stands.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from actors.lanes import LaneStamp
from actors.turns import TurnRequest


class LaneStamps:
    """The next number and the numbers in flight of each (group, VP) lane."""

    def __init__(self, epoch: str | None = None) -> None:
        self.epoch = epoch or uuid.uuid4().hex[:12]
        self._next: dict[tuple[str, str], int] = {}
        self._flying: dict[tuple[str, str], set[int]] = {}

    def stamp(self, group_id: str, vp_id: str) -> LaneStamp:
        """The next stamp of the lane; in flight until :meth:`landed`."""
        key = (group_id, vp_id)
        seq = self._next.get(key, 1)
        self._next[key] = seq + 1
        flying = self._flying.setdefault(key, set())
        flying.add(seq)
        return LaneStamp(self.epoch, seq, min(flying))

    def landed(self, group_id: str, vp_id: str, stamp: LaneStamp | None) -> None:
        """The turn stamped so has ended (or will not be sent again)."""
        if stamp is None or stamp.epoch != self.epoch:
            return
        key = (group_id, vp_id)
        flying = self._flying.get(key)
        if flying is not None:
            flying.discard(stamp.seq)
            if not flying:
                del self._flying[key]

    def refresh(self, req: TurnRequest) -> LaneStamp | None:
        """``req``'s stamp with the lane's floor as it is now (a turn sent again)."""
        stamp = req.lane
        if stamp is None or stamp.epoch != self.epoch:
            return stamp
        flying = self._flying.get((req.group_id, req.vp_id))
        return replace(stamp, floor=min(flying)) if flying else stamp
