"""Fan-out benchmark: time until a message to 1, 5 and 16 VPs is fully answered.

Every VP runs the offline model at a fixed latency (default 200 ms to the
first token, 100 tokens/s, 60 tokens: 0.8 s per reply), so the figures
measure the framework, not a model. A sequential round-robin group chat
would take n times the one-VP time; the target is 1.1x or less at 5 VPs.

    python bench/fanout.py [--store redis://127.0.0.1:6379/0] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coordinator.commands import DeleteGroup, Ingest, VPStatsOf, WaitIdle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import start_ray

NAMESPACE = "yeaft-bench"


def bench_personas(directory: Path, count: int) -> list[str]:
    """The built-in roster, topped up with plain bench personas to ``count``."""
    from personas.loader import load_personas, new_persona_file

    ids = load_personas(None).ids()
    extra = 0
    while len(ids) < count:
        extra += 1
        pid = f"bench{extra:02d}"
        new_persona_file(directory, pid, f"Bench {extra}", "benchmark persona")
        ids.append(pid)
    return ids[:count]


async def measure(
    model: str, store_url: str | None, runs: int, sizes: list[int], vp_hosts: int
) -> None:
    from actors.config import RuntimeConfig
    from coordinator.runtime import Runtime
    from engine.settings import EngineConfig
    from protocol import GroupSettingsPatch
    from store import StoreConfig

    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp) / "personas"
        roster = bench_personas(pdir, max(sizes))
        rt = Runtime(
            RuntimeConfig(
                namespace=NAMESPACE,
                prefix="bench-",
                store=StoreConfig(store_url, Path(tmp), redis_prefix="bench"),
                personas_dir=str(pdir),
                # The offline model only: nothing from the environment applies.
                engine=EngineConfig(model=model, offline_tps=0),
                vp_hosts=vp_hosts,
            )
        )
        group = await rt.create_group("bench", roster, settings=GroupSettingsPatch(fanout_cap=16))
        try:
            await rt.send(VPStatsOf(group.id))  # start every actor before timing
            await rt.send(Ingest(group.id, "bench", "@all warm up"))
            await rt.send(WaitIdle(group.id))
            timings: dict[int, list[float]] = {}
            for n in sizes:
                mentions = " ".join(f"@{vp}" for vp in roster[:n])
                for i in range(runs):
                    started = time.perf_counter()
                    out = await rt.send(Ingest(group.id, "bench", f"{mentions} question {i}"))
                    assert len(out.dispatched) == n, out
                    assert await rt.send(WaitIdle(group.id, 120))
                    timings.setdefault(n, []).append(time.perf_counter() - started)
            report(f"{model}; VP hosts {vp_hosts}", store_url, runs, timings)
        finally:
            # Leave nothing behind in a shared Redis.
            await rt.send(DeleteGroup(group.id))
            rt.shutdown()
            await rt.aclose()


def report(model: str, store_url: str | None, runs: int, timings: dict[int, list[float]]) -> None:
    base = statistics.median(timings[min(timings)])
    print(f"model {model}; store {store_url or 'embedded'}; median of {runs} runs")
    print(f"{'VPs':>4} {'median s':>9} {'p90 s':>7} {'ratio':>6} {'sequential':>11}")
    for n, values in sorted(timings.items()):
        med = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        print(f"{n:>4} {med:>9.3f} {p90:>7.3f} {med / base:>6.2f} {n * base:>10.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=100)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    parser.add_argument(
        "--vp-hosts", type=int, default=0, help="VP processes (0: one per VP; N: N pooled)"
    )
    args = parser.parse_args()
    model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    start_ray(NAMESPACE)
    asyncio.run(measure(model, args.store, args.runs, [1, 5, 16], args.vp_hosts))


if __name__ == "__main__":
    main()
