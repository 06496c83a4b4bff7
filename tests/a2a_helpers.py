"""Helpers of the A2A tool tests: the fixture agent in a subprocess, and the VP's script."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply
from tests.group_helpers import last_is_tool_result
from tests.mcp_helpers import free_port

AGENT = str(Path(__file__).resolve().parent / "fixtures" / "a2a_agent.py")
TOKEN = "a2a-token-0123456789-secret"


@contextlib.contextmanager
def serve_agent(token: str | None = TOKEN) -> Iterator[str]:
    """The fixture agent (``tests/fixtures/a2a_agent.py``) on a free port: its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, AGENT, str(port), *([token] if token else [])])
    try:
        for _ in range(400):
            if proc.poll() is not None:
                raise RuntimeError("the A2A fixture agent exited at start")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                # Nothing to await: the port opens when uvicorn is up.
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def silent_agent() -> Iterator[str]:
    """The base URL of an agent that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def asks_the_agent(request: ModelRequest) -> Reply:
    """Sends the person's words after ``ask:`` to the agent its message names, then reports.

    ``@linus ask:lib papers on actors`` calls ``a2a__lib`` with ``papers on
    actors``; a message without ``ask:`` is answered without any tool. The
    report quotes the tool's result and its description as offered then.
    """
    if last_is_tool_result(request):
        name = request.messages[-1].tool_name or ""
        described = next((t.description for t in request.tools if t.name == name), "")
        return Reply(f"result: {request.messages[-1].content} || description: {described}")
    text = next(m.content for m in reversed(request.messages) if m.role == "user")
    if "ask:" not in text:
        tools = ",".join(sorted(t.name for t in request.tools if t.name.startswith("a2a__")))
        return Reply(f"no call; a2a tools: {tools}")
    agent, _, words = text.split("ask:", 1)[1].partition(" ")
    words = words.split(" !approve", 1)[0]
    return Reply(tool_calls=[(f"a2a__{agent}", {"message": words})])
