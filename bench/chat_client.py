"""A WebSocket client of the gateway that times messages to their first token.

With :func:`login` and :func:`new_group`, what ``bench/latency.py``,
``bench/cost.py`` and ``bench/scale.py`` drive a server with.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import websockets


class Client:
    """One WebSocket client that times messages to their first token."""

    def __init__(self, url: str, token: str) -> None:
        self.ws_url = url.replace("http", "ws", 1) + "/ws"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.ws: Any = None
        self.waiting: dict[str, asyncio.Future[float]] = {}
        self.turn_of: dict[str, str] = {}
        self.seen_turns: set[str] = set()
        self.done: dict[str, asyncio.Event] = {}
        self.envelopes = 0
        # When each turn's first text arrived (perf_counter), in arrival order.
        self.first_tokens: list[float] = []
        self.results: dict[str, int] = {}  # turn results seen, per group
        self.result_seen = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, groups: list[str]) -> None:
        self.ws = await websockets.connect(
            self.ws_url, additional_headers=self.headers, max_size=None
        )
        for gid in groups:
            await self.ws.send(json.dumps({"type": "subscribe", "groupId": gid}))
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            frame = json.loads(raw)
            self.envelopes += "seq" in frame
            if frame.get("type") != "yeaft_output":
                continue
            gid, turn, data = frame["groupId"], frame["turnId"], frame["data"]
            if data["type"] == "assistant" and turn not in self.seen_turns:
                self.seen_turns.add(turn)
                now = time.perf_counter()
                self.first_tokens.append(now)
                fut = self.waiting.pop(gid, None)
                if fut is not None and not fut.done():
                    fut.set_result(now)
            elif data["type"] == "result":
                self.results[gid] = self.results.get(gid, 0) + 1
                self.result_seen.set()
                if gid in self.done:
                    self.done[gid].set()

    async def ask(self, gid: str, text: str) -> float:
        """Seconds from sending to the first token; waits for the turn to end."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[gid] = fut
        self.done[gid] = asyncio.Event()
        started = time.perf_counter()
        await self.ws.send(
            json.dumps(
                {
                    "type": "yeaft_session_chat",
                    "groupId": gid,
                    "text": text,
                    "clientMessageId": uuid.uuid4().hex,
                }
            )
        )
        first = await asyncio.wait_for(fut, 60)
        await asyncio.wait_for(self.done[gid].wait(), 120)
        return first - started

    async def close(self) -> None:
        if self._reader:
            self._reader.cancel()
        await self.ws.close()


async def login(url: str, password: str) -> tuple[str, httpx.AsyncClient]:
    """Log in as ``admin``: the token, and an HTTP client that sends it."""
    http = httpx.AsyncClient(base_url=url, timeout=60)
    res = await http.post("/api/login", json={"username": "admin", "password": password})
    res.raise_for_status()
    token = res.json()["token"]
    http.headers["Authorization"] = f"Bearer {token}"
    return token, http


async def new_group(http: httpx.AsyncClient, name: str, roster: list[str]) -> str:
    """Create a group of ``roster`` over HTTP; its id."""
    res = await http.post("/api/groups", json={"name": name, "roster": roster})
    res.raise_for_status()
    return str(res.json()["id"])
