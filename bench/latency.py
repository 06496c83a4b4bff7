"""Gateway latency benchmark over real WebSockets.

Starts ``yeaft serve`` in a subprocess (embedded store by default, the
offline model with a fixed time to first token) and measures, from clients
in this process:

1. framework overhead: the client-observed time from sending a message to
   the first token of the reply, minus the model's own time to first token;
   p50 and p99 with one group, then with 200 groups busy at once;
2. throughput: envelopes per second delivered to 100 clients watching one
   group.

Targets (DESIGN.md): p50 <= 10 ms and p99 <= 30 ms for one group; p99 <=
100 ms with 200 groups busy.

    python bench/latency.py [--groups 200] [--rounds 3] [--store redis://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
ROSTER = ["linus", "steve", "martin", "dieter", "kent"]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_healthy(url: str, attempts: int) -> None:
    """Wait until the server at ``url`` answers ``/healthz`` (0.1 s between tries)."""
    async with httpx.AsyncClient() as http:
        for _ in range(attempts):
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the server did not start")


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """Terminate a server process, and kill it if it is still there after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


class Server:
    """``yeaft serve`` in a subprocess, stopped by its own pid."""

    def __init__(
        self,
        model: str,
        store: str | None,
        root: Path = ROOT,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
        }
        env.update(
            PYTHONPATH=str(root),
            YEAFT_DATA_DIR=self.tmp.name,
            YEAFT_MODEL=model,
            # Only the model string's tps paces the model, never serve's default.
            YEAFT_OFFLINE_TPS="0",
            YEAFT_RATE_LIMIT_PER_S="1000",
            YEAFT_RATE_LIMIT_BURST="1000",
            YEAFT_USER_RATE_LIMIT_PER_S="100000",
            YEAFT_USER_RATE_LIMIT_BURST="100000",
            YEAFT_REDIS_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
        )
        if store:
            env["YEAFT_REDIS_URL"] = store
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "serve", "--port", str(self.port)],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.password = ""

    async def start(self, attempts: int = 1200) -> None:
        assert self.proc.stdout is not None
        for _ in range(10):
            line = await asyncio.to_thread(self.proc.stdout.readline)
            found = re.search(r"password '([^']+)'", line)
            if found:
                self.password = found.group(1)
                break
        await wait_healthy(self.url, attempts)

    def stop(self) -> None:
        stop_process(self.proc)
        self.tmp.cleanup()


