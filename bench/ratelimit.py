"""Rate-limit benchmark: 16 VPs answer 10 ``@all`` messages from a provider that allows K streams.

A local OpenAI-compatible server streams each reply (``--tokens`` chunks,
``--chunk-ms`` apart) and answers 429 with ``Retry-After`` to any request
beyond ``--limit`` concurrent streams. The VPs reach it through the real
OpenAI SDK, with the provider lane capped at ``--cap`` calls cluster-wide
(0: no cap, every VP on its own with retries). Prints the completion time,
the 429s the server sent, the retries and rotations the VPs made, and the
turns that ended in an error (the target: none).

    python bench/ratelimit.py [--limit 4] [--cap 4] [--store redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from coordinator.commands import DeleteGroup, Ingest, VPStatsOf, WaitIdle

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cluster import start_ray
from bench.fanout import bench_personas

NAMESPACE = "yeaft-bench-ratelimit"


class LimitedServer(ThreadingHTTPServer):
    """Counts concurrent streams; past ``limit`` it answers 429."""

    daemon_threads = True

    def __init__(self, limit: int, tokens: int, chunk_s: float, retry_after: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.limit, self.tokens, self.chunk_s = limit, tokens, chunk_s
        self.retry_after = retry_after
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.counts: Counter[str] = Counter()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def enter(self) -> bool:
        with self.lock:
            if self.active >= self.limit:
                self.counts["429"] += 1
                return False
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.counts["200"] += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


class _Handler(BaseHTTPRequestHandler):
    server: LimitedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if not self.server.enter():
            payload = json.dumps(
                {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
            ).encode()
            self.send_response(429)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after", str(self.server.retry_after))
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        try:
            self._stream(body.get("model", "bench"))
        finally:
            self.server.leave()

    def _stream(self, model: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            data = {
                "id": "bench",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        for i in range(self.server.tokens):
            time.sleep(self.server.chunk_s)
            chunk({"content": f"word{i} "})
        chunk({}, "stop")
        usage = {"prompt_tokens": 50, "completion_tokens": self.server.tokens, "total_tokens": 0}
        tail = {"id": "bench", "object": "chat.completion.chunk", "created": 0, "model": model}
        tail.update(choices=[], usage=usage)
        self.wfile.write(f"data: {json.dumps(tail)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


async def measure(args: argparse.Namespace, server: LimitedServer) -> None:
    from pydantic import SecretStr

    from actors.config import RuntimeConfig
    from coordinator.runtime import Runtime
    from engine.credentials import Credential
    from engine.settings import EngineConfig
    from protocol import GroupSettingsPatch
    from store import StoreConfig

    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp) / "personas"
        roster = bench_personas(pdir, args.vps)
        store = StoreConfig(args.store, Path(tmp), redis_prefix=f"bench-rl-{time.time_ns()}")
        engine = EngineConfig(
            model="openai:bench-model",
            openai_base_url=server.base_url,
            openai_credentials=(Credential(label="bench", key=SecretStr("sk-bench")),),
            provider_concurrency={"openai": args.cap} if args.cap else {},
        )
        rt = Runtime(
            RuntimeConfig(
                namespace=NAMESPACE,
                prefix="bench-",
                store=store,
                personas_dir=str(pdir),
                engine=engine,
            )
        )
        patch = GroupSettingsPatch(fanout_cap=16)
        group = await rt.create_group("bench", roster, settings=patch)
        try:
            await rt.send(VPStatsOf(group.id))  # start every actor before timing
            server.counts.clear()
            started = time.perf_counter()
            for i in range(args.messages):
                out = await rt.send(Ingest(group.id, "bench", f"@all question {i}"))
                assert len(out.dispatched) == len(roster), out
                assert await rt.send(WaitIdle(group.id, 600))
            elapsed = time.perf_counter() - started
            await report(args, server, store, group.id, elapsed)
        finally:
            await rt.send(DeleteGroup(group.id))
            rt.shutdown()
            await rt.aclose()


async def report(
    args: argparse.Namespace, server: LimitedServer, store: Any, group_id: str, elapsed: float
) -> None:
    opened = store.open_store()
    results = errors = 0
    notices: Counter[str] = Counter()
    try:
        batch = await opened.read_events(group_id, 0, limit=100_000)
        for event in batch.events:
            env = event.envelope()
            if env.get("type") != "yeaft_output":
                continue
            data = env["data"]
            if data.get("type") == "result":
                results += 1
                errors += bool(data.get("is_error"))
            elif data.get("type") == "system":
                kind = (data.get("detail") or {}).get("kind")
                if kind:
                    notices[str(kind)] += 1
    finally:
        await opened.close()
    print(
        f"{args.vps} VPs x {args.messages} @all; provider limit {args.limit} streams, "
        f"lane cap {args.cap or 'none'}; store {args.store or 'embedded'}"
    )
    print(
        f"completion {elapsed:.1f} s; turns {results}; error results {errors}; "
        f"429s seen {server.counts['429']}; retries {notices['retry']}; "
        f"rotations {notices['rotate']}; queued waits {notices['queued'] // 2}; "
        f"peak streams {server.peak}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vps", type=int, default=16)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--limit", type=int, default=4, help="streams the server allows")
    parser.add_argument("--cap", type=int, default=4, help="provider lane cap (0: none)")
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--chunk-ms", type=float, default=10.0)
    parser.add_argument("--retry-after", type=float, default=1.0)
    parser.add_argument("--store", default=None, help="store URL (default: embedded)")
    args = parser.parse_args()
    server = LimitedServer(args.limit, args.tokens, args.chunk_ms / 1000, args.retry_after)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    start_ray(NAMESPACE)
    try:
        asyncio.run(measure(args, server))
    finally:
        server.shutdown()
        server.server_close()


if __name__ == "__main__":
    main()
