"""The server under test: ``yeaft serve`` (or ``bench/floor.py``) in a subprocess.

Shared by the benchmarks that drive a whole server over HTTP and WebSockets
(``bench/latency.py``, ``bench/cost.py``, ``bench/scale.py``,
``bench/overload.py``): a free port, the wait for ``/healthz``, stopping the
process by its own pid, and deleting what it wrote under its Redis prefix.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.proctree import cpu_of

ROOT = Path(__file__).resolve().parents[1]
FLOOR = ROOT / "bench" / "floor.py"


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
    """``yeaft serve`` in a subprocess, stopped by its own pid.

    With ``floor`` it is ``bench/floor.py`` instead (``model`` must then be
    ``openai:NAME``), which takes any login.
    """

    def __init__(
        self,
        model: str,
        store: str | None,
        root: Path = ROOT,
        extra_env: dict[str, str] | None = None,
        *,
        floor: bool = False,
    ) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = store
        self.prefix = f"bench-{uuid.uuid4().hex[:8]}"
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
            YEAFT_REDIS_PREFIX=self.prefix,
        )
        if store:
            env["YEAFT_REDIS_URL"] = store
        env.update(extra_env or {})
        command = [sys.executable, "-m", "gateway.cli", "serve", "--port", str(self.port)]
        if floor:
            name = model.removeprefix("openai:")
            command = [sys.executable, str(FLOOR), "--port", str(self.port), "--model", name]
        self.created = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.password = "floor" if floor else ""

    def cpu(self) -> float:
        """CPU seconds used so far by the server and every process descended from it."""
        return cpu_of(self.proc.pid)

    async def start(self, attempts: int = 1200) -> None:
        assert self.proc.stdout is not None
        for _ in range(0 if self.password else 10):
            line = await asyncio.to_thread(self.proc.stdout.readline)
            found = re.search(r"password '([^']+)'", line)
            if found:
                self.password = found.group(1)
                break
        await wait_healthy(self.url, attempts)

    def stop(self) -> None:
        stop_process(self.proc)
        self.tmp.cleanup()
        if self.store:
            purge_redis(self.store, self.prefix)


def purge_redis(url: str, prefix: str) -> None:
    """Delete the keys a server wrote under its own ``prefix`` (nobody else's)."""
    import redis

    try:
        client = redis.Redis.from_url(url)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])
        client.close()
    except redis.RedisError as exc:
        print(f"could not delete the keys under {prefix}: in {url}: {exc}", file=sys.stderr)
