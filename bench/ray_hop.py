"""One Ray hop on its own: how long a call takes to reach an async actor's method.

The path to a message's first token crosses two Ray calls (gateway ->
coordinator -> VP). This times the same kind of call with nothing around
it: from a driver's ``.remote()`` to the first line of an async actor's
method, and from one async actor to another, with the calls back to back
and with a pause before each (as between the messages of a chat). Each
figure is the median of ``--calls`` calls; the clock is the machine's, read
in both processes.

    python bench/ray_hop.py [--calls 60] [--pauses 0 0.05 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import start_ray


class Target:
    """The callee: returns how long ago its caller sent the call."""

    async def reached(self, sent: float, text: str) -> float:
        return time.time() - sent


async def timed_calls(target: object, calls: int, pause: float, text: str) -> list[float]:
    """``calls`` calls to ``target``, each after ``pause`` seconds: how long each took to arrive."""
    out = []
    for _ in range(calls):
        await asyncio.sleep(pause)
        out.append(await target.reached.remote(time.time(), text))  # type: ignore[attr-defined]
    return out


class Caller:
    """An actor that calls ``target`` the way the coordinator calls a VP."""

    def __init__(self, target: object) -> None:
        self.target = target

    async def hops(self, calls: int, pause: float, text: str) -> list[float]:
        return await timed_calls(self.target, calls, pause, text)


def row(label: str, pause: float, times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9)]
    p50 = statistics.median(times)
    return f"{label:<16} {pause * 1000:>8.0f} {p50 * 1000:>8.2f} {p90 * 1000:>8.2f}"


async def main_async(args: argparse.Namespace) -> None:
    import ray

    actor = ray.remote(max_concurrency=10_000)
    target = actor(Target).remote()
    caller = actor(Caller).remote(target)
    text = "a message of about the size of a chat line " * 3
    # Both processes started and warm before anything is timed.
    await timed_calls(target, 5, 0.0, text)
    await caller.hops.remote(5, 0.0, text)
    print(f"{'from':<16} {'pause ms':>8} {'p50 ms':>8} {'p90 ms':>8}")
    for pause in args.pauses:
        print(row("driver -> actor", pause, await timed_calls(target, args.calls, pause, text)))
        print(row("actor -> actor", pause, await caller.hops.remote(args.calls, pause, text)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--pauses", type=float, nargs="+", default=[0.0, 0.05, 0.2])
    args = parser.parse_args()
    start_ray("yeaft-bench-hop")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
