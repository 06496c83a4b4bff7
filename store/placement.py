"""Which pooled VP host runs each VP: balanced when first decided, then kept.

A local instance runs its VPs in a few pooled host processes (one a core).
A VP's host is decided the first time any coordinator needs it, on the host
that then has the fewest VPs, and recorded in the store: every coordinator
shard, and the same shard after a restart, finds the VP where its state and
its open questions are. A hash of the id, the earlier rule, put the two VPs
of a two-VP group in one process as often as not, and 16 VPs 6 and 10.

A record whose host is not below the pool's size (the pool was smaller at
this start) is decided again.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Protocol


class PlacementStore(Protocol):
    """The VPs' pooled hosts, decided once per store; atomic across processes."""

    @abstractmethod
    async def place_vps(self, vp_ids: Sequence[str], hosts: int) -> list[int]:
        """The host (0 to ``hosts`` - 1) of each of ``vp_ids``, in their order.

        A VP keeps the host it was given before. A new one goes to the host
        with the fewest VPs at that moment (the lowest number of those), in
        the order given, so a new group's roster spreads over the hosts. Of
        two processes placing one VP at once, both get the same answer.
        """


def assign(placed: Mapping[str, int], vp_ids: Sequence[str], hosts: int) -> dict[str, int]:
    """The records to add so each of ``vp_ids`` has a host below ``hosts``.

    ``placed`` is what the store holds now; the result maps each VP that
    has no valid host yet to the least loaded host, counting the ones
    given before it in the same call.
    """
    if hosts < 1:
        raise ValueError(f"a pool needs at least one host, not {hosts}")
    load = [0] * hosts
    for host in placed.values():
        if 0 <= host < hosts:
            load[host] += 1
    added: dict[str, int] = {}
    for vp_id in vp_ids:
        if vp_id in added or 0 <= placed.get(vp_id, -1) < hosts:
            continue
        host = min(range(hosts), key=load.__getitem__)
        load[host] += 1
        added[vp_id] = host
    return added
