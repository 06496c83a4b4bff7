"""Adding and removing MCP servers over HTTP: who may, what the file holds, and that
VP actors use a new server without a restart (a real stdio server, real Ray)."""

from __future__ import annotations

import asyncio
import json
import stat
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from tests.fixtures.gateway import StartGateway, WsClient
from tests.fixtures.llm_server import FakeLLM, ScriptedToolCall
from tests.fixtures.ray_cluster import MakeRuntime
from tests.mcp_helpers import silent_http

SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")
SECRET = "added-secret-0123456789"


def _stdio(name: str = "fx") -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [SERVER, "stdio"],
        "env": {"FIXTURE_SECRET": SECRET},
    }


async def test_only_admins_change_servers_and_secrets_stay_in_the_file(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await start_gateway(make_runtime(), admins="root")
    await gw.user("root")
    await gw.user("ann")
    path = gw.settings.mcp_path()

    listed = (await gw.http.get("/api/mcp/servers", headers=gw.auth("ann"))).json()
    assert listed == {"servers": [], "canEdit": False}
    refused = await gw.http.post("/api/mcp/servers", json=_stdio(), headers=gw.auth("ann"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    async with httpx.AsyncClient(base_url=gw.base_url) as anonymous:
        assert (await anonymous.post("/api/mcp/servers", json=_stdio())).status_code == 401
    assert not path.exists()

    added = await gw.http.post("/api/mcp/servers", json=_stdio(), headers=gw.auth("root"))
    assert added.status_code == 201, added.text
    assert added.json()["name"] == "fx" and added.json()["secretKeys"] == ["FIXTURE_SECRET"]
    assert SECRET not in added.text
    on_disk = json.loads(path.read_text())
    assert on_disk["mcpServers"]["fx"]["env"] == {"FIXTURE_SECRET": SECRET}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    http = {"name": "web", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": SECRET}}
    assert (await gw.http.post("/api/mcp/servers", json=http, headers=gw.auth("root"))).is_success
    listing = await gw.http.get("/api/mcp/servers", headers=gw.auth("root"))
    assert listing.json()["canEdit"] is True
    assert [s["name"] for s in listing.json()["servers"]] == ["fx", "web"]
    assert listing.json()["servers"][1]["secretKeys"] == ["Authorization"]
    assert SECRET not in listing.text

    again = await gw.http.post("/api/mcp/servers", json=_stdio(), headers=gw.auth("root"))
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    for bad in (
        {"name": "x"},
        {**_stdio("both"), "url": "http://127.0.0.1:9/mcp"},
        {**_stdio("a__b")},
        {**_stdio("sp ace")},
        {"name": "h", "url": "ftp://x"},
    ):
        answer = await gw.http.post("/api/mcp/servers", json=bad, headers=gw.auth("root"))
        assert answer.status_code in (400, 422), (bad, answer.text)
        assert answer.json()["error"]["code"] == "invalid_request"

    gone = await gw.http.delete("/api/mcp/servers/web", headers=gw.auth("ann"))
    assert gone.status_code == 403
    assert (
        await gw.http.delete("/api/mcp/servers/web", headers=gw.auth("root"))
    ).status_code == 204
    missing = await gw.http.delete("/api/mcp/servers/web", headers=gw.auth("root"))
    assert missing.status_code == 404
    assert list(json.loads(path.read_text())["mcpServers"]) == ["fx"]


async def test_a_server_added_at_run_time_is_used_by_a_running_vp(
    start_gateway: StartGateway, make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    engine = {
        "model": "openai:gpt-test",
        "openai_api_key": SecretStr("sk-test-0123456789"),
        "openai_base_url": fake_llm.openai_base_url,
        "max_retries": 0,
    }
    gw = await start_gateway(make_runtime(engine=engine), admins="ann")
    await gw.user("ann")
    created = await gw.http.post(
        "/api/groups", json={"name": "t", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    gid = created.json()["id"]
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})

    # A first turn starts linus's actor with no MCP server at all.
    fake_llm.text("nothing to call yet")
    await client.request({"type": "yeaft_session_chat", "groupId": gid, "text": "hi"})
    await client.recv_until(_is_result, within=60)
    assert "tools" not in fake_llm.requests[0].body or not any(
        t["function"]["name"].startswith("fx__") for t in fake_llm.requests[0].body["tools"]
    )

    added = await gw.http.post("/api/mcp/servers", json=_stdio(), headers=gw.auth("ann"))
    assert added.status_code == 201
    fake_llm.tool_calls(ScriptedToolCall("fx__env", {"name": "FIXTURE_SECRET"}))
    fake_llm.text("done")
    chat = {"type": "yeaft_session_chat", "groupId": gid, "text": "env? !approve fx__env"}
    await client.request(chat)
    await client.recv_until(_is_result, within=60)
    tool_messages = [m for m in fake_llm.requests[2].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == [SECRET]

    # Removed: the next turn is offered none of its tools.
    removed = await gw.http.delete("/api/mcp/servers/fx", headers=gw.auth("ann"))
    assert removed.status_code == 204
    fake_llm.text("plain")
    await client.request({"type": "yeaft_session_chat", "groupId": gid, "text": "and now?"})
    await client.recv_until(_is_result, within=60)
    last = fake_llm.requests[-1].body
    assert not any(t["function"]["name"].startswith("fx__") for t in last.get("tools", []))
    await client.close()


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


async def test_a_server_the_vps_are_still_connecting_to_holds_up_no_turn_nor_its_removal(
    start_gateway: StartGateway, make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    engine = {
        "model": "openai:gpt-test",
        "openai_api_key": SecretStr("sk-test-0123456789"),
        "openai_base_url": fake_llm.openai_base_url,
        "max_retries": 0,
    }
    with silent_http() as url:
        runtime = make_runtime(engine=engine)
        gw = await start_gateway(runtime, admins="root", mcp_connect_timeout=60)
        await gw.user("root")
        roster = {"name": "t", "roster": ["linus", "ada"]}
        created = await gw.http.post("/api/groups", json=roster, headers=gw.auth("root"))
        assert created.status_code == 201
        silent = {"name": "silent", "url": url}
        added = await gw.http.post("/api/mcp/servers", json=silent, headers=gw.auth("root"))
        assert added.status_code == 201
        # The running VP hosts open it in the background and keep trying (60 s here).
        async with asyncio.timeout(60):
            while True:
                listing = await gw.http.get("/api/mcp/servers", headers=gw.auth("root"))
                [server] = listing.json()["servers"]
                if server["hosts"] and all(h["state"] == "connecting" for h in server["hosts"]):
                    break
                await asyncio.sleep(0.1)  # nothing to await: the hosts are polled as people do
        # A turn meanwhile is offered the servers that are ready (none) and answers at once.
        client = await WsClient.open(gw, "root")
        gid = created.json()["id"]
        await client.request({"type": "subscribe", "groupId": gid})
        fake_llm.text("Hello.")
        began = time.monotonic()
        await client.request({"type": "yeaft_session_chat", "groupId": gid, "text": "@linus hi"})
        await client.recv_until(_is_result, within=20)
        answered = time.monotonic() - began
        await client.close()
        assert not any(
            t["function"]["name"].startswith("silent__")
            for t in fake_llm.requests[-1].body.get("tools", [])
        )
        began = time.monotonic()
        # Before, every host waited out the connect timeout before letting go of it.
        async with asyncio.timeout(10):
            gone = await gw.http.delete("/api/mcp/servers/silent", headers=gw.auth("root"))
        print(
            f"\nwith a server {len(server['hosts'])} VP hosts were connecting to (connect "
            f"timeout 60 s): a turn answered in {answered:.2f}s, the server was removed in "
            f"{time.monotonic() - began:.2f}s"
        )
        assert gone.status_code == 204
        listing = await gw.http.get("/api/mcp/servers", headers=gw.auth("root"))
        assert listing.json()["servers"] == []
