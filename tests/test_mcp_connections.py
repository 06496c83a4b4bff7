"""The MCP client below a VP: its connections, their back-off, the configuration, the catalog.

The servers are ``tests/fixtures/mcp_server.py`` over stdio, or commands that
never answer or die at once; the tools are called through
:class:`engine.mcp.McpManager` directly, with no VP and no model. The turns
of a VP that use MCP tools are in ``test_mcp.py``.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.mcp import McpConfig, McpManager, parse_mcp_config
from tests.mcp_helpers import stdio


# -- connections: retried, given up, never holding up another ---------------------
async def test_a_slow_server_does_not_hold_up_another(tmp_path: Path) -> None:
    config = parse_mcp_config({"mcpServers": {"fx": stdio(), "other": stdio()}}, call_timeout_s=30)
    manager = McpManager(config)
    try:
        await manager.open(["fx", "other"])
        tools = {t.name: t for t in manager.toolset(["fx", "other"]).tools()}
        from engine.tools.registry import ToolContext

        ctx = ToolContext("c")
        slow = asyncio.create_task(tools["fx__slow"].handler({"seconds": 30}, ctx))
        async with asyncio.timeout(10):
            quick = await tools["other__echo"].handler({"text": "quick"}, ctx)
            same_server = await tools["fx__echo"].handler({"text": "meanwhile"}, ctx)
        assert quick.content.endswith(": quick")
        assert same_server.content.endswith(": meanwhile")
        assert not slow.done()
        slow.cancel()
        await asyncio.gather(slow, return_exceptions=True)
    finally:
        await manager.aclose()


async def test_a_server_that_keeps_failing_is_retried_after_a_growing_back_off() -> None:
    from engine.mcp.connection import ServerConnection, ServerState, ServerUnavailable

    spec = parse_mcp_config({"mcpServers": {"gone": {"command": "/nonexistent/x"}}})
    conn = ServerConnection(
        "gone", spec.servers["gone"], connect_timeout_s=5, backoff_s=(40.0, 300.0)
    )
    # A server that never came up waits the first back-off, which then
    # doubles; a call meanwhile is refused at once, saying when the next attempt is.
    with pytest.raises(ServerUnavailable, match="command not found"):
        await conn.ensure()
    assert conn.status().state is ServerState.FAILED
    assert 39 < (conn.status().retry_in or 0) <= 40
    with pytest.raises(ServerUnavailable, match=r"next attempt in \d+s"):
        await conn.ensure()
    conn._retry_at = 0  # the back-off has passed
    with pytest.raises(ServerUnavailable, match="command not found"):
        await conn.ensure()
    assert 79 < (conn.status().retry_in or 0) <= 80
    conn._retry_at = 0
    with pytest.raises(ServerUnavailable):
        await conn.ensure()
    assert 159 < (conn.status().retry_in or 0) <= 160
    assert conn.failures == 3


async def test_a_server_that_never_answers_is_given_up_after_the_connect_timeout() -> None:
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]}
    dies = {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}
    config = parse_mcp_config({"mcpServers": {"silent": silent, "dies": dies}}, connect_timeout_s=2)
    manager = McpManager(config)
    try:
        started = time.monotonic()
        await manager.open(["silent", "dies"])
        # Started together: the silent one costs its timeout, not more.
        assert time.monotonic() - started < 6
        toolset = manager.toolset(["silent", "dies"])
        assert toolset.unavailable == {
            "silent": "MCP server 'silent' is unavailable: no answer within 2s",
            "dies": "MCP server 'dies' is unavailable: Connection closed",
        }
        assert toolset.tools() == ()
    finally:
        await manager.aclose()


# -- configuration -----------------------------------------------------------------
def test_the_configuration_reads_the_desktop_shape(tmp_path: Path) -> None:
    from engine.mcp import HttpServer, McpConfigError, StdioServer, load_mcp_config

    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "x"], "env": {"K": "v-secret"}},
                    "web": {"url": "https://example.invalid/mcp", "headers": {"X-Key": "h-secret"}},
                    "typed": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
                    "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                    "nothing": {"args": []},
                    "bad name": {"command": "x"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    config = load_mcp_config(path)
    assert isinstance(config.servers["files"], StdioServer)
    assert isinstance(config.servers["web"], HttpServer)
    assert isinstance(config.servers["typed"], HttpServer)
    assert "SSE transport is not supported" in config.invalid["old"]
    assert "needs 'command'" in config.invalid["nothing"]
    assert "server name" in config.invalid["bad name"]
    assert config.usable() == ["files", "typed", "web"]
    assert "v-secret" not in repr(config) and "h-secret" not in repr(config)
    # It travels to actors pickled, secrets intact.
    again = pickle.loads(pickle.dumps(config))
    assert again.servers["files"].env["K"].get_secret_value() == "v-secret"  # type: ignore[union-attr]
    assert load_mcp_config(tmp_path / "absent.json") == McpConfig()
    path.write_text("{not json")
    with pytest.raises(McpConfigError, match=r"mcp\.json"):
        load_mcp_config(path)


def test_a_persona_file_names_its_servers() -> None:
    from personas.model import PersonaMeta

    base = {"id": "quinn", "name": "Quinn", "role": "tester"}
    assert PersonaMeta.model_validate(base).mcp_servers == ("*",)
    assert PersonaMeta.model_validate({**base, "mcpServers": "*"}).mcp_servers == ("*",)
    narrowed = PersonaMeta.model_validate({**base, "mcpServers": ["files", "web"]})
    assert narrowed.mcp_servers == ("files", "web")


# -- the gateway's catalog ----------------------------------------------------------
async def test_a_listing_that_fails_is_answered_with_an_error_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway.mcp import McpCatalog
    from protocol import ErrorFrame

    catalog = McpCatalog(parse_mcp_config({"mcpServers": {"fx": stdio()}}))

    async def broken(connect: bool = False) -> list[Any]:
        raise RuntimeError("the listing broke")

    monkeypatch.setattr(catalog.manager, "statuses", broken)
    sent: asyncio.Queue[Any] = asyncio.Queue()
    catalog.answer(sent.put_nowait, connect=False, request_id="r1")
    frame = await asyncio.wait_for(sent.get(), 10)
    assert isinstance(frame, ErrorFrame)
    assert (frame.code, frame.request_id) == ("internal", "r1")
    await catalog.aclose()
