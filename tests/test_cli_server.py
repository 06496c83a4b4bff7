"""``yeaft user``, ``yeaft token`` and ``yeaft chat`` against real pieces."""

from __future__ import annotations

import asyncio
import io
import queue
from pathlib import Path
from typing import Any

import pytest

from gateway.auth import verify_token
from gateway.chat_client import ChatClient, ChatError
from gateway.settings import GatewaySettings
from tests.fixtures.gateway import StartGateway, WsClient
from tests.test_cli import yeaft


def test_user_add_and_token(tmp_path: Path) -> None:
    refused = subprocess_add(tmp_path, "bob", "a long enough password")
    assert refused.returncode == 2 and "--create" in refused.stderr
    assert not any(tmp_path.iterdir())  # nothing was made
    created = subprocess_add(tmp_path, "bob", "a long enough password", "--create")
    assert created.returncode == 0, created.stderr
    assert f"using the data directory {tmp_path}" in created.stderr
    again = subprocess_add(tmp_path, "bob", "a long enough password")
    assert again.returncode == 2 and "bob" in again.stderr
    listed = yeaft("user", "list", tmp=tmp_path)
    assert listed.stdout.split() == ["bob"]
    token = yeaft("token", "bob", tmp=tmp_path).stdout.strip()
    settings = GatewaySettings(data_dir=tmp_path)
    assert verify_token(settings, token) == "bob"
    missing = yeaft("token", "nobody", tmp=tmp_path)
    assert missing.returncode == 2 and "user add nobody" in missing.stderr


def subprocess_add(tmp: Path, name: str, password: str, *extra: str) -> Any:
    import os
    import subprocess
    import sys

    from tests.test_cli import PROVIDER_VARS, ROOT

    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env["YEAFT_DATA_DIR"] = str(tmp)
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "user", "add", name, "--password-stdin", *extra],
        cwd=ROOT,
        env=env,
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )


async def eventually(pred: Any, timeout_s: float = 20.0) -> None:
    """Terminal output has no event to await: check it until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_chat_client_streams_replies_and_quits(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus", "steve"]}, headers=gw.auth("ann")
    )
    assert made.status_code in (200, 201), made.text
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "team", out=out)
    task = asyncio.create_task(client.run(read_line=lines.get))
    lines.put("@linus @steve how do we cache?\n")
    await eventually(
        lambda: (
            "linus›" in out.getvalue()
            and "steve›" in out.getvalue()
            and client.last_seq > 0
            and out.getvalue().count("— ") >= 2
        )
    )
    lines.put("/quit\n")
    assert await asyncio.wait_for(task, 20) == 0
    text = out.getvalue()
    assert "— Linus" in text and "— Steve" in text


async def test_chat_client_reports_an_unknown_group(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    with pytest.raises(ChatError, match="no group 'nope'"):
        await ChatClient(gw.base_url, token, "nope", out=io.StringIO()).resolve_group()
    with pytest.raises(ChatError, match="token"):
        await ChatClient(gw.base_url, "bad.token", "team", out=io.StringIO()).resolve_group()


async def test_chat_client_shows_other_peoples_messages_once(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    await gw.user("bob")
    made = await gw.http.post(
        "/api/groups", json={"name": "team", "roster": ["linus"]}, headers=gw.auth("ann")
    )
    gid = made.json()["id"]
    await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "team", out=out)
    task = asyncio.create_task(client.run(read_line=lines.get))
    lines.put("@linus what is a page cache?\n")
    bob = await WsClient.open(gw, "bob")
    await bob.send(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "@linus and a slab?",
            "clientMessageId": "b1",
        }
    )
    # Whether it comes with the history or live, bob's message is shown once,
    # as bob's; ann's own line, typed here, is not printed back to her.
    await eventually(lambda: out.getvalue().count("— Linus") >= 2)
    lines.put("/quit\n")
    assert await asyncio.wait_for(task, 20) == 0
    text = out.getvalue()
    assert text.count("bob: @linus and a slab?") == 1
    assert "ann: " not in text
    await bob.close()


def test_serve_on_a_port_in_use_makes_nothing_and_names_the_port(tmp_path: Path) -> None:
    import socket
    import time

    from tests.test_cli import yeaft

    data = tmp_path / "data"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        began = time.monotonic()
        out = yeaft("serve", "--port", str(port), tmp=data)
        took = time.monotonic() - began
    assert out.returncode == 2, out.stderr
    assert f"port {port} on 127.0.0.1" in out.stderr
    assert "--port" in out.stderr and "YEAFT_PORT" in out.stderr
    assert "Traceback" not in out.stderr and "password" not in out.stdout
    # Nothing was created (no store, no first password, no Ray session in it),
    # so the next start on a free port still prints the admin password.
    assert not data.exists()
    assert took < 10, f"refusing took {took:.1f} s"
