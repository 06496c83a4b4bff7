"""One person of ``bench/overload.py``: a connection, a group, and what became of each message.

The client sends chat frames on a fixed schedule and an application ping
every 2 s from start to end (a client that stops would be closed as idle),
and records acks, refusals, first tokens, turn results, ping round trips and
how its connection closed.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import websockets

PING_EVERY_S = 2.0


@dataclass
class Client:
    """One person: a connection, a group, and what happened to each message."""

    url: str
    token: str
    group_id: str = ""
    ws: Any = None
    sent_at: dict[str, float] = field(default_factory=dict)
    acked: list[str] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)
    replied: int = 0
    all_replied: asyncio.Event = field(default_factory=asyncio.Event)
    refusals: Counter[str] = field(default_factory=Counter)
    first_tokens: list[float] = field(default_factory=list)
    seen_turns: set[str] = field(default_factory=set)
    results: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    pings: list[float] = field(default_factory=list)
    ping_sent: float | None = None
    sending: bool = False
    close_code: int | None = None
    closed_how: str = ""
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 0
    _reader: asyncio.Task[None] | None = None
    _keepalive: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.ws = await websockets.connect(
            self.url.replace("http", "ws", 1) + "/ws",
            additional_headers={"Authorization": f"Bearer {self.token}"},
            max_size=None,
        )
        await self.ws.send(json.dumps({"type": "subscribe", "groupId": self.group_id}))
        self._reader = asyncio.create_task(self._read())
        self._keepalive = asyncio.create_task(self._ping())

    async def _ping(self) -> None:
        """An application ping every 2 s, one at a time, while the connection is open."""
        while self.close_code is None:
            if self.ping_sent is None:
                self.ping_sent = time.perf_counter()
                try:
                    await self.ws.send(json.dumps({"type": "ping"}))
                except websockets.ConnectionClosed:
                    return
            await asyncio.sleep(PING_EVERY_S)

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self._on(json.loads(raw), time.perf_counter())
        except websockets.ConnectionClosed:
            pass
        self.close_code = self.ws.close_code
        rcvd, sent = self.ws.protocol.close_rcvd, self.ws.protocol.close_sent
        if rcvd is not None:
            self.closed_how = f"{rcvd.code} from the server"
        elif sent is not None:
            self.closed_how = f"{sent.code} by the client ({sent.reason})"
        else:
            self.closed_how = "dropped"
        # Nothing more will come: nobody waits for this client any longer.
        self.all_replied.set()
        self.answered.set()

    def _on(self, frame: dict[str, Any], now: float) -> None:
        kind = frame.get("type")
        if kind == "ack":
            cmid = frame["clientMessageId"]
            self.acked.append(cmid)
            self.ack_times.append(now - self.sent_at[cmid])
            self._replied()
        elif kind == "error":
            self.refusals[_refusal(frame)] += 1
            if frame.get("requestId") in self.sent_at:
                self._replied()
        elif kind == "pong" and self.ping_sent is not None:
            if self.sending:
                self.pings.append(now - self.ping_sent)
            self.ping_sent = None
        elif kind == "yeaft_output":
            data, turn = frame["data"], frame["turnId"]
            if data["type"] == "assistant" and turn not in self.seen_turns:
                self.seen_turns.add(turn)
                self.first_tokens.append(now)
            elif data["type"] == "result":
                self.results += 1
                if data.get("is_error"):
                    self.failed[str(data.get("error") or data.get("subtype"))[:80]] += 1
                if self.expected and self.results >= self.expected:
                    self.answered.set()

    def _replied(self) -> None:
        """Every chat frame gets one answer, an ack or an error that names it."""
        self.replied += 1
        if self.replied >= len(self.sent_at):
            self.all_replied.set()

    async def send_chat(self, text: str) -> None:
        cmid = uuid.uuid4().hex
        self.sent_at[cmid] = time.perf_counter()
        frame = {"type": "yeaft_session_chat", "groupId": self.group_id, "text": text}
        await self.ws.send(json.dumps({**frame, "clientMessageId": cmid}))

    async def run(self, rate: float, duration: float, start: float) -> None:
        """Send at ``rate`` per second on a fixed schedule (not one that drifts)."""
        self.sending = True
        for i in range(int(rate * duration)):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.close_code is not None:
                break
            try:
                await self.send_chat(f"message {i}")
            except websockets.ConnectionClosed:
                break
        self.sending = False

    def backlog(self) -> int:
        return len(self.acked) - len(self.first_tokens)

    def ttfts(self) -> list[tuple[float, float]]:
        """(send time, time to first token) of each acknowledged message that was answered.

        One VP answers a group's messages one at a time in the order they
        were stored, so the k-th acknowledged message is the k-th turn.
        """
        return [
            (self.sent_at[cmid], first - self.sent_at[cmid])
            for cmid, first in zip(self.acked, self.first_tokens, strict=False)
        ]

    async def close(self) -> None:
        for task in (self._reader, self._keepalive):
            if task is not None:
                task.cancel()
        await self.ws.close()


def _refusal(frame: dict[str, Any]) -> str:
    code = str(frame.get("code"))
    if code != "busy":
        return code
    if (frame.get("detail") or {}).get("reason") == "in_flight":
        return "busy: in flight"
    return "busy: group" if frame["message"].startswith("this group") else "busy: VP"
