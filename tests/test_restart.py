"""``yeaft serve`` killed or stopped with turns queued and running, then started again.

Black-box on both stores: a real server in a subprocess, real WebSockets.
Every message the server acked must end answered or with an error result,
every turn with exactly one result; a person who sends an interrupted
message again gets it answered.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from bench.nodes import READY, session_pids
from store import Store
from tests.fixtures.stores import StoreFactory
from tests.test_cli import PROVIDER_VARS, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # whole deployments start here

SLOW = "offline:default?ttft=0.05&tps=20&tokens=200"  # a 10 s reply
QUICK = "offline:default?ttft=0&tps=1000&tokens=5"
PAIR = ["steve", "linus"]


class Serve:
    """``yeaft serve`` in a session of its own, so every process of it can be killed."""

    def __init__(self, factory: StoreFactory) -> None:
        self.url = ""  # known once the server says where it listens
        self.env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
        self.env.update(
            YEAFT_DATA_DIR=str(factory.data_dir),
            YEAFT_REDIS_PREFIX=factory.prefix,
            YEAFT_DRAIN_TIMEOUT="0.5",
            YEAFT_OFFLINE_TPS="0",
            YEAFT_RAY_NAMESPACE=f"restart-{uuid.uuid4().hex[:8]}",
        )
        if factory.url:
            self.env["YEAFT_REDIS_URL"] = factory.url
        self.password = ""
        self.port = 0  # chosen by the OS unless a test needs the same port across restarts
        self.proc: subprocess.Popen[str] | None = None
        self.log_dir = factory.data_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def _spawn(self, model: str) -> subprocess.Popen[str]:
        # The server's log is kept beside its data, for a failing run's reader.
        # The child writes to its own copy of the file; this one closes at once.
        with (self.log_dir / "serve.log").open("a") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "gateway.cli", "serve", "--port", str(self.port)],
                cwd=ROOT,
                env={**self.env, "YEAFT_MODEL": model},
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )

    async def start(self, model: str) -> None:
        """Start and read stdout up to the ready line (the password comes before it, once)."""
        self.proc = await asyncio.to_thread(self._spawn, model)
        assert self.proc.stdout is not None
        async with asyncio.timeout(90):
            while line := await asyncio.to_thread(self.proc.stdout.readline):
                if found := re.search(r"password '([^']+)'", line):
                    self.password = found.group(1)
                if found := READY.search(line):
                    self.url = found.group(1)
                    return
                # The address is printed once the server answers there, not before.
                assert "http://" not in line, f"an address before the server answers: {line!r}"
        code = self.proc.wait()
        said = (self.log_dir / "serve.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"yeaft serve exited with {code} before it was ready:\n{said}")

    def kill(self) -> None:
        """SIGKILL every process of the server's session: the gateway, Ray, every actor."""
        assert self.proc is not None
        for pid in session_pids(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap(30)

    def interrupt(self) -> None:
        """Ctrl-C: the server drains its turns and stops."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        self._reap(120)

    def _reap(self, timeout_s: float) -> None:
        """Wait for the server to exit and close our end of its output."""
        assert self.proc is not None
        self.proc.wait(timeout=timeout_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()


@pytest.fixture
async def serve(store_factory: StoreFactory) -> AsyncIterator[Serve]:
    server = Serve(store_factory)
    try:
        yield server
    finally:
        server.close()
        # A killed deployment can leave its Ray session files behind; they
        # are in /tmp/ray and harmless.


async def _client(serve: Serve) -> tuple[httpx.AsyncClient, Any]:
    http = httpx.AsyncClient(base_url=serve.url, timeout=60)
    res = await http.post("/api/login", json={"username": "admin", "password": serve.password})
    res.raise_for_status()
    token = res.json()["token"]
    http.headers["Authorization"] = f"Bearer {token}"
    ws = await websockets.connect(
        serve.url.replace("http", "ws", 1) + "/ws",
        additional_headers={"Authorization": f"Bearer {token}"},
        max_size=None,
    )
    return http, ws


async def _until(ws: Any, pred: Any, within: float = 60) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while True:
            frame = json.loads(await ws.recv())
            if pred(frame):
                return frame


async def _send(ws: Any, group_id: str, cmid: str) -> dict[str, Any]:
    chat = {"type": "yeaft_session_chat", "groupId": group_id, "text": cmid}
    await ws.send(json.dumps({**chat, "clientMessageId": cmid}))
    return await _until(ws, lambda f: f.get("type") == "ack" and f["clientMessageId"] == cmid)


async def _busy(serve: Serve) -> tuple[str, list[str]]:
    """A group whose two VPs each run one turn with two more queued; returns acked ids."""
    http, ws = await _client(serve)
    res = await http.post("/api/groups", json={"name": "team", "roster": PAIR})
    res.raise_for_status()
    group_id = str(res.json()["id"])
    await ws.send(json.dumps({"type": "subscribe", "groupId": group_id}))
    acked = [(await _send(ws, group_id, f"c{n}"))["messageId"] for n in range(3)]
    streaming: set[str] = set()
    await _until(
        ws,
        lambda f: (
            f.get("type") == "yeaft_output"
            and f["data"]["type"] == "assistant"
            and (streaming.add(f["vpId"]) or streaming == set(PAIR))
        ),
    )
    await ws.close()
    await http.aclose()
    return group_id, acked


async def _every_turn_ended_once(store: Store, group_id: str, acked: list[str]) -> set[str]:
    """Each acked message's turns have one result each.

    Returns the messages some VP has not answered: its only turns on them
    were interrupted.
    """
    batch = await store.read_events(group_id, 0, limit=100_000)
    results: dict[str, list[dict[str, Any]]] = {}
    for event in batch.events:
        env = json.loads(event.text)
        if env.get("type") == "yeaft_output" and env["data"]["type"] == "result":
            results.setdefault(env["turnId"], []).append(env["data"])
    interrupted = set()
    for message_id in acked:
        turns = await store.turns_of(group_id, message_id)
        assert {t.vp_id for t in turns} == set(PAIR), "an acked message lost a turn"
        for turn in turns:
            assert len(results.get(turn.turn_id, [])) == 1, (turn, results.get(turn.turn_id))
        for vp in PAIR:
            if all(t.interrupted for t in turns if t.vp_id == vp):
                interrupted.add(message_id)
    assert await store.open_turns() == []
    return interrupted


async def _idle(store: Store, group_id: str) -> None:
    """Wait, following the group's event log, until no turn is left open."""
    seq = await store.head(group_id)
    async with asyncio.timeout(60):
        while await store.open_turns():
            batch = await store.read_events(group_id, seq, wait=1.0)
            seq = max([seq, *(e.seq for e in batch.events)])


async def _resend_answers(serve: Serve, group_id: str, store: Store, acked: list[str]) -> None:
    """Send each interrupted message again: it is answered, and nothing else is."""
    interrupted = await _every_turn_ended_once(store, group_id, acked)
    assert interrupted, "nothing was interrupted: the test did not stop the server mid-turn"
    http, ws = await _client(serve)
    await ws.send(json.dumps({"type": "subscribe", "groupId": group_id}))
    for n, message_id in enumerate(acked):
        ack = await _send(ws, group_id, f"c{n}")
        assert ack["duplicate"] and ack["messageId"] == message_id
    await _idle(store, group_id)
    # Every VP has answered every message now, and only the interrupted
    # turns were run again: one new turn per VP that had lost its turn.
    assert await _every_turn_ended_once(store, group_id, acked) == set()
    for message_id in acked:
        turns = await store.turns_of(group_id, message_id)
        lost = sum(t.interrupted for t in turns)
        assert len(turns) == len(PAIR) + lost, turns
    await ws.close()
    await http.aclose()


async def test_a_killed_server_answers_every_acked_message_after_its_restart(
    serve: Serve, store_factory: StoreFactory
) -> None:
    await serve.start(SLOW)
    group_id, acked = await _busy(serve)
    serve.kill()

    await serve.start(QUICK)
    store = store_factory()
    await _idle(store, group_id)
    await _resend_answers(serve, group_id, store, acked)


async def test_a_stopped_server_ends_its_turns_and_answers_after_its_restart(
    serve: Serve, store_factory: StoreFactory
) -> None:
    await serve.start(SLOW)
    group_id, acked = await _busy(serve)
    serve.interrupt()
    store = store_factory()
    # Stopped, not killed: every turn already has its one result.
    await _every_turn_ended_once(store, group_id, acked)

    await serve.start(QUICK)
    await _resend_answers(serve, group_id, store, acked)
