"""A turn's transcript save: the changed rows only, against the whole transcript each turn.

A VP's transcript in a group grows by a few messages a turn (the others'
replies it saw, the trigger, its own answer) and runs to hundreds. Each
turn used to write it whole, as one JSON text; now the store keeps a head
and a row per message and a save writes the head and the new rows
(``actors.transcripts``). This saves the same growing transcripts both
ways, in alternating pairs, and reports per save: this process's CPU
(serialising included, and for the embedded store SQLite's work on its
thread), the wall time, and the bytes sent to the store.

    python bench/transcripts.py [--sizes 100 500 2000] [--turns 20] [--store redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.transcripts import TranscriptCache
from bench.model_server import WORDS
from engine.messages import Conversation, Message
from store import Store, open_store
from store.base import StoredTranscript, new_id

# Messages a turn adds: two other VPs' replies, and this VP's own answer.
ADDED = 3


def text(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(words))


def message(i: int) -> Message:
    if i % 3 == 2:
        return Message.assistant(text(60, i), speaker="jobs", meta={"group_message_id": f"m{i}"})
    return Message.user(f"[vp{i % 16}] {text(40, i)}", meta={"group_message_id": f"m{i}"})


class Counted:
    """The store's transcripts, counting the characters each save sends."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.sent = 0

    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        return await self.store.load_transcript(group_id, vp_id)

    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        self.sent += len(head) + sum(len(m) for m in messages)
        return await self.store.save_transcript(group_id, vp_id, head, messages, keep)


async def run(
    store: Store, mode: str, size: int, turns: int
) -> tuple[list[float], list[float], list[int]]:
    """CPU and wall seconds and bytes of each of ``turns`` saves, from ``size`` messages on."""
    gid = new_id("bench")
    counted = Counted(store)
    cache = TranscriptCache("jobs")
    conv = Conversation(id=f"{gid}:jobs", messages=[message(i) for i in range(size)])
    cache.keep(gid, conv)
    await cache.save(counted, gid, conv)

    async def save() -> None:
        if mode == "rows":
            await cache.save(counted, gid, conv)
        else:
            # The save before rows: the whole conversation as one JSON text.
            await counted.save_transcript(gid, "jobs", conv.model_dump_json(), [])

    cpu: list[float] = []
    wall: list[float] = []
    sent: list[int] = []
    for turn in range(turns):
        start = len(conv.messages)
        conv.messages += [message(start + i) for i in range(ADDED)]
        conv.meta["cursor"] = f"m{start + turn}"
        counted.sent = 0
        c0, w0 = time.process_time(), time.perf_counter()
        await save()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        sent.append(counted.sent)
    await store.delete_group(gid)
    return cpu, wall, sent


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        store = open_store(args.store, data_dir=Path(tmp), redis_prefix=prefix)
        try:
            print(f"store: {'Redis' if args.store else 'embedded'}; {args.turns} saves a run")
            print(
                f"{'messages':>8} {'pair':>4}   {'CPU ms rows / whole':>20}   "
                f"{'wall ms rows / whole':>21}   {'KB sent rows / whole':>21}"
            )
            for size in args.sizes:
                for pair in range(args.pairs):
                    order = ("rows", "whole") if pair % 2 == 0 else ("whole", "rows")
                    got = {mode: await run(store, mode, size, args.turns) for mode in order}
                    (rc, rw, rs), (wc, ww, ws) = got["rows"], got["whole"]
                    med = statistics.median
                    print(
                        f"{size:>8} {pair + 1:>4}   {med(rc) * 1e3:>8.2f} / {med(wc) * 1e3:>8.2f}"
                        f"   {med(rw) * 1e3:>8.2f} / {med(ww) * 1e3:>9.2f}"
                        f"   {med(rs) / 1e3:>8.1f} / {med(ws) / 1e3:>9.1f}"
                    )
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 2000])
    parser.add_argument("--turns", type=int, default=20, help="saves timed per run")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--store", default=None, help="a redis:// URL (default: embedded)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
