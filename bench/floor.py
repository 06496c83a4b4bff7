"""The floor: the least a server must do to relay a group chat to a model and back.

A minimal equivalent of ``yeaft serve`` for ``bench/latency.py``'s clients,
with no Ray, no actors, no store and no authentication, so that the
project's figures can be read as ratios to it. One process serves, with
the gateway's own stack (Starlette on uvicorn, the same WebSocket
implementation, permessage-deflate and keepalive settings):

- ``GET /healthz``; ``POST /api/login`` (any name and password: a token);
  ``POST /api/groups`` (``{name, roster}``: ``{id, ...}``, kept in memory);
- ``/ws`` (any token or none): ``subscribe`` → ``group_update
  {action: "subscribed"}``, then every envelope of the group from then on;
  ``ping`` → ``pong``; ``yeaft_session_chat`` → ``ack`` to the sender, a
  ``group_message`` envelope, then for each VP addressed (its ``@name``, or
  ``@all`` or no mention: the whole roster) a turn: ``agent_status``
  thinking, a streamed call of the model through the ``openai`` SDK
  (``AsyncOpenAI``, ``stream: true`` with usage), ``agent_status``
  streaming at the first delta, the deltas as ``yeaft_output`` assistant
  envelopes coalesced like ``engine/bridge.py`` (the first at once, then at
  most every 50 ms or when 200 characters wait), a ``yeaft_output`` result,
  and ``agent_status`` idle.

Every envelope carries the group's next ``seq``, is serialised once and
queued to each watching connection, whose own task writes it, as the
gateway does. The model is the ``openai`` SDK's default configuration:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment.

    OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 OPENAI_API_KEY=x \\
        python bench/floor.py [--port 0] [--model gpt-4o-mini]

prints ``floor ready on http://127.0.0.1:PORT`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn
from openai import AsyncOpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

READY = "floor ready on"
FLUSH_INTERVAL = 0.05
FLUSH_CHARS = 200
QUEUE_SIZE = 2000
MENTION = re.compile(r"@([\w-]+)")


def _dumps(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False)


class Watcher:
    """One WebSocket: a bounded queue of frames and the task that writes them."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.queue: asyncio.Queue[str] = asyncio.Queue(QUEUE_SIZE)
        self.open = True
        self.writer = asyncio.create_task(self._write())

    def offer(self, text: str) -> None:
        """Queue a frame; a client too slow to take it is dropped, as the gateway does."""
        if not self.open:
            return
        try:
            self.queue.put_nowait(text)
        except asyncio.QueueFull:
            self.open = False
            self.writer.cancel()

    async def _write(self) -> None:
        send = self.websocket.send_text
        while True:
            await send(await self.queue.get())

    async def close(self) -> None:
        self.open = False
        self.writer.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.writer


class Group:
    """A group in memory: its roster, its next ``seq`` and who watches it."""

    def __init__(self, gid: str, name: str, roster: list[str]) -> None:
        self.id, self.name, self.roster = gid, name, roster
        self.seq = 0
        self.watchers: set[Watcher] = set()

    def publish(self, frame: dict[str, Any]) -> None:
        """Give the envelope the next ``seq``, serialise it once, queue it to every watcher."""
        self.seq += 1
        frame["seq"] = self.seq
        text = _dumps(frame)
        for watcher in self.watchers:
            watcher.offer(text)

    def view(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "roster": self.roster, "members": ["admin"]}


