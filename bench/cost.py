"""Cost benchmark: CPU, memory and start-up of ``yeaft serve`` as a whole process tree.

For each roster size (1, 5 and 16 VPs by default) it starts ``yeaft serve``
(embedded store by default, the offline model at a fixed pace), and reports:

- ready: seconds from starting the process to ``/healthz`` answering;
- first: seconds from then until the first ``@all`` message is fully
  answered (group created and every VP's turn ended), and a warm message's
  time for comparison; below the row, that first message's seconds to the
  first VP's first token and to the last VP's, from when it was sent;
- token / tokens: for a warm ``@all`` message, seconds to the first VP's
  first token and to the last VP's first token (flat as VPs are added,
  when the VPs really answer side by side);
- CPU per message: user+system seconds of the server's whole process tree
  (gateway, Ray, actor workers) per fully answered ``@all`` message, and
  the same split by kind of process (the largest six);
- idle CPU: CPU seconds per second of the tree while a client watches the
  group and nothing happens;
- peak RSS: the largest sum of resident memory over the tree, sampled every
  0.2 s, and the number of processes;
- idle PSS: the tree's proportional set size at the end of the idle spell
  (a page shared by several processes counted once between them, where a
  sum of RSS counts it in each): the memory the idle instance holds.

The process tree is read from ``/proc`` (Linux). With ``--provider openai``
the VPs call ``bench/model_server.py`` (a local OpenAI-compatible server
with the same timing, in a process of its own, so not counted) through the
real ``openai`` SDK, as ``bench/latency.py --provider openai`` does. With a
Redis store each server writes under a key prefix of its own
(``YEAFT_REDIS_PREFIX=bench-<random>``), deleted when it stops.

    python bench/cost.py [--sizes 1 5 16] [--messages 5] [--store redis://...]
    python bench/cost.py --provider openai [--store redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chat_client import Client, login, new_group
from bench.fanout import bench_personas
from bench.latency import launch
from bench.proctree import cpu_in, pss, tree
from bench.serve import ROOT, Server


class Sampler:
    """Samples the tree's total RSS every 0.2 s and remembers the peak."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak = 0
        self.processes = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            snap = await asyncio.to_thread(tree, self.root)
            rss = sum(r for _, r in snap.values())
            if rss > self.peak:
                self.peak, self.processes = rss, len(snap)
            await asyncio.sleep(0.2)

    def stop(self) -> None:
        self._task.cancel()


