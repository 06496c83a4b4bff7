"""``yeaft chat`` in a real pseudo-terminal, against ``yeaft serve`` hung, killed and restarted.

What a person at a terminal does: pastes a message longer than the
kernel's 4,095-character line, stops a reply with ``/cancel``, and types a
message while the server has hung; the server is then killed and started
again on the same port and data. The message must be answered (sent again
after the reconnect, not lost in the dead connection) and ``/cancel`` must
stop that answer.
"""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bench.nodes import session_pids
from tests.fixtures.stores import StoreFactory
from tests.test_cli import PROVIDER_VARS, ROOT
from tests.test_restart import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SLOW = "offline:default?ttft=0.05&tps=20&tokens=200"  # a 10 s reply
PASTE = "".join(f"line {n:04d} of a long paste. " for n in range(250))  # 6,000 characters


class PtyChat:
    """``yeaft chat`` with a pseudo-terminal as its standard input and output."""

    def __init__(self, url: str, token: str, group: str) -> None:
        self.master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
        env.update(NO_COLOR="1", YEAFT_TOKEN=token, TERM="xterm")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "chat", group, "--url", url],
            cwd=ROOT,
            env=env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self.out = bytearray()
        self.grew = asyncio.Event()
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed its side
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.out += data
        self.grew.set()

    def text(self, since: int = 0) -> str:
        return self.out[since:].decode(errors="replace")

    async def expect(self, wanted: str, since: int = 0, within: float = 60) -> None:
        """Wait until ``wanted`` has been printed after byte ``since``."""
        async with asyncio.timeout(within):
            while wanted not in self.text(since):
                self.grew.clear()
                await self.grew.wait()

    def type(self, keys: str) -> int:
        """Type ``keys``; returns where the output stood, to expect what follows."""
        mark = len(self.out)
        os.write(self.master, keys.encode())
        return mark

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.close(self.master)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Serve]:
    factory = StoreFactory("embedded", tmp_path / "data", None, f"chat-{uuid.uuid4().hex[:8]}")
    serve = Serve(factory)
    serve.port = free_port()  # the client reconnects to the same address
    try:
        yield serve
    finally:
        serve.close()


def freeze(serve: Serve) -> None:
    """Stop every process of the server (a hung server: connections stay open, nothing answers)."""
    assert serve.proc is not None
    for pid in session_pids(serve.proc.pid):
        os.kill(pid, signal.SIGSTOP)


async def test_chat_in_a_terminal_pastes_whole_and_resumes_across_a_server_restart(
    server: Serve,
) -> None:
    await server.start(SLOW)
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        login = await http.post(
            "/api/login", json={"username": "admin", "password": server.password}
        )
        token = login.json()["token"]
        http.headers["Authorization"] = f"Bearer {token}"
        made = await http.post("/api/groups", json={"name": "team", "roster": ["linus"]})
        group_id = made.json()["id"]
        chat = PtyChat(server.url, token, "team")
        try:
            await chat.expect("team> ")
            # A paste longer than the terminal's line is taken whole, as one message.
            mark = chat.type(f"\x1b[200~{PASTE}\x1b[201~\r")
            await chat.expect("linus›", since=mark)
            mark = chat.type("/cancel\r")
            await chat.expect("cancelled the replies of linus", since=mark)
            history = (await http.get(f"/api/groups/{group_id}/messages")).json()["messages"]
            assert [m["text"] for m in history if m["role"] == "user"] == [PASTE.strip()]

            # The server hangs: a message typed now reaches nobody.
            freeze(server)
            mark = chat.type("@linus after the restart\r")
            await chat.expect("(connection lost; reconnecting", since=mark, within=30)
            server.kill()
            await server.start(SLOW)
            await chat.expect("(reconnected: resuming after seq", since=mark)
            await chat.expect('"after the restart"', since=mark)
            # The answer is live, so it can be stopped.
            cancel = chat.type("/cancel\r")
            await chat.expect("cancelled the replies of linus", since=cancel)
            chat.type("/quit\r")
            assert await asyncio.to_thread(chat.proc.wait, 30) == 0
        finally:
            chat.close()
