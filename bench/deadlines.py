"""CPU per streamed item of the engine's model-stream deadlines (``engine.timeouts.watch``).

Reads ``--items`` items through three readers in one run, best of
``--runs`` each: a bare async generator (the floor), an ``asyncio.timeout``
around every wait (how the deadlines were kept before: a timer made and
cancelled per item) and ``watch`` itself. Prints CPU per item and the
ratios to the floor.

    python bench/deadlines.py [--items 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.events import TextDelta
from engine.providers.base import StreamItem
from engine.timeouts import StreamTimeouts, watch

LIMITS = StreamTimeouts()


async def items(n: int) -> AsyncIterator[StreamItem]:
    delta = TextDelta("x")
    for _ in range(n):
        yield delta


async def bare(n: int) -> None:
    async for _ in items(n):
        pass


async def timeout_per_item(n: int) -> None:
    stream = items(n)
    while True:
        try:
            async with asyncio.timeout(LIMITS.stall):
                await anext(stream)
        except StopAsyncIteration:
            return


async def watched(n: int) -> None:
    async for _ in watch(items(n), LIMITS, "offline:bench"):
        pass


async def best(reader: Callable[[int], Coroutine[None, None, None]], n: int, runs: int) -> float:
    """The least CPU seconds per item over ``runs`` reads of ``n`` items."""
    out = float("inf")
    for _ in range(runs):
        start = time.process_time()
        await reader(n)
        out = min(out, (time.process_time() - start) / n)
    return out


async def main(args: argparse.Namespace) -> None:
    floor = await best(bare, args.items, args.runs)
    print(f"{args.items:,} items, best of {args.runs}      CPU per item   to the floor")
    for label, reader in (
        ("bare generator (floor)", bare),
        ("asyncio.timeout per item", timeout_per_item),
        ("watch", watched),
    ):
        per = floor if reader is bare else await best(reader, args.items, args.runs)
        print(f"  {label:<28} {per * 1e6:8.2f} us   {per / floor:8.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