def name_of(pid: int) -> str:
    """A short name for a process: Ray's title (ray::X), else its program or module."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "?"
    if not argv:
        return "?"
    if argv[0].startswith("ray::"):
        return argv[0].split()[0]
    scripts = [a for a in argv[1:] if a.endswith(".py")]
    if "-m" in argv:
        return argv[argv.index("-m") + 1]
    return Path(scripts[0] if scripts else argv[0]).name


def breakdown(
    before: dict[int, tuple[float, int]], after: dict[int, tuple[float, int]], per: float
) -> str:
    """CPU seconds of each kind of process between two snapshots, divided by ``per``
    (the seconds of an idle spell, or the messages answered), largest first."""
    spent: dict[str, float] = {}
    for pid, (cpu, _) in after.items():
        name = name_of(pid)
        spent[name] = spent.get(name, 0.0) + (cpu - before.get(pid, (cpu, 0))[0]) / per
    top = sorted(spent.items(), key=lambda kv: -kv[1])[:6]
    return ", ".join(f"{name} {value:.3f}" for name, value in top if value > 0)


async def one_size(args: argparse.Namespace, size: int, roster: list[str]) -> str:
    # A first message on a loaded machine can take longer than the idle timeout.
    env = {"YEAFT_IDLE_TIMEOUT": "3600"}
    if args.vp_hosts is not None:
        env["YEAFT_VP_HOSTS"] = str(args.vp_hosts)
    pace = (args.ttft, args.tps, args.tokens)
    with launch(args, args.provider, False, *pace, env) as (server, models):
        row = await measure(args, server, size, roster)
        if models is not None:
            row += f"\n     model server: {models.stats()['requests']} streamed calls answered"
    return row


async def measure(args: argparse.Namespace, server: Server, size: int, roster: list[str]) -> str:
    pid = server.proc.pid
    sampler = Sampler(pid)
    try:
        await server.start()
        ready = time.perf_counter() - server.created
        token, http = await login(server.url, server.password)
        await asyncio.sleep(args.settle)
        t0 = time.perf_counter()
        gid = await new_group(http, "cost", roster[:size])
        client = Client(server.url, token)
        await client.connect([gid])
        opening = await all_answered(client, gid, size, "@all first")
        first = time.perf_counter() - t0
        warm = [await all_answered(client, gid, size, "@all warm") for _ in range(2)]
        busy0 = tree(pid)
        times = [await all_answered(client, gid, size, f"@all q{i}") for i in range(args.messages)]
        busy1 = tree(pid)
        per_msg = (cpu_in(busy1) - cpu_in(busy0)) / args.messages
        busy = breakdown(busy0, busy1, args.messages)
        await asyncio.sleep(1.0)
        snap0, i0 = tree(pid), time.perf_counter()
        await asyncio.sleep(args.idle)
        snap1, spell = tree(pid), time.perf_counter() - i0
        held = pss(snap1)
        idle = (cpu_in(snap1) - cpu_in(snap0)) / spell
        idle_by = breakdown(snap0, snap1, spell)
        await client.close()
        await http.aclose()
    finally:
        sampler.stop()
    warm_s = statistics.median(a.all_done for a in warm + times)
    first_token = statistics.median(a.first_token for a in warm + times)
    last_token = statistics.median(a.last_first_token for a in warm + times)
    return (
        f"{size:>4} {ready:>8.2f} {first:>8.2f} {warm_s:>8.2f} {first / warm_s:>6.2f} "
        f"{first_token:>9.3f} {last_token:>9.3f} "
        f"{per_msg:>10.3f} {idle:>9.3f} {sampler.peak / 2**20:>9.0f} {sampler.processes:>6}"
        f" {held / 2**20:>12.0f}"
        f"\n     first message: first token {opening.first_token:.3f} s, "
        f"the last VP's {opening.last_first_token:.3f} s"
        f"\n     CPU s per message by process: {busy}"
        f"\n     idle CPU s/s by process: {idle_by}"
    )


@dataclass(frozen=True)
class Answered:
    """One ``@all`` message: seconds from sending it until every VP's turn
    ended, until the first VP's first token, and until the last VP's."""

    all_done: float
    first_token: float
    last_first_token: float


async def all_answered(client: Client, gid: str, size: int, text: str) -> Answered:
    """Send ``text`` and wait until every VP's turn for it ended (``size`` more results)."""
    target = client.results.get(gid, 0) + size
    tokens_before = len(client.first_tokens)
    started = time.perf_counter()
    frame = {"type": "yeaft_session_chat", "groupId": gid, "text": text}
    await client.ws.send(json.dumps(frame | {"clientMessageId": uuid.uuid4().hex}))
    while client.results.get(gid, 0) < target:
        client.result_seen.clear()
        await asyncio.wait_for(client.result_seen.wait(), 300)
    ended = time.perf_counter() - started
    tokens = [t - started for t in client.first_tokens[tokens_before:]] or [math.nan]
    return Answered(ended, min(tokens), max(tokens))


async def main_async(args: argparse.Namespace) -> None:
    model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    if args.provider == "openai":
        model = f"openai:{args.openai_model} (SDK; ttft {args.ttft} s, {args.tps} tok/s, "
        model += f"{args.tokens} tokens)"
    with tempfile.TemporaryDirectory() as tmp:
        roster = bench_personas(Path(tmp), max(args.sizes))
        os.environ["YEAFT_PERSONAS_DIR"] = tmp
        rows = [await one_size(args, n, roster) for n in args.sizes]
    print(
        f"model {model}; store {args.store or 'embedded'}; server {args.server_root}; "
        f"VP hosts {'default' if args.vp_hosts is None else args.vp_hosts}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'VPs':>4} {'ready s':>8} {'first s':>8} {'warm s':>8} {'ratio':>6} "
        f"{'token s':>9} {'tokens s':>9} {'CPU s/msg':>10} {'idle CPU':>9} {'peak MB':>9} "
        f"{'procs':>6} {'idle PSS MB':>12}"
    )
    print("\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=100)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 16])
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle measured")
    parser.add_argument(
        "--settle", type=float, default=0.0, help="seconds between ready and the first message"
    )
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    parser.add_argument("--server-root", type=Path, default=ROOT, help="serve from this checkout")
    parser.add_argument(
        "--vp-hosts", type=int, default=None, help="YEAFT_VP_HOSTS (default: the server's)"
    )
    parser.add_argument(
        "--provider",
        choices=["offline", "openai"],
        default="offline",
        help="openai: the VPs call bench/model_server.py through the openai SDK",
    )
    parser.add_argument("--openai-model", default="gpt-4o-mini", help="a name the registry knows")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
