"""MCP servers that are slow, silent or gone never hold up a turn; one connection per process.

A turn is offered the tools of the servers that are ready and reads them
again at every step, so a silent server costs a turn nothing; a tool the
model names whose server is still starting is waited for (the model chose
that server). The VPs of one process share one connection per server,
except a server of ``scope: vp``, which each VP gets its own copy of. The
servers are ``tests/fixtures/mcp_server.py`` over stdio and streamable HTTP,
and a TCP listener that never answers; the VPs are the real actor class in
process, sharing a :class:`~actors.vp_actor.VPShared` as a VP host does.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.vp_actor import VPActor, VPShared
from engine.mcp import McpManager, ServerState, parse_mcp_config
from engine.messages import ToolCall
from engine.tools.registry import ToolContext, ToolRegistry
from tests.fixtures.llm_server import FakeLLM, ScriptedToolCall
from tests.fixtures.stores import StoreFactory
from tests.mcp_helpers import (
    offered,
    serve_http,
    silent_http,
    stdio,
    tool_results,
    turn,
    vp_config,
)

MakeVPs = Callable[..., list[VPActor]]


@pytest.fixture
async def make_vps(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[MakeVPs]:
    """VPs in one process (one :class:`VPShared`), as a pooled VP host holds them."""
    stores = StoreFactory("embedded", tmp_path / "data", None, "unused")
    made: list[tuple[VPShared, list[VPActor]]] = []

    def make(servers: dict[str, Any], vps: tuple[str, ...] = ("linus",), **limits: Any) -> list:
        config = vp_config(fake_llm, stores, servers, **limits)
        shared = VPShared.open(config)
        actors = [VPActor(vp, config, shared) for vp in vps]
        made.append((shared, actors))
        return actors

    yield make
    for shared, actors in made:
        for vp in actors:
            await vp.close()
        await shared.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- a turn never waits for a server it did not call -----------------------------
async def test_a_silent_server_costs_a_turn_nothing(make_vps: MakeVPs, fake_llm: FakeLLM) -> None:
    with silent_http() as url:
        [vp] = make_vps({"silent": {"url": url}, "fx": stdio()}, connect_timeout_s=60)
        fake_llm.text("Hello.")
        started = time.monotonic()
        # Before, the turn waited for every server's connection: 60 s here.
        async with asyncio.timeout(20):
            outcome, _ = await turn(vp, settle=False)
        print(f"\ntool-less turn with a silent server: {time.monotonic() - started:.2f}s")
        assert outcome.text == "Hello."
        assert not any(n.startswith("silent__") for n in offered(fake_llm.requests[0]))
        # The VP side knows it is still trying, and says so.
        states = {r.server: r.state for r in vp.services.mcp.reports()}
        assert states["silent"] is ServerState.CONNECTING


async def test_a_servers_tools_join_the_turn_when_it_comes_up() -> None:
    manager = McpManager(parse_mcp_config({"mcpServers": {"fx": stdio()}}))
    try:
        toolset = manager.toolset(["fx"])
        # Nothing waited: the server is starting, and says so to a model that asks.
        assert toolset.tools() == ()
        assert toolset.missing("fx__nope") == (
            "fx__nope cannot be called: MCP server 'fx' is still starting; its tools are "
            "offered as soon as it is ready"
        )
        await manager.settled()
        # The same turn's toolset, read at its next step, has them.
        assert {"fx__echo", "fx__add"} <= {t.name for t in toolset.tools()}
        registry = ToolRegistry([])
        ctx = ToolContext("c", more_tools=toolset)
        assert "fx__echo" in {t.name for t in registry.offered(ctx, allowed=set())}
    finally:
        await manager.aclose()


async def test_a_tool_the_model_names_while_its_server_starts_waits_for_it() -> None:
    manager = McpManager(parse_mcp_config({"mcpServers": {"fx": stdio()}}))
    try:
        toolset = manager.toolset(["fx"])
        registry = ToolRegistry([])
        ctx = ToolContext("c", more_tools=toolset)
        call = ToolCall(id="t1", name="fx__add", arguments={"a": 2, "b": 3})
        outcome = await registry.execute(call, ctx)
        assert (outcome.content, outcome.is_error) == ("5", False)
    finally:
        await manager.aclose()


async def test_a_server_down_before_the_call_is_not_said_to_stop_during_it() -> None:
    with serve_http() as (url, proc):
        manager = McpManager(parse_mcp_config({"mcpServers": {"web": {"url": url}}}))
        try:
            await manager.open(["web"])
            [echo] = [t for t in manager.toolset(["web"]).tools() if t.name == "web__echo"]
            assert (await echo.handler({"text": "up"}, ToolContext("c"))).content.endswith(": up")
            proc.terminate()
            await asyncio.to_thread(proc.wait, 10)
            down = await echo.handler({"text": "down"}, ToolContext("c"))
        finally:
            await manager.aclose()
    assert down.is_error
    assert down.content.startswith(
        "MCP server 'web' is not reachable (connection refused): it was already down"
    )
    assert "during the call" not in down.content


# -- one connection per process, or per VP ----------------------------------------
async def test_the_vps_of_a_process_share_a_server_unless_it_is_per_vp(
    make_vps: MakeVPs, fake_llm: FakeLLM
) -> None:
    linus, ada = make_vps({"fx": stdio(), "mine": stdio(scope="vp")}, vps=("linus", "ada"))
    pids: dict[str, list[str]] = {}
    for vp in (linus, ada):
        fake_llm.tool_calls(
            ScriptedToolCall("fx__echo", {"text": "x"}, id="c1"),
            ScriptedToolCall("mine__echo", {"text": "x"}, id="c2"),
        )
        fake_llm.text("ok")
        await turn(vp, text=f"@{vp.vp_id} go")
        shared, own = tool_results(fake_llm.requests[-1])
        pids[vp.vp_id] = [shared.split(":")[0], own.split(":")[0]]
    # "echo from PID": one fx process for both VPs, a "mine" process each.
    assert pids["linus"][0] == pids["ada"][0]
    assert pids["linus"][1] != pids["ada"][1]
    processes = {p for both in pids.values() for p in both}
    print(f"\n2 VPs, 1 shared + 1 per-VP server: {len(processes)} server processes")
    assert len(processes) == 3

    # A VP that closes takes its own connections with it, not the shared one.
    mine = linus.services.mcp.connection("mine", "linus")
    await linus.close()
    assert mine is not None and mine.state is ServerState.CLOSED
    assert linus.services.mcp.connection("fx").state is ServerState.READY  # type: ignore[union-attr]
    fake_llm.tool_calls(ScriptedToolCall("fx__echo", {"text": "still"}))
    fake_llm.text("ok")
    await turn(ada, text="@ada again")
    assert tool_results(fake_llm.requests[-1])[0].split(":")[0] == pids["ada"][0]


async def test_a_host_opens_the_servers_its_personas_may_use_when_it_starts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    pidfile = tmp_path / "pid"
    stores = StoreFactory("embedded", tmp_path / "data", None, "unused")
    config = vp_config(fake_llm, stores, {"fx": stdio(env={"MCP_TEST_PIDFILE": str(pidfile)})})
    shared = VPShared.open(config)
    try:
        # What VPHost.reach does when the host starts: no VP made yet.
        shared.start_mcp()
        await shared.mcp.settled()
        assert shared.mcp.connection("fx").state is ServerState.READY  # type: ignore[union-attr]
        pid = int(pidfile.read_text())
        assert _alive(pid)
    finally:
        await shared.close()
    # Closing the host's connections stops the server (reaped by the SDK on close).
    assert not _alive(pid)


# -- closing never waits for a server that is still opening -------------------------
async def test_removing_or_closing_a_server_that_is_still_opening_is_immediate(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    os.mkfifo(started)
    # A stdio server that starts and never answers its handshake; it says its pid first.
    says_pid = f"open({str(started)!r}, 'w').write(str(os.getpid()))"
    script = f"import os, time; {says_pid}; time.sleep(600)"
    hangs = {"command": sys.executable, "args": ["-c", script]}
    with silent_http() as url:
        servers = {"silent": {"url": url}, "hangs": hangs}
        manager = McpManager(parse_mcp_config({"mcpServers": servers}, connect_timeout_s=60))
        try:
            manager.start(["silent", "hangs"])
            pid = int(await asyncio.to_thread(started.read_text))
            states = {r.server: r.state for r in manager.reports()}
            assert states == {"silent": ServerState.CONNECTING, "hangs": ServerState.CONNECTING}
            began = time.monotonic()
            # Before, each waited out the connect timeout (60 s here) behind the opening.
            async with asyncio.timeout(10):
                # What an administrator's removal of the silent server does.
                only = parse_mcp_config({"mcpServers": {"hangs": hangs}}, connect_timeout_s=60)
                await manager.reconfigure(only)
                assert [r.server for r in manager.reports()] == ["hangs"]
                removed = time.monotonic() - began
                await manager.aclose()
            print(
                f"\nremoved a connecting server in {removed:.2f}s, closed all in "
                f"{time.monotonic() - began:.2f}s (connect timeout 60 s)"
            )
        finally:
            await manager.aclose()
    # The server that never answered was stopped with its connection, not left behind.
    assert not _alive(pid)


async def test_closing_ends_a_call_waiting_out_a_back_off_without_a_new_attempt() -> None:
    from engine.mcp.connection import ServerConnection, ServerUnavailable

    dies = {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}
    spec = parse_mcp_config({"mcpServers": {"dies": dies}}).servers["dies"]
    conn = ServerConnection("dies", spec, connect_timeout_s=10, backoff_s=(4.0, 4.0))
    with pytest.raises(ServerUnavailable):
        await conn.ensure()
    assert conn.failures == 1 and conn.retry_in() > 3
    # A call waits out a back-off of at most 5 s, then tries again.
    waiting = asyncio.create_task(conn.ensure())
    await asyncio.sleep(0)  # the call is now waiting out the back-off
    async with asyncio.timeout(2):
        await conn.aclose()
        with pytest.raises(ServerUnavailable, match="is shut down"):
            await waiting
    assert conn.state is ServerState.CLOSED and conn.failures == 1