class Client:
    """One WebSocket client that times messages to their first token."""

    def __init__(self, url: str, token: str) -> None:
        self.ws_url = url.replace("http", "ws", 1) + "/ws"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.ws: Any = None
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.turn_of: dict[str, str] = {}
        self.seen_turns: set[str] = set()
        self.done: dict[str, asyncio.Event] = {}
        self.envelopes = 0
        self.results: dict[str, int] = {}  # turn results seen, per group
        self.result_seen = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, groups: list[str]) -> None:
        self.ws = await websockets.connect(
            self.ws_url, additional_headers=self.headers, max_size=None
        )
        for gid in groups:
            await self.ws.send(json.dumps({"type": "subscribe", "groupId": gid}))
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            self.envelopes += "seq" in frame
            if frame.get("type") != "yeaft_output":
                continue
            gid, turn, data = frame["groupId"], frame["turnId"], frame["data"]
            if data["type"] == "assistant" and turn not in self.seen_turns:
                self.seen_turns.add(turn)
                fut = self.waiting.pop(gid, None)
                if fut is not None and not fut.done():
                    fut.set_result(time.perf_counter())
            elif data["type"] == "result":
                self.results[gid] = self.results.get(gid, 0) + 1
                self.result_seen.set()
                if gid in self.done:
                    self.done[gid].set()

    async def ask(self, gid: str, text: str) -> float:
        """Seconds from sending to the first token; waits for the turn to end."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[gid] = fut
        self.done[gid] = asyncio.Event()
        started = time.perf_counter()
        await self.ws.send(
            json.dumps(
                {
                    "type": "yeaft_session_chat",
                    "groupId": gid,
                    "text": text,
                    "clientMessageId": uuid.uuid4().hex,
                }
            )
        )
        first = await asyncio.wait_for(fut, 60)
        await asyncio.wait_for(self.done[gid].wait(), 120)
        return first - started

    async def close(self) -> None:
        if self._reader:
            self._reader.cancel()
        await self.ws.close()


async def login(url: str, password: str) -> tuple[str, httpx.AsyncClient]:
    http = httpx.AsyncClient(base_url=url, timeout=60)
    res = await http.post("/api/login", json={"username": "admin", "password": password})
    res.raise_for_status()
    token = res.json()["token"]
    http.headers["Authorization"] = f"Bearer {token}"
    return token, http


async def new_group(http: httpx.AsyncClient, name: str, roster: list[str]) -> str:
    res = await http.post("/api/groups", json={"name": name, "roster": roster})
    res.raise_for_status()
    return str(res.json()["id"])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_group(
    url: str, token: str, http: httpx.AsyncClient, ttft: float, n: int
) -> list[float]:
    gid = await new_group(http, "one", ["linus"])
    client = Client(url, token)
    await client.connect([gid])
    await client.ask(gid, "@linus warm up")
    overheads = [await client.ask(gid, f"@linus question {i}") - ttft for i in range(n)]
    if os.environ.get("BENCH_DEBUG"):
        print([round(x * 1000, 1) for x in overheads])
    await client.close()
    return overheads


async def many_groups(
    url: str,
    token: str,
    http: httpx.AsyncClient,
    ttft: float,
    groups: int,
    rounds: int,
    reply_s: float,
) -> list[float]:
    """Keep ``groups`` groups busy: each client asks again as soon as its turn ends.

    Starts are spread over one reply's length, so at any moment about
    ``groups`` turns are in flight, streaming, as in a busy deployment.
    """
    ids = [await new_group(http, f"g{i}", [ROSTER[i % len(ROSTER)]]) for i in range(groups)]
    clients = [Client(url, token) for _ in ids]
    for client, gid in zip(clients, ids, strict=True):
        await client.connect([gid])
    await asyncio.gather(*(c.ask(g, "warm up") for c, g in zip(clients, ids, strict=True)))
    rng = random.Random(7)

    async def busy(client: Client, gid: str) -> list[float]:
        await asyncio.sleep(rng.uniform(0, reply_s))
        return [await client.ask(gid, f"round {r}") - ttft for r in range(rounds)]

    got = await asyncio.gather(*(busy(c, g) for c, g in zip(clients, ids, strict=True)))
    for client in clients:
        await client.close()
    return [x for per_client in got for x in per_client]


async def fan_in(url: str, token: str, http: httpx.AsyncClient, watchers: int) -> tuple[int, float]:
    gid = await new_group(http, "watched", ["linus"])
    clients = [Client(url, token) for _ in range(watchers)]
    for client in clients:
        await client.connect([gid])
    speaker = clients[0]
    await speaker.ask(gid, "@linus warm up")
    for client in clients[1:]:
        client.done[gid] = asyncio.Event()
    before = sum(c.envelopes for c in clients)
    started = time.perf_counter()
    await speaker.ask(gid, "@linus talk for a while")
    # Every watcher has the whole turn once it has seen the turn's result.
    await asyncio.gather(*(c.done[gid].wait() for c in clients[1:]))
    elapsed = time.perf_counter() - started
    delivered = sum(c.envelopes for c in clients) - before
    for client in clients:
        await client.close()
    return delivered, elapsed


async def main_async(args: argparse.Namespace) -> None:
    model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    server = Server(model, args.store, args.server_root)
    try:
        await server.start()
        token, http = await login(server.url, server.password)
        single = await one_group(server.url, token, http, args.ttft, args.messages)
        reply_s = args.ttft + args.tokens / args.tps
        busy = await many_groups(
            server.url, token, http, args.ttft, args.groups, args.rounds, reply_s
        )
        await http.aclose()
    finally:
        server.stop()
    throughput_server = Server(
        f"offline:default?tokens={args.stream_tokens}", args.store, args.server_root
    )
    try:
        await throughput_server.start()
        token, http = await login(throughput_server.url, throughput_server.password)
        delivered, elapsed = await fan_in(throughput_server.url, token, http, args.watchers)
        await http.aclose()
    finally:
        throughput_server.stop()
    ms = 1000.0
    print(f"model {model}; store {args.store or 'embedded'}; server {args.server_root}")
    print(
        f"overhead, 1 group:     p50 {statistics.median(single) * ms:6.1f} ms   "
        f"p99 {pct(single, 0.99) * ms:6.1f} ms   (n={len(single)}; target 10 / 30)"
    )
    print(
        f"overhead, {args.groups} groups:  p50 {statistics.median(busy) * ms:6.1f} ms   "
        f"p99 {pct(busy, 0.99) * ms:6.1f} ms   (n={len(busy)}; target p99 100)"
    )
    print(
        f"throughput: {delivered} envelopes to {args.watchers} clients in {elapsed:.2f} s = "
        f"{delivered / elapsed:,.0f} envelopes/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft", type=float, default=0.2)
    parser.add_argument("--tps", type=float, default=100)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--watchers", type=int, default=100)
    # The throughput turn streams as fast as the model can (no pauses), long
    # enough that delivery to the watchers, not the model, sets the pace.
    parser.add_argument("--stream-tokens", type=int, default=20000)
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    parser.add_argument(
        "--server-root",
        type=Path,
        default=ROOT,
        help="serve from this checkout (to compare two commits with one client)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
