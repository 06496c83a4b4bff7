"""Helpers shared by the MCP tests (``tests/test_mcp*.py``)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from actors.config import RuntimeConfig
from actors.turns import TurnOrigin, TurnOutcome, TurnRequest
from actors.vp_actor import VPActor
from actors.vp_commands import RunTurn
from engine.mcp import parse_mcp_config
from engine.settings import EngineConfig
from protocol.settings import GroupSettings
from store.base import Group, GroupMessage
from tests.fixtures.llm_server import FakeLLM, RecordedRequest
from tests.fixtures.stores import StoreFactory

# The fixture server, written with the MCP SDK's server API.
SERVER = str(Path(__file__).resolve().parent / "fixtures" / "mcp_server.py")


def stdio(**extra: Any) -> dict[str, Any]:
    """The configuration of the fixture server over stdio, with ``extra`` settings."""
    return {"command": sys.executable, "args": [SERVER, "stdio"], **extra}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_http(token: str | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The fixture server over streamable HTTP (wanting ``token``, if given): URL and process."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port), *([token] if token else [])]
    )
    try:
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError("the MCP HTTP server exited at start")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                # Nothing to await: the port opens when uvicorn is up.
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def silent_http() -> Iterator[str]:
    """The URL of a streamable HTTP MCP server that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        # Connections complete in the backlog; nothing ever reads them.
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"


def vp_config(
    fake_llm: FakeLLM,
    stores: StoreFactory,
    servers: dict[str, Any],
    personas_dir: str | None = None,
    model: str = "openai:gpt-test",
    **limits: Any,
) -> RuntimeConfig:
    """A VP's configuration: the fake model server, ``servers`` as its MCP servers."""
    return RuntimeConfig(
        personas_dir=personas_dir,
        store=stores.config,
        engine=EngineConfig(
            model=model,
            openai_api_key=SecretStr("sk-test-0123456789"),
            openai_base_url=fake_llm.openai_base_url,
            anthropic_api_key=SecretStr("sk-ant-test-0123456789"),
            anthropic_base_url=fake_llm.anthropic_base_url,
            max_retries=0,
        ),
        mcp=parse_mcp_config({"mcpServers": servers}, **limits),
        dream_idle_s=0,
        dream_every_turns=0,
    )


async def turn(
    worker: VPActor,
    text: str = "@linus go",
    settings: GroupSettings | None = None,
    settle: bool = True,
) -> tuple[TurnOutcome, list[dict[str, Any]]]:
    """One turn in a new group; its outcome and the payloads it wrote to the event log.

    The group approves every call: these tests are about the MCP client, and
    approvals have tests of their own (tests/test_approval*.py).
    """
    store = worker.services.store
    gid = f"grp_{uuid.uuid4().hex[:10]}"
    settings = (settings or GroupSettings()).model_copy(update={"auto_approve": True})
    group = Group(id=gid, name="g", roster=[worker.vp_id], settings=settings)
    await store.create_group(group)
    msg, _ = await store.append_message(gid, GroupMessage(author="ann", role="user", text=text))
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="ann")
    if settle:
        # A VP opens its servers in the background when it is made, and a
        # turn offers those ready by then: most tests want them all tried first.
        await worker.services.mcp.settled()
    outcome = await worker.call(RunTurn(TurnRequest(gid, worker.vp_id, uuid.uuid4().hex, origin)))
    events = (await store.read_events(gid, 0)).events
    return outcome, [json.loads(e.text) for e in events]


def tool_results(request: RecordedRequest) -> list[str]:
    """The tool results the model was sent (OpenAI wire format)."""
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def offered(request: RecordedRequest) -> dict[str, Any]:
    return {t["function"]["name"]: t["function"] for t in request.body.get("tools", [])}
