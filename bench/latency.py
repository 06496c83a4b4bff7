"""Gateway latency benchmark over real WebSockets.

Starts ``yeaft serve`` in a subprocess (embedded store by default, the
offline model with a fixed time to first token) and measures, from clients
in this process:

1. framework overhead: the client-observed time from sending a message to
   the first token of the reply, minus the model's own time to first token;
   p50 and p99 with one group, then with 200 groups busy at once;
2. throughput: envelopes per second delivered to 100 clients watching one
   group;
3. cost: CPU seconds of the server's process tree (the server and every
   process descended from it, read from ``/proc``: for ``yeaft serve`` the
   gateway, Ray and the actor workers; never the model server or the
   clients) per message in each of the two latency phases (warm-ups left
   out; what the tree burns idle meanwhile counts), and per 1,000 envelopes
   delivered in the throughput phase.

Targets (DESIGN.md): p50 <= 10 ms and p99 <= 30 ms for one group; p99 <=
100 ms with 200 groups busy.

Modes (every one takes the same sizes and model timing options):

``--provider offline`` (default)
    the VPs run the built-in offline model at ``--ttft``/``--tps``/``--tokens``.
``--provider openai``
    the VPs go through the real ``openai`` SDK to ``bench/model_server.py``,
    a local OpenAI-compatible streaming server in a process of its own with
    the same timing (``OPENAI_BASE_URL`` points at it, ``OPENAI_API_KEY`` is
    a dummy, ``YEAFT_MODEL=openai:<--openai-model>``). The throughput phase
    gets a second model server that streams ``--stream-tokens`` without pauses.
``--floor``
    ``bench/floor.py`` (a minimal relay: no Ray, actors, store or
    authentication; the ``openai`` SDK to the same model server) instead of
    ``yeaft serve``; implies ``--provider openai``.
``--compare-tracing [--pairs N]``
    ``yeaft serve`` without traces, then with every span sent over OTLP to a
    local sink (``bench/otlp_sink.py``), N times alternately, then each
    figure as a ratio of traced to untraced (target: at most 1.05).
``--compare-floor [--pairs N]``
    the floor, then ``yeaft serve`` with ``--provider openai``, N times
    alternately (default 1), each run printed, then each figure as a ratio
    of ``yeaft serve`` to the floor (the median of the pairs' ratios).

    python bench/latency.py [--groups 200] [--rounds 3] [--store redis://...]
    python bench/latency.py --provider openai [--openai-model gpt-4o-mini]
    python bench/latency.py --floor
    python bench/latency.py --compare-floor --pairs 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chat_client import Client, login, new_group
from bench.model_server import ModelServer
from bench.otlp_sink import OtlpSink
from bench.serve import FLOOR, ROOT, Server
from bench.stats import pct

ROSTER = ["linus", "steve", "martin", "dieter", "kent"]


Cpu = Callable[[], float]
"""CPU seconds of the server's process tree so far."""


async def one_group(
    url: str, token: str, http: httpx.AsyncClient, ttft: float, n: int, cpu: Cpu
) -> tuple[list[float], float]:
    """Overheads of ``n`` messages to one VP in one group, and the server's CPU s per message."""
    gid = await new_group(http, "one", ["linus"])
    client = Client(url, token)
    await client.connect([gid])
    await client.ask(gid, "@linus warm up")
    cpu0 = cpu()
    overheads = [await client.ask(gid, f"@linus question {i}") - ttft for i in range(n)]
    per_message = (cpu() - cpu0) / n
    if os.environ.get("BENCH_DEBUG"):
        print([round(x * 1000, 1) for x in overheads])
    await client.close()
    return overheads, per_message


