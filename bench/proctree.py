"""A process and everything descended from it, read from ``/proc`` (Linux).

Used by ``bench/cost.py``, ``bench/latency.py`` and ``bench/overload.py`` to
charge a server under test with the CPU or memory of its whole process tree
(for ``yeaft serve``: the gateway, Ray's processes and the actor workers),
and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU seconds incl. reaped children, RSS bytes) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ppid = int(fields[1])
    cpu = sum(int(x) for x in fields[11:15]) / _TICK
    return ppid, cpu, int(fields[21]) * _PAGE


def tree(root: int) -> dict[int, tuple[float, int]]:
    """CPU seconds and RSS of ``root`` and every process descended from it."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            got = _stat(int(entry))
            if got is not None:
                stats[int(entry)] = got
    members, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, _) in stats.items():
            if ppid == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return {pid: stats[pid][1:] for pid in members if pid in stats}


def cpu_of(root: int) -> float:
    """User and system CPU seconds of ``root``'s tree so far (reaped children included)."""
    return cpu_in(tree(root))


def rss_of(root: int) -> tuple[int, int]:
    """Resident bytes summed over ``root`` and its descendants, and how many processes."""
    snapshot = tree(root)
    return sum(rss for _, rss in snapshot.values()), len(snapshot)


def cpu_in(snapshot: dict[int, tuple[float, int]]) -> float:
    """User and system CPU seconds of the processes of one :func:`tree` snapshot."""
    return sum(c for c, _ in snapshot.values())


def pss(pids: Iterable[int]) -> int:
    """Proportional set size of ``pids``, in bytes: a page n processes share counts 1/n in each.

    A sum of RSS over a tree counts every shared page (the libraries each of
    Ray's processes maps, the interpreter's own) once per process that maps
    it; a sum of PSS is the memory the processes hold between them.
    """
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total
