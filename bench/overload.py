"""Overload benchmark: many clients just under the rate limit against a slow model.

Starts ``yeaft serve`` in a subprocess (embedded store by default, the
offline model at 0.2 s to the first token, 100 tokens/s, 60 tokens: 0.8 s a
reply) with the default limits, and drives it from this process over real
WebSockets, on loopback only: ``--clients`` people (one user each), each in a
group of their own with one VP (five personas taken in turn), each sending
chat messages at ``--rate`` per second (just under the per-connection limit
of 20) for ``--duration`` seconds; every client also sends an application
ping every 2 s from start to end (a client that stops would be closed as
idle). Then it waits at most ``--drain`` seconds for the admitted messages'
answers.

It prints how many messages were acknowledged and how many refused
(``busy``: the group's or the VP's bound, or the connection's in-flight
bound; ``rate_limited``), the largest backlog the clients saw (acknowledged,
answer not started: admission bounds it), the time from sending to the ack
and to the first token of the acknowledged messages (first and second half
of the run apart: the first token comes after the backlog ahead of it, so
it must not grow with the run's length unless turns get slower), the ping
round trips while sending (control frames are not queued behind chat
frames), how connections closed, and the resident memory of the server's
whole process tree (``yeaft serve``, Ray's GCS and raylet, the coordinator
and VP actors: the sum over every descendant) at the start, at its peak
(sampled every 0.5 s), when sending stops and after the drain. ``--root``
runs the server from another checkout, to compare with an older commit.

    python bench/overload.py [--clients 50] [--rate 19] [--duration 20] [--store redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# After the path is set:
from bench.overload_client import Client  # noqa: E402
from bench.proctree import rss_of  # noqa: E402
from bench.serve import free_port, stop_process, wait_healthy  # noqa: E402
from bench.stats import pct  # noqa: E402

ROSTER = ["linus", "steve", "martin", "dieter", "kent"]


# -- the server's memory and the clients' backlog, sampled ---------------------
class Watch:
    """Every half second: the server tree's RSS and the clients' backlog; keeps the peaks.

    The backlog is what the clients see: messages acknowledged whose answer
    has not started yet.
    """

    def __init__(self, pid: int, backlog: Callable[[], int]) -> None:
        self.pid = pid
        self.backlog = backlog
        self.peak = 0
        self.peak_backlog = 0
        self.processes = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> int:
        rss, count = rss_of(self.pid)
        self.peak = max(self.peak, rss)
        self.processes = max(self.processes, count)
        return rss

    async def _run(self) -> None:
        while True:
            self.peak_backlog = max(self.peak_backlog, self.backlog())
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(0.5)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


# -- the server ---------------------------------------------------------------------
class Server:
    """``yeaft serve`` in a subprocess with ``users`` created beforehand; stopped by its pid."""

    def __init__(self, args: argparse.Namespace, model: str, users: list[str]) -> None:
        self.root = Path(args.root).resolve() if args.root else ROOT
        self.tmp = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secret = secrets.token_urlsafe(48)
        self.users = users
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
        }
        self.env.update(
            YEAFT_DATA_DIR=self.tmp.name,
            YEAFT_MODEL=model,
            # Only the model string's tps paces the model, never serve's default.
            YEAFT_OFFLINE_TPS="0",
            YEAFT_JWT_SECRET=self.secret,
            YEAFT_REDIS_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
        )
        if args.store:
            self.env["YEAFT_REDIS_URL"] = args.store
        if args.group_bound:
            self.env["YEAFT_MAX_GROUP_PENDING_TURNS"] = str(args.group_bound)
        self.proc: subprocess.Popen[bytes] | None = None

    def settings(self) -> Any:
        from gateway.settings import GatewaySettings

        return GatewaySettings(
            data_dir=Path(self.tmp.name),
            jwt_secret=self.secret,
            redis_url=self.env.get("YEAFT_REDIS_URL"),
            redis_prefix=self.env["YEAFT_REDIS_PREFIX"],
        )

    async def add_users(self) -> None:
        from gateway import users

        # Nobody logs in with these passwords: cheap hashes keep set-up short.
        users.DEFAULT_PARAMS = users.ScryptParams(n=2**10, r=8, p=1)
        store = self.settings().open()
        try:
            for name in self.users:
                await users.add_user(store, name, secrets.token_urlsafe(16))
        finally:
            await store.close()

    def token(self, username: str) -> str:
        from gateway.auth import issue_token

        return issue_token(self.settings(), username)

    def launch(self) -> int:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--port", str(self.port)],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self.proc.pid

    async def start(self) -> None:
        await self.add_users()
        self.launch()
        await wait_healthy(self.url, 600)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.tmp.cleanup()


# -- the run ------------------------------------------------------------------------
def gb(n: int) -> str:
    return f"{n / 2**30:.2f} GB"


async def setup(server: Server, names: list[str]) -> list[Client]:
    clients = []
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        for i, name in enumerate(names):
            token = server.token(name)
            res = await http.post(
                "/api/groups",
                json={"name": f"g{i}", "roster": [ROSTER[i % len(ROSTER)]]},
                headers={"Authorization": f"Bearer {token}"},
            )
            res.raise_for_status()
            clients.append(Client(server.url, token, str(res.json()["id"])))
    for client in clients:
        await client.connect()
    return clients


async def warm_up(clients: list[Client]) -> None:
    """One answered message per group: every actor is up before anything is measured."""
    for client in clients:
        client.expected = 1
        await client.send_chat("warm up")
    await asyncio.wait_for(asyncio.gather(*(c.answered.wait() for c in clients)), 120)
    for client in clients:
        client.sent_at.clear()
        client.acked.clear()
        client.ack_times.clear()
        client.replied = 0
        client.all_replied.clear()
        client.first_tokens.clear()
        client.results = 0
        client.failed.clear()
        client.expected = 0
        client.answered.clear()


async def main_async(args: argparse.Namespace) -> None:
    model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    names = [f"user{i:03d}" for i in range(args.clients)]
    # Others' work on a shared machine skews every figure: say how busy it was.
    print(f"1-min load average before: {os.getloadavg()[0]:.1f}", flush=True)
    server = Server(args, model, names)
    await server.start()
    assert server.proc is not None
    clients: list[Client] = []
    memory = Watch(server.proc.pid, lambda: sum(c.backlog() for c in clients))
    try:
        clients = await setup(server, names)
        await warm_up(clients)
        rss_start = await asyncio.to_thread(memory.sample)
        memory.peak = rss_start
        memory.start()
        began = time.perf_counter() + 0.5
        await asyncio.gather(*(c.run(args.rate, args.duration, began) for c in clients))
        sending = time.perf_counter() - began
        rss_sent = await asyncio.to_thread(memory.sample)
        # Acks of the chats still in flight come in after the last send.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(c.all_replied.wait() for c in clients)), 60)
        for client in clients:
            client.expected = len(client.acked)
            if client.results >= client.expected:
                client.answered.set()
        drained_in = time.perf_counter()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(c.answered.wait() for c in clients)), args.drain
            )
        except TimeoutError:
            pass
        drained_in = time.perf_counter() - drained_in
        rss_end = await asyncio.to_thread(memory.sample)
        memory.stop()
        for client in clients:
            await client.close()
    finally:
        memory.stop()
        server.stop()
    report(args, model, clients, sending, drained_in, memory, (rss_start, rss_sent, rss_end))


def report(
    args: argparse.Namespace,
    model: str,
    clients: list[Client],
    sending: float,
    drained_in: float,
    memory: Watch,
    rss: tuple[int, int, int],
) -> None:
    sent = sum(len(c.sent_at) for c in clients)
    acked = sum(len(c.acked) for c in clients)
    refusals: Counter[str] = Counter()
    for client in clients:
        refusals.update(client.refusals)
    answered = [t for c in clients for t in c.ttfts()]
    half = min(s for s, _ in answered) + sending / 2 if answered else 0.0
    first = [t for s, t in answered if s < half]
    second = [t for s, t in answered if s >= half]
    pings = [p for c in clients for p in c.pings]
    acks = [a for c in clients for a in c.ack_times]
    closes = Counter(c.closed_how for c in clients if c.closed_how)
    print(
        f"{args.clients} clients x {args.rate:g} messages/s for {args.duration:g} s; {model}; "
        f"store {args.store or 'embedded'}; 1-min load average at the end "
        f"{os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)"
    )
    print(
        f"sent {sent}: acked {acked} ({acked / sending:.1f}/s), "
        + ", ".join(f"{k} {v}" for k, v in sorted(refusals.items()))
    )
    failed: Counter[str] = Counter()
    for client in clients:
        failed.update(client.failed)
    print(
        f"largest backlog (acked, answer not started): {memory.peak_backlog}; "
        f"answered {len(answered)} of {acked} acked ({drained_in:.1f} s of drain); "
        f"closes: {dict(closes) or 'none'}; failed turns: {dict(failed) or 'none'}"
    )
    everything = [t for _, t in answered]
    for label, values in (("all", everything), ("1st half", first), ("2nd half", second)):
        if values:
            print(
                f"time to first token, {label:8s}: p50 {statistics.median(values):6.2f} s   "
                f"p90 {pct(values, 0.9):6.2f} s   p99 {pct(values, 0.99):6.2f} s   "
                f"max {max(values):6.2f} s   (n={len(values)})"
            )
    if acks:
        print(
            f"ack after sending:   p50 {statistics.median(acks) * 1000:6.1f} ms   "
            f"p99 {pct(acks, 0.99) * 1000:6.1f} ms   max {max(acks) * 1000:6.1f} ms"
        )
    if pings:
        print(
            f"ping round trip: p50 {statistics.median(pings) * 1000:.1f} ms   "
            f"p99 {pct(pings, 0.99) * 1000:.1f} ms   max {max(pings) * 1000:.1f} ms   "
            f"(n={len(pings)})"
        )
    start, sent_rss, end = rss
    print(
        f"server process tree RSS ({memory.processes} processes): start {gb(start)}, "
        f"peak {gb(memory.peak)}, end of sending {gb(sent_rss)}, after drain {gb(end)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=19.0, help="messages/s per client")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of sending")
    parser.add_argument("--drain", type=float, default=120.0, help="longest wait for answers")
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=100)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--group-bound", type=int, default=0, help="0: the server default")
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    parser.add_argument(
        "--root", default=None, help="run the server from this checkout (to compare commits)"
    )
    args = parser.parse_args()
    if not 0 < args.duration <= 300 or not 0 < args.rate <= 100 or not 0 < args.clients <= 500:
        parser.error("keep --duration <= 300 s, --rate <= 100/s and --clients <= 500")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
