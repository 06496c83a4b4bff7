"""Scale benchmark: many groups of 5 VPs created and driven on one machine.

Starts ``yeaft serve`` (its own local Ray instance, the offline model with a
fixed time to first token, the embedded store unless ``--store``) and, for
each step (default 100, 300 and 1,000 groups), creates groups up to that
count, each with a roster of 5 VPs, and drives all of them at once: every
group is asked ``--rounds`` times, one VP mentioned per message (its roster
in turn), each next message as soon as the previous reply ended. It reports
per step:

- memory (USS: the memory only that process holds) of the gateway process,
  the coordinator shards and the VP actors, and per group (the growth since
  the previous step over the groups added);
- turns per second sustained while every group is driven;
- the p50/p99 overhead on time to first token: the client-observed time
  from sending to the first token, minus the model's own time to first token.

VP actors are one per persona (``vp:<persona>``), shared by every group
whose roster names it, not one per (group, VP): with the 14 built-in
personas, 1,000 groups of 5 VPs are served by 14 VP actors and the
coordinator shards. Rosters rotate through the personas so every actor
serves about the same number of groups.

    python bench/scale.py [--steps 100,300,1000] [--rounds 3] [--store redis://...]
    python bench/scale.py --quick     # 20 and 60 groups, one round
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chat_client import Client, login, new_group
from bench.serve import Server
from bench.stats import pct

VPS_PER_GROUP = 5
# A connection sends at most YEAFT_CHAT_IN_FLIGHT (8) chats at once; each
# client watches and drives this many groups, one message outstanding each.
GROUPS_PER_CLIENT = 8
MB = 1024 * 1024


@dataclass
class Memory:
    gateway: float
    coordinators: list[float]
    vps: list[float]

    @property
    def total(self) -> float:
        return self.gateway + sum(self.coordinators) + sum(self.vps)


@dataclass
class Step:
    groups: int
    turns: int
    seconds: float
    overheads: list[float]
    memory: Memory

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.seconds


def _uss_mb(pid: int) -> float:
    """Memory only this process holds (private pages, from /proc/PID/smaps_rollup), in MB."""
    kb = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kb += int(line.split()[1])
    return kb / 1024


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def measure_memory(server_pid: int) -> Memory:
    """USS of the gateway process and of every actor process its Ray instance runs."""
    coordinators: list[float] = []
    vps: list[float] = []
    for pid in _descendants(server_pid):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            if title.startswith("ray::CoordinatorWorker"):
                coordinators.append(_uss_mb(pid))
            elif title.startswith("ray::VPActor"):
                vps.append(_uss_mb(pid))
        except OSError:
            continue
    return Memory(_uss_mb(server_pid), coordinators, vps)


def roster_of(index: int, personas: list[str]) -> list[str]:
    return [personas[(index + k) % len(personas)] for k in range(VPS_PER_GROUP)]


async def drive(
    watcher: dict[str, Client], groups: list[tuple[str, list[str]]], rounds: int, ttft: float
) -> tuple[int, float, list[float]]:
    """Every group asked ``rounds`` times at once; returns (turns, seconds, TTFT overheads)."""
    rng = random.Random(len(groups))
    reply_spread = 0.5

    async def busy(index: int, gid: str, roster: list[str]) -> list[float]:
        client = watcher[gid]
        await asyncio.sleep(rng.uniform(0, reply_spread))  # starts spread, not in lockstep
        got = []
        for r in range(rounds):
            vp = roster[(index + r) % len(roster)]
            got.append(await client.ask(gid, f"@{vp} round {r}") - ttft)
        return got

    started = time.perf_counter()
    per_group = await asyncio.gather(*(busy(i, g, r) for i, (g, r) in enumerate(groups)))
    seconds = time.perf_counter() - started
    return len(groups) * rounds, seconds, [x for got in per_group for x in got]


async def warm_up(
    watcher: dict[str, Client], groups: list[tuple[str, list[str]]], ttft: float
) -> None:
    """One turn per persona; a loaded machine may take minutes to start the actor processes."""
    for attempt in range(10):
        try:
            await drive(watcher, groups, 1, ttft)
            return
        except TimeoutError:
            print(f"warm-up: actors still starting (try {attempt + 1})", flush=True)
    raise TimeoutError("the VP actors did not start")


async def run(args: argparse.Namespace) -> list[Step]:
    from personas.loader import load_personas

    personas = load_personas(None).ids()
    model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    server = Server(
        model,
        args.store,
        extra_env={
            # Every group busy at once is the point: no BUSY refusals.
            "YEAFT_MAX_VP_PENDING_TURNS": "100000",
            # Clients whose groups wait through a slow warm-up stay connected.
            "YEAFT_IDLE_TIMEOUT": "3600",
            "YEAFT_LOG_LEVEL": "warning",
            # On a loaded machine the raylet takes longer than Ray's default 30 s to register.
            "RAY_raylet_start_wait_time_s": "120",
        },
    )
    steps: list[Step] = []
    clients: list[Client] = []
    watcher: dict[str, Client] = {}
    try:
        await server.start(attempts=3000)  # a loaded machine starts Ray slowly
        token, http = await login(server.url, server.password)
        groups: list[tuple[str, list[str]]] = []
        for target in args.steps:
            while len(groups) < target:
                roster = roster_of(len(groups), personas)
                groups.append((await new_group(http, f"g{len(groups)}", roster), roster))
            # New groups are watched by new clients, GROUPS_PER_CLIENT each.
            for first in range(len(watcher), len(groups), GROUPS_PER_CLIENT):
                chunk = [g for g, _ in groups[first : first + GROUPS_PER_CLIENT]]
                client = Client(server.url, token)
                await client.connect(chunk)
                clients.append(client)
                watcher.update(dict.fromkeys(chunk, client))
            if not steps:  # start every actor before the first timing
                await warm_up(watcher, groups[: len(personas)], args.ttft)
            turns, seconds, overheads = await drive(watcher, groups, args.rounds, args.ttft)
            memory = await asyncio.to_thread(measure_memory, server.proc.pid)
            steps.append(Step(len(groups), turns, seconds, overheads, memory))
            print_step(steps)
        await http.aclose()
    finally:
        for client in clients:
            await client.close()
        server.stop()
    return steps


def print_step(steps: list[Step]) -> None:
    step = steps[-1]
    m = step.memory
    if len(steps) == 1:
        print(
            f"{'groups':>6} {'turns/s':>8} {'ttft+ p50 ms':>12} {'p99 ms':>7} "
            f"{'gateway MB':>10} {'coord MB':>9} {'VP actors':>9} {'MB/VP':>6} "
            f"{'total MB':>9} {'MB/group':>9}",
            flush=True,
        )
        per_group = m.total / step.groups
    else:
        before = steps[-2]
        per_group = (m.total - before.memory.total) / (step.groups - before.groups)
    mean_vp = sum(m.vps) / len(m.vps) if m.vps else 0.0
    print(
        f"{step.groups:>6} {step.turns_per_s:>8.1f} {pct(step.overheads, 0.5) * 1000:>12.1f} "
        f"{pct(step.overheads, 0.99) * 1000:>7.1f} {m.gateway:>10.1f} {sum(m.coordinators):>9.1f} "
        f"{len(m.vps):>9} {mean_vp:>6.1f} {m.total:>9.1f} {per_group:>9.3f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", default="100,300,1000", help="group counts, ascending")
    parser.add_argument("--rounds", type=int, default=3, help="messages per group per step")
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=100)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    parser.add_argument("--quick", action="store_true", help="20 and 60 groups, one round")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.rounds = "20,60", 1
    args.steps = sorted(int(s) for s in args.steps.split(","))
    print(
        f"model offline ttft={args.ttft}s tps={args.tps} tokens={args.tokens}; "
        f"store {args.store or 'embedded'}; {args.rounds} rounds; "
        f"{VPS_PER_GROUP} VPs per group; load before: {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    asyncio.run(run(args))
    print(f"load after: {os.getloadavg()[0]:.2f} (1-min average, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
