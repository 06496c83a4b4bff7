"""Wake-up benchmark of the embedded store: blocked readers, writers in other processes.

One process (standing for a gateway) keeps a blocking ``read_events`` open
on each of ``--groups`` groups; two writer processes (standing for VP
actors) append to them at ``--rate`` envelopes/s in all for ``--seconds``.
Reports the reader process's CPU while nothing is written (idle), its CPU
while envelopes arrive, and the delay from an append's start to its reader
waking (p50 / p99).

    python bench/wake.py [--groups 50] [--rate 400] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_WRITER = r"""
import asyncio, sys, time
from pathlib import Path
from protocol import SystemData, YeaftOutput
from store.embedded import EmbeddedStore

async def main(data_dir, groups, rate, seconds):
    store = EmbeddedStore(Path(data_dir))
    end, i = time.time() + seconds, 0
    while time.time() < end:
        gid = groups[i % len(groups)]
        i += 1
        data = SystemData(subtype="notice", detail={"t": time.time()})
        frame = YeaftOutput(conversation_id=gid, group_id=gid, vp_id="w", turn_id="t", data=data)
        await store.append_event(gid, frame)
        await asyncio.sleep(1 / rate)
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2].split(","), float(sys.argv[3]), float(sys.argv[4])))
"""


async def main_async(args: argparse.Namespace) -> None:
    from store.embedded import EmbeddedStore

    with tempfile.TemporaryDirectory() as data_dir:
        store = EmbeddedStore(Path(data_dir))
        groups = [f"g{i}" for i in range(args.groups)]
        delays: list[float] = []

        async def tail(gid: str) -> None:
            after = 0
            while True:
                batch = await store.read_events(gid, after, wait=5)
                now = time.time()
                for event in batch.events:
                    delays.append(now - json.loads(event.text)["data"]["detail"]["t"])
                    after = event.seq

        for gid in groups:
            await store.read_events(gid, 0)
        tasks = [asyncio.create_task(tail(g)) for g in groups]
        await asyncio.sleep(0.5)
        cpu0 = time.process_time()
        await asyncio.sleep(args.idle)
        idle = (time.process_time() - cpu0) / args.idle
        cpu0 = time.process_time()
        half = len(groups) // 2
        writers = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                _WRITER,
                data_dir,
                ",".join(part),
                str(args.rate / 2),
                str(args.seconds),
            )
            for part in (groups[:half], groups[half:])
        ]
        for writer in writers:
            await writer.wait()
        await asyncio.sleep(0.5)
        busy = time.process_time() - cpu0
        for task in tasks:
            task.cancel()
        await store.close()
    delays.sort()
    ms = 1000.0
    p50, p99 = delays[len(delays) // 2], delays[int(len(delays) * 0.99)]
    print(
        f"idle {idle:.4f} CPU-s/s; {len(delays)} envelopes, reader CPU "
        f"{busy / max(1, len(delays)) * ms:.2f} ms each; wake p50 "
        f"{p50 * ms:.1f} ms p99 {p99 * ms:.1f} ms; "
        f"load {os.getloadavg()[0]:.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--rate", type=float, default=400)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--idle", type=float, default=3)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
