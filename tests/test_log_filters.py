"""The access log, as uvicorn really writes it, without routine polls or tokens.

A real uvicorn server with the gateway's log filters installed answers a
few requests; a handler on ``uvicorn.access`` collects what it logs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
import uvicorn

from gateway.log_filters import install_log_filters

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers 200, or 500 when the query says ``fail``."""
    if scope["type"] != "http":
        return
    status = 500 if b"fail" in scope.get("query_string", b"") else 200
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_answered_polls_are_left_out_and_everything_else_is_logged() -> None:
    config = uvicorn.Config(_app, log_level="info", lifespan="off")
    server = uvicorn.Server(config)
    # uvicorn configures its loggers when the config is made; the gateway's
    # filters go on after that, as in ``run_server``.
    install_log_filters()
    access = logging.getLogger("uvicorn.access")
    lines = _Lines()
    access.addHandler(lines)
    # A socket listening already: requests wait in its backlog until uvicorn serves it.
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for path in (
                "/api/inbox",
                "/healthz",
                "/metrics",
                "/api/groups",
                "/api/inbox?fail=1",
                "/ws?token=secret-value",
            ):
                await client.get(path)
            await client.post("/api/inbox")
    finally:
        server.should_exit = True
        await task
        access.removeHandler(lines)
        sock.close()
    logged = "\n".join(lines.lines)
    assert len(lines.lines) == 4, logged
    assert '"GET /api/groups HTTP/1.1" 200' in logged
    assert '"GET /api/inbox?fail=1 HTTP/1.1" 500' in logged
    assert '"POST /api/inbox HTTP/1.1" 200' in logged
    assert "token=[redacted]" in logged and "secret-value" not in logged
    assert "/healthz" not in logged and "/metrics" not in logged