class Coalescer:
    """Text deltas to ``send`` as ``engine.bridge.WebBridge`` batches them.

    The first delta of a turn goes out at once; later ones wait until
    ``FLUSH_CHARS`` characters are held or ``FLUSH_INTERVAL`` seconds have
    passed since the last send (a timer sends what is left then).
    """

    def __init__(self, send: Callable[[str], None]) -> None:
        self.send = send
        self.held: list[str] = []
        self.chars = 0
        self.last = -1e9
        self.timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()

    def feed(self, text: str) -> None:
        self.held.append(text)
        self.chars += len(text)
        if self.chars >= FLUSH_CHARS or self.loop.time() - self.last >= FLUSH_INTERVAL:
            self.flush()
        elif self.timer is None:
            self.timer = self.loop.call_at(self.last + FLUSH_INTERVAL, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.held:
            text = "".join(self.held)
            self.held, self.chars = [], 0
            self.last = self.loop.time()
            self.send(text)


class Relay:
    """The groups, and the turns that answer their messages through the model."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.groups: dict[str, Group] = {}
        self._client: AsyncOpenAI | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def client(self) -> AsyncOpenAI:
        if self._client is None:  # made on the server's loop, on first use
            self._client = AsyncOpenAI(max_retries=0)
        return self._client

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def chat(self, watcher: Watcher, frame: dict[str, Any]) -> None:
        group = self.groups.get(str(frame.get("groupId")))
        if group is None:
            watcher.offer(_dumps({"type": "error", "code": "not_found", "message": "no group"}))
            return
        text = str(frame.get("text", ""))
        client_id = frame.get("clientMessageId")
        message_id = uuid.uuid4().hex
        named = [m for m in MENTION.findall(text) if m in group.roster]
        vps = group.roster if not named or "all" in MENTION.findall(text) else named
        ack = {"type": "ack", "clientMessageId": client_id, "messageId": message_id}
        watcher.offer(_dumps(ack | {"groupId": group.id, "duplicate": False}))
        group.publish(
            {
                "type": "group_message",
                "groupId": group.id,
                "messageId": message_id,
                "author": "admin",
                "role": "user",
                "text": text,
                "ts": time.time(),
                "mentions": list(dict.fromkeys(named)),
                "clientMessageId": client_id,
                "chainId": message_id,
            }
        )
        for vp in dict.fromkeys(vps):
            self.spawn(self.turn(group, vp, message_id, text))

    async def turn(self, group: Group, vp: str, trigger: str, text: str) -> None:
        turn = f"{uuid.uuid4().hex[:8]}:{vp}"
        started = time.monotonic()
        base = {"groupId": group.id, "vpId": vp, "turnId": turn}
        output = {"type": "yeaft_output", "conversationId": group.id} | base

        def status(state: str) -> None:
            group.publish({"type": "agent_status"} | base | {"state": state, "triggerId": trigger})

        def send_text(chunk: str) -> None:
            content = [{"type": "text", "text": chunk}]
            data = {"type": "assistant", "message": {"role": "assistant", "content": content}}
            group.publish(output | {"data": data})

        status("thinking")
        coalescer = Coalescer(send_text)
        reply: list[str] = []
        usage: dict[str, int] = {}
        error: str | None = None
        try:
            stream = await self.client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": f"You are {vp}, a member of a team chat."},
                    {"role": "user", "content": text},
                ],
                stream=True,
                stream_options={"include_usage": True},
            )
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        usage = {
                            "input_tokens": chunk.usage.prompt_tokens,
                            "output_tokens": chunk.usage.completion_tokens,
                        }
                    for choice in chunk.choices:
                        if choice.delta is not None and choice.delta.content:
                            if not reply:
                                status("streaming")
                            reply.append(choice.delta.content)
                            coalescer.feed(choice.delta.content)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        coalescer.flush()
        result = {
            "type": "result",
            "subtype": "error_during_execution" if error else "success",
            "session_id": group.id,
            "is_error": error is not None,
            "duration_ms": int((time.monotonic() - started) * 1000),
            "total_cost_usd": 0.0,
            "usage": usage or {"input_tokens": 0, "output_tokens": 0},
            "stop_reason": "error" if error else "end_turn",
            "result": "".join(reply) or None,
            "model": f"openai:{self.model}",
        }
        if error:
            result["error"] = error
        group.publish(output | {"data": result})
        status("error" if error else "idle")


def build_app(relay: Relay) -> Starlette:
    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def login(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"token": "floor", "username": body.get("username", "admin")})

    async def new_group(request: Request) -> JSONResponse:
        body = await request.json()
        group = Group(uuid.uuid4().hex[:12], str(body.get("name", "")), list(body["roster"]))
        relay.groups[group.id] = group
        return JSONResponse(group.view(), status_code=201)

    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        watcher = Watcher(websocket)
        watching: list[Group] = []
        try:
            while True:
                frame = json.loads(await websocket.receive_text())
                kind = frame.get("type")
                if kind == "yeaft_session_chat":
                    relay.chat(watcher, frame)
                elif kind == "subscribe":
                    group = relay.groups.get(str(frame.get("groupId")))
                    if group is None:
                        error = {"type": "error", "code": "not_found", "message": "no group"}
                        watcher.offer(_dumps(error))
                        continue
                    reply = {"type": "group_update", "action": "subscribed"}
                    watcher.offer(_dumps(reply | {"group": group.view()}))
                    group.watchers.add(watcher)
                    watching.append(group)
                elif kind == "ping":
                    watcher.offer('{"type":"pong"}')
        except WebSocketDisconnect:
            pass
        finally:
            for group in watching:
                group.watchers.discard(watcher)
            await watcher.close()

    routes = [
        Route("/healthz", healthz),
        Route("/api/login", login, methods=["POST"]),
        Route("/api/groups", new_group, methods=["POST"]),
        WebSocketRoute("/ws", ws),
    ]
    return Starlette(routes=routes)


class _Announcing(uvicorn.Server):
    """Prints the ready line once the app has started and the socket listens."""

    url = ""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"{READY} {self.url}", flush=True)


async def serve(host: str, port: int, model: str) -> None:
    """Serve until interrupted, on the default asyncio loop as ``yeaft serve`` does."""
    config = uvicorn.Config(
        build_app(Relay(model)),
        host=host,
        port=port,
        # As gateway.server.uvicorn_config sets them by default.
        ws="websockets-sansio",
        ws_max_size=1024 * 1024,
        ws_ping_interval=25.0,
        ws_ping_timeout=20.0,
        ws_per_message_deflate=True,
        lifespan="off",
        log_level="warning",
        server_header=False,
    )
    sock = config.bind_socket()
    server = _Announcing(config)
    server.url = f"http://{host}:{sock.getsockname()[1]}"
    await server.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: the OS picks one")
    parser.add_argument("--model", default="gpt-4o-mini", help="the model name sent to the server")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.model))


if __name__ == "__main__":
    main()
