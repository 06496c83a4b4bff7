"""MCP servers against a turn's first token, and MCP server processes against VPs.

Two measurements, each against a baseline taken in the same run:

1. **First-token delay with a silent server.** A VP answers ``--turns``
   tool-less messages, each in a new group, first with no MCP server (the
   baseline), then with a silent streamable-HTTP server (a listener that
   accepts connections and never answers, under the default 15 s connect
   timeout) beside a healthy stdio one. The model
   (``bench/model_server.py``, through the real ``openai`` SDK) answers one
   token at once, so a turn's time is its time to the first token.
2. **Server processes.** ``--vps`` VPs in one process (a pooled VP host)
   and ``--servers`` stdio servers, each VP calling a tool of every server:
   with the default ``scope: shared`` and with ``scope: vp`` (each VP its
   own copy, as every VP had before servers were shared). Prints the server
   processes and their summed RSS.
3. **Letting go of a server that is still connecting.** A silent HTTP
   server and a stdio server that never answers its handshake, both being
   opened (default 15 s connect timeout): the time to remove them (what a
   VP host does when an administrator deletes a server) and to close the
   rest (a host stopping or reconfigured).

    .venv/bin/python bench/mcp_stall.py --turns 10 --vps 2 --servers 6

The VPs are the real actor class in this process with the embedded store;
the stdio server is the tests' fixture server (``tests/fixtures/mcp_server.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import SecretStr

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnRequest
from actors.vp_actor import VPActor, VPShared
from actors.vp_commands import RunTurn
from bench.model_server import ModelServer
from bench.proctree import tree
from engine.mcp import McpManager, ServerState, parse_mcp_config
from engine.settings import EngineConfig
from protocol.settings import GroupSettings
from store import StoreConfig
from store.base import Group, GroupMessage

SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mcp_server.py")
VPS = ("linus", "ada", "grace", "ken", "kent", "margaret", "martin", "shannon", "steve")


def _config(data: Path, model_url: str, servers: dict[str, Any]) -> RuntimeConfig:
    return RuntimeConfig(
        store=StoreConfig(data_dir=data),
        engine=EngineConfig(
            model="openai:bench-model",
            openai_api_key=SecretStr("sk-bench-0123456789"),
            openai_base_url=model_url,
            max_retries=0,
        ),
        mcp=parse_mcp_config({"mcpServers": servers}),
        dream_idle_s=0,
        dream_every_turns=0,
    )


async def _turn(vp: VPActor, text: str) -> float:
    """Seconds one turn of ``vp`` takes, in a new group that approves every tool."""
    store = vp.services.store
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    settings = GroupSettings(auto_approve=True)
    await store.create_group(Group(id=gid, name="b", roster=[vp.vp_id], settings=settings))
    msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text=text))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    started = time.perf_counter()
    await vp.call(RunTurn(TurnRequest(gid, vp.vp_id, uuid.uuid4().hex, origin)))
    return time.perf_counter() - started


async def first_tokens(
    model_url: str, turns: int, servers: dict[str, Any]
) -> tuple[float, list[float]]:
    """The first turn of a new VP (its imports and connections), then ``turns`` more."""
    with tempfile.TemporaryDirectory() as data:
        config = _config(Path(data), model_url, servers)
        shared = VPShared.open(config)
        vp = VPActor("linus", config, shared)
        try:
            first = await _turn(vp, "@linus hello")
            return first, [await _turn(vp, f"@linus hello {i}") for i in range(turns)]
        finally:
            await vp.close()
            await shared.close()


def _server_processes() -> dict[int, tuple[float, int]]:
    """This process's descendants that run the fixture MCP server."""
    out = {}
    for pid, stat in tree(os.getpid()).items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if SERVER.encode() in f.read():
                    out[pid] = stat
        except OSError:
            continue
    return out


async def processes(model_url: str, vps: int, servers: int, scope: str) -> tuple[int, int]:
    """Server processes and their summed RSS once ``vps`` VPs used ``servers`` servers."""
    entries = {
        f"s{i}": {"command": sys.executable, "args": [SERVER, "stdio"], "scope": scope}
        for i in range(servers)
    }
    with tempfile.TemporaryDirectory() as data:
        config = _config(Path(data), model_url, entries)
        shared = VPShared.open(config)
        actors = [VPActor(VPS[i % len(VPS)], config, shared) for i in range(vps)]
        try:
            await shared.mcp.settled()
            for vp in actors:
                for name in entries:
                    await shared.mcp.open([name], vp.vp_id)
            found = _server_processes()
            return len(found), sum(rss for _, rss in found.values())
        finally:
            for vp in actors:
                await vp.close()
            await shared.close()


async def letting_go(silent_url: str) -> tuple[float, float]:
    """Seconds to remove two servers still connecting, then to close what is left."""
    hangs = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    fx = {"command": sys.executable, "args": [SERVER, "stdio"]}
    servers = {"silent": {"url": silent_url}, "hangs": hangs, "fx": fx}
    manager = McpManager(parse_mcp_config({"mcpServers": servers}))
    try:
        await manager.open(["fx"])
        manager.start(["silent", "hangs"])
        await asyncio.sleep(0.5)  # the openings are under way (the handshakes never end)
        connecting = {r.server for r in manager.reports() if r.state is ServerState.CONNECTING}
        assert connecting == {"silent", "hangs"}, connecting
        started = time.perf_counter()
        await manager.reconfigure(parse_mcp_config({"mcpServers": {"fx": fx}}))
        removed = time.perf_counter() - started
        started = time.perf_counter()
        await manager.aclose()
        return removed, time.perf_counter() - started
    finally:
        await manager.aclose()


def _silent() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--vps", type=int, default=2)
    parser.add_argument("--servers", type=int, default=6)
    args = parser.parse_args()
    if args.vps > len(VPS):
        parser.error(f"at most {len(VPS)} VPs")
    with ModelServer(ttft=0.0, tps=0.0, tokens=1) as model, _silent() as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        stdio = {"command": sys.executable, "args": [SERVER, "stdio"]}
        first, base = await first_tokens(model.url, args.turns, {})
        servers = {"silent": {"url": url}, "fx": stdio}
        first_stalled, stalled = await first_tokens(model.url, args.turns, servers)
        print(f"first token of tool-less turns (s): a new VP's first; {args.turns} more p50 / max")
        for label, one, more in (
            ("no MCP server          ", first, base),
            ("a silent HTTP + a stdio", first_stalled, stalled),
        ):
            print(f"  {label}  {one:.3f}; {statistics.median(more):.3f} / {max(more):.3f}")
        print(f"  ratio p50 {statistics.median(stalled) / statistics.median(base):.2f}x")
        over = sum(t > 1 for t in [first_stalled, *stalled])
        print(f"  turns over 1 s with the silent server: {over} of {args.turns + 1}")
        print(f"\n{args.vps} VPs in one process, {args.servers} stdio servers:")
        for scope in ("shared", "vp"):
            count, rss = await processes(model.url, args.vps, args.servers, scope)
            print(f"  scope {scope:6}  {count:3d} server processes, {rss / 2**20:7.1f} MiB RSS")
        removed, closed = await letting_go(url)
        print("\na silent HTTP and a silent stdio server, still connecting (15 s timeout):")
        print(f"  removed in {removed:.3f} s; the rest (one ready stdio) closed in {closed:.3f} s")


if __name__ == "__main__":
    asyncio.run(main())