async def many_groups(
    url: str,
    token: str,
    http: httpx.AsyncClient,
    ttft: float,
    groups: int,
    rounds: int,
    reply_s: float,
    cpu: Cpu,
) -> tuple[list[float], float]:
    """Keep ``groups`` groups busy: each client asks again as soon as its turn ends.

    Starts are spread over one reply's length, so at any moment about
    ``groups`` turns are in flight, streaming, as in a busy deployment.
    Returns the overheads and the server's CPU seconds per message.
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

    cpu0 = cpu()
    got = await asyncio.gather(*(busy(c, g) for c, g in zip(clients, ids, strict=True)))
    per_message = (cpu() - cpu0) / (groups * rounds)
    for client in clients:
        await client.close()
    return [x for per_client in got for x in per_client], per_message


async def fan_in(
    url: str, token: str, http: httpx.AsyncClient, watchers: int, cpu: Cpu
) -> tuple[int, float, float]:
    """Envelopes delivered to ``watchers`` clients of one turn, seconds, server CPU s."""
    gid = await new_group(http, "watched", ["linus"])
    clients = [Client(url, token) for _ in range(watchers)]
    for client in clients:
        await client.connect([gid])
    speaker = clients[0]
    await speaker.ask(gid, "@linus warm up")
    for client in clients[1:]:
        client.done[gid] = asyncio.Event()
    before = sum(c.envelopes for c in clients)
    cpu0 = cpu()
    started = time.perf_counter()
    await speaker.ask(gid, "@linus talk for a while")
    # Every watcher has the whole turn once it has seen the turn's result.
    await asyncio.gather(*(c.done[gid].wait() for c in clients[1:]))
    elapsed = time.perf_counter() - started
    used = cpu() - cpu0
    delivered = sum(c.envelopes for c in clients) - before
    for client in clients:
        await client.close()
    return delivered, elapsed, used


@dataclass
class Run:
    """What one run of the three phases measured."""

    label: str
    model: str
    single: list[float]
    busy: list[float]
    delivered: int
    elapsed: float
    cpu_single: float  # server CPU s per message, one group
    cpu_busy: float  # server CPU s per message, many groups
    cpu_fanin: float  # server CPU s of the throughput turn
    model_requests: int | None = None  # calls the model server(s) answered

    def figures(self) -> dict[str, float]:
        """The figures a comparison puts side by side (milliseconds, envelopes/s)."""
        ms = 1000.0
        return {
            "overhead, 1 group p50 ms": statistics.median(self.single) * ms,
            "overhead, 1 group p99 ms": pct(self.single, 0.99) * ms,
            "overhead, N groups p50 ms": statistics.median(self.busy) * ms,
            "overhead, N groups p99 ms": pct(self.busy, 0.99) * ms,
            "throughput env/s": self.delivered / self.elapsed,
            "CPU ms/msg, 1 group": self.cpu_single * ms,
            "CPU ms/msg, N groups": self.cpu_busy * ms,
            "CPU ms/1k envelopes": self.cpu_fanin * ms / max(1, self.delivered) * 1000,
        }


@contextmanager
def launch(
    args: argparse.Namespace,
    provider: str,
    floor: bool,
    ttft: float,
    tps: float,
    tokens: int,
    extra_env: dict[str, str] | None = None,
) -> Iterator[tuple[Server, ModelServer | None]]:
    """The server under test (and, for ``openai``, its model server); both stopped on exit.

    ``args`` gives ``store``, ``server_root`` and ``openai_model``.
    """
    models = None
    env = dict(extra_env or {})
    if provider == "offline" and not floor:
        model = f"offline:default?ttft={ttft}&tps={tps}&tokens={tokens}"
        server = Server(model, args.store, args.server_root, env)
    else:
        models = ModelServer(ttft, tps, tokens)
        env.update(OPENAI_BASE_URL=models.url, OPENAI_API_KEY="sk-bench-not-a-key")
        model = f"openai:{args.openai_model}"
        try:
            server = Server(model, args.store, args.server_root, env, floor=floor)
        except BaseException:
            models.stop()
            raise
    try:
        yield server, models
    finally:
        server.stop()
        if models is not None:
            models.stop()


async def measure(
    args: argparse.Namespace,
    provider: str,
    floor: bool,
    env: dict[str, str] | None = None,
    label: str | None = None,
) -> Run:
    """The three phases against one kind of server (a fresh one for the throughput phase)."""
    requests = 0
    with launch(args, provider, floor, args.ttft, args.tps, args.tokens, env) as (server, models):
        await server.start()
        token, http = await login(server.url, server.password)
        single, cpu_single = await one_group(
            server.url, token, http, args.ttft, args.messages, server.cpu
        )
        reply_s = args.ttft + (args.tokens / args.tps if args.tps else 0.0)
        busy, cpu_busy = await many_groups(
            server.url, token, http, args.ttft, args.groups, args.rounds, reply_s, server.cpu
        )
        await http.aclose()
        requests += models.stats()["requests"] if models else 0
    # The throughput turn streams as fast as the model can (no pauses).
    with launch(args, provider, floor, 0.0, 0.0, args.stream_tokens, env) as (server, models):
        await server.start()
        token, http = await login(server.url, server.password)
        delivered, elapsed, cpu_fanin = await fan_in(
            server.url, token, http, args.watchers, server.cpu
        )
        await http.aclose()
        requests += models.stats()["requests"] if models else 0
    label = label or ("floor" if floor else "yeaft serve")
    if provider == "offline" and not floor:
        model = f"offline:default?ttft={args.ttft}&tps={args.tps}&tokens={args.tokens}"
    else:
        model = f"openai:{args.openai_model} (SDK; ttft {args.ttft} s, {args.tps} tok/s, "
        model += f"{args.tokens} tokens)"
    return Run(
        label,
        model,
        single,
        busy,
        delivered,
        elapsed,
        cpu_single,
        cpu_busy,
        cpu_fanin,
        requests if models is not None else None,
    )


def report(run: Run, args: argparse.Namespace) -> None:
    ms = 1000.0
    single, busy = run.single, run.busy
    print(
        f"{run.label}: model {run.model}; store {args.store or 'embedded'}; "
        f"server {FLOOR if run.label == 'floor' else args.server_root}"
    )
    print(
        f"overhead, 1 group:     p50 {statistics.median(single) * ms:6.1f} ms   "
        f"p99 {pct(single, 0.99) * ms:6.1f} ms   (n={len(single)}; target 10 / 30)   "
        f"server CPU {run.cpu_single * ms:6.1f} ms/msg"
    )
    print(
        f"overhead, {args.groups} groups:  p50 {statistics.median(busy) * ms:6.1f} ms   "
        f"p99 {pct(busy, 0.99) * ms:6.1f} ms   (n={len(busy)}; target p99 100)   "
        f"server CPU {run.cpu_busy * ms:6.1f} ms/msg"
    )
    per_k = run.cpu_fanin / max(1, run.delivered) * 1000 * ms
    print(
        f"throughput: {run.delivered} envelopes to {args.watchers} clients in "
        f"{run.elapsed:.2f} s = {run.delivered / run.elapsed:,.0f} envelopes/s   "
        f"server CPU {run.cpu_fanin:.2f} s ({per_k:.1f} ms per 1k envelopes)"
    )
    if run.model_requests is not None:
        print(f"model server: {run.model_requests} streamed calls answered")


def compare(pairs: list[tuple[Run, Run]]) -> None:
    """Each figure of the base runs and of the others, run by run, and their ratio."""
    base, other = pairs[0][0].label, pairs[0][1].label
    print(f"\n{'':28}{base:>22}  {other:>22}  {'ratio':>6}")
    for name in pairs[0][0].figures():
        floors = [f.figures()[name] for f, _ in pairs]
        serves = [s.figures()[name] for _, s in pairs]
        ratios = [s / f if f else float("inf") for f, s in zip(floors, serves, strict=True)]
        print(
            f"{name:28}{' / '.join(f'{v:,.1f}' for v in floors):>22}  "
            f"{' / '.join(f'{v:,.1f}' for v in serves):>22}  {statistics.median(ratios):6.2f}"
        )
    print(f"ratio: {other} / {base}, the median over the pairs (N groups: --groups)")


async def compare_tracing(args: argparse.Namespace) -> None:
    """Untraced and traced ``yeaft serve``, alternately, and the ratios of their figures."""
    sink = OtlpSink()
    traced_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_SERVICE_NAME": "yeaft-bench"}
    pairs = []
    try:
        for i in range(args.pairs):
            plain = await measure(args, args.provider, False, {}, "untraced")
            report(plain, args)
            traced = await measure(args, args.provider, False, traced_env, "traced")
            report(traced, args)
            pairs.append((plain, traced))
            print(f"(pair {i + 1} of {args.pairs} done)\n", flush=True)
    finally:
        sink.stop()
    compare(pairs)
    print(f"spans exported: {sink.requests} OTLP requests, {sink.bytes / 1e6:.1f} MB")


async def main_async(args: argparse.Namespace) -> None:
    if args.compare_tracing:
        await compare_tracing(args)
        return
    if not args.compare_floor:
        report(await measure(args, args.provider, args.floor), args)
        return
    pairs = []
    for i in range(args.pairs):
        floor = await measure(args, "openai", True)
        report(floor, args)
        serve = await measure(args, "openai", False)
        report(serve, args)
        pairs.append((floor, serve))
        print(f"(pair {i + 1} of {args.pairs} done)\n", flush=True)
    compare(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ttft", type=float, default=0.2, help="model: seconds to first token")
    parser.add_argument("--tps", type=float, default=100, help="model: tokens per second")
    parser.add_argument("--tokens", type=int, default=60, help="model: tokens per reply")
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
    parser.add_argument(
        "--provider",
        choices=["offline", "openai"],
        default="offline",
        help="openai: the VPs call bench/model_server.py through the openai SDK",
    )
    parser.add_argument("--openai-model", default="gpt-4o-mini", help="a name the registry knows")
    parser.add_argument(
        "--floor", action="store_true", help="measure bench/floor.py (implies --provider openai)"
    )
    parser.add_argument(
        "--compare-floor",
        action="store_true",
        help="the floor, then yeaft serve (--provider openai), and their ratios",
    )
    parser.add_argument(
        "--compare-tracing",
        action="store_true",
        help="yeaft serve untraced, then traced to a local OTLP sink, and their ratios",
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="with --compare-floor/--compare-tracing: runs of each"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
