"""The model SDK's HTTP transport on its own: CPU per streamed reply, aiohttp against httpx2.

The providers give the ``openai`` and ``anthropic`` SDKs the SDKs' own
aiohttp transport (``DefaultAioHttpClient``); the SDKs' default is httpx2.
This streams the same replies through :class:`~engine.providers.openai.OpenAIProvider`
with each transport in turn, against ``bench/model_server.py`` (its own
process, so its CPU is not counted), ``--concurrency`` streams at a time as
the VPs of one host do, and reports this process's CPU per reply (user +
system) for each, in alternating pairs, with the ratio of the pair. It runs
on the plain asyncio loop, as the VP hosts' Ray actors do.

    python bench/sdk_transport.py [--pairs 5] [--rounds 3] [--concurrency 10] [--tps 100]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import openai

from bench.model_server import ModelServer
from engine.messages import Message
from engine.providers.base import ModelRequest
from engine.providers.openai import OpenAIProvider

TRANSPORTS = ("aiohttp", "httpx2")


def provider(url: str, transport: str) -> OpenAIProvider:
    """The provider as the registry builds it, or with the SDK's default transport."""
    p = OpenAIProvider(api_key="local", base_url=url)
    if transport == "httpx2":
        # The bench alone swaps the transport; the provider always uses aiohttp.
        p._client = p._client.with_options(http_client=openai.DefaultAsyncHttpxClient())
    return p


async def cpu_per_reply(url: str, transport: str, rounds: int, concurrency: int) -> float:
    """Seconds of this process's CPU per streamed reply, after one warm round."""
    p = provider(url, transport)
    request = ModelRequest(
        model="bench", system="", messages=[Message(role="user", content="hi")], max_tokens=100
    )

    async def one() -> None:
        async for _ in p.stream(request):
            pass

    async def round_() -> None:
        await asyncio.gather(*(one() for _ in range(concurrency)))

    try:
        await round_()
        start = time.process_time()
        for _ in range(rounds):
            await round_()
        return (time.process_time() - start) / (rounds * concurrency)
    finally:
        await p.aclose()


async def main_async(args: argparse.Namespace) -> None:
    figures: dict[str, list[float]] = {t: [] for t in TRANSPORTS}
    ratios: list[float] = []
    with ModelServer(ttft=0.0, tps=args.tps, tokens=args.tokens) as server:
        print(f"{'pair':>4} {'aiohttp ms':>11} {'httpx2 ms':>10} {'ratio':>6}")
        for pair in range(args.pairs):
            # Alternate which transport goes first, so drift favours neither.
            order = TRANSPORTS if pair % 2 == 0 else TRANSPORTS[::-1]
            got = {
                t: await cpu_per_reply(server.url, t, args.rounds, args.concurrency) for t in order
            }
            for t in TRANSPORTS:
                figures[t].append(got[t])
            ratios.append(got["aiohttp"] / got["httpx2"])
            print(
                f"{pair + 1:>4} {got['aiohttp'] * 1000:>11.2f} {got['httpx2'] * 1000:>10.2f}"
                f" {ratios[-1]:>6.2f}"
            )
    print(
        f"median CPU per reply of {args.tokens} tokens: aiohttp "
        f"{statistics.median(figures['aiohttp']) * 1000:.2f} ms, httpx2 "
        f"{statistics.median(figures['httpx2']) * 1000:.2f} ms, ratio "
        f"{statistics.median(ratios):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="rounds timed per figure")
    parser.add_argument("--concurrency", type=int, default=10, help="streams at a time")
    parser.add_argument("--tps", type=float, default=100, help="the model's tokens per second")
    parser.add_argument("--tokens", type=int, default=60, help="tokens per reply")
    # The plain asyncio loop, as in the Ray actors that host the VPs.
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
