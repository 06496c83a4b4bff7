"""A local OpenAI-compatible model for the benchmarks: Chat Completions, streamed.

It answers ``POST .../chat/completions`` with a fixed-length reply paced like
the offline model's options: ``--ttft`` seconds to the first token, then one
token every ``1 / --tps`` seconds (``--tps 0``: no pauses), ``--tokens``
tokens in all. With ``"stream": true`` the reply is Server-Sent Events
(``chat.completion.chunk`` objects, a ``finish_reason`` chunk, then a usage
chunk when ``stream_options.include_usage`` asks for it, then
``data: [DONE]``); without, one ``chat.completion`` object once the reply
would have finished streaming. ``GET /stats`` reports the requests served,
the streams open and the most open at once.

It is a bare asyncio HTTP/1.1 server (keep-alive, chunked responses, uvloop
when installed) driven by timer callbacks, not a task per stream, so a few
hundred concurrent streams at 100 tokens/s cost little CPU. It runs as a
process of its own, so its CPU is not counted with the client's or the
server's under test:

    python bench/model_server.py --ttft 0.2 --tps 100 --tokens 60 --port 0

prints its base URL (``http://127.0.0.1:PORT/v1``) on one line, then serves
until SIGTERM or SIGINT. :class:`ModelServer` starts and stops it from a
benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

# Plain words, no mentions, never the skip token: a reply hands nothing on.
WORDS = (
    "the cache should keep every entry small and evict the oldest ones first so that "
    "reads stay fast while writes go to the log before anything else is touched"
).split()
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Pace:
    """How a reply streams: seconds to the first token, tokens per second, tokens."""

    ttft: float
    tps: float
    tokens: int

    def token(self, i: int) -> str:
        word = WORDS[i % len(WORDS)]
        return word if i == 0 else " " + word


@dataclass
class Stats:
    requests: int = 0
    active: int = 0
    peak: int = 0


def _chunk(body: bytes) -> bytes:
    """``body`` as one HTTP/1.1 chunk."""
    return b"%x\r\n%b\r\n" % (len(body), body)


def _event(obj: dict[str, Any]) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


class _Reply:
    """One streamed reply, written by timer callbacks on the event loop."""

    def __init__(self, conn: _Connection, model: str, usage: bool, prompt_tokens: int) -> None:
        self.conn = conn
        self.pace = conn.pace
        self.usage = usage
        self.prompt_tokens = prompt_tokens
        self.sent = 0
        self.timer: asyncio.Handle | None = None
        self.waiting = False  # paused by flow control with tokens left to write
        head = {"id": f"chatcmpl-bench{id(self):x}", "object": "chat.completion.chunk"}
        self.head = head | {"created": int(time.time()), "model": model}
        # A token's event is this text around the token's JSON string: no dump per token.
        opening = json.dumps(self.head, separators=(",", ":"))[:-1]
        self.before = f'data: {opening},"choices":[{{"index":0,"delta":{{"content":'.encode()
        self.after = b'},"logprobs":null,"finish_reason":null}]}\n\n'
        self.loop = asyncio.get_running_loop()
        self.timer = self.loop.call_later(self.pace.ttft, self._step)

    def _delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _event(self.head | {"choices": [choice]})

    def _step(self) -> None:
        self.timer = None
        transport = self.conn.transport
        if transport is None or transport.is_closing():
            return
        if self.pace.tps > 0:
            self._write_token()
            if self.sent < self.pace.tokens:
                self.timer = self.loop.call_later(1.0 / self.pace.tps, self._step)
            else:
                self._finish()
            return
        # No pauses: write as fast as the client reads (flow control), in batches.
        batch = 0
        while self.sent < self.pace.tokens and batch < 64:
            self._write_token()
            batch += 1
        if self.sent >= self.pace.tokens:
            self._finish()
        elif self.conn.paused:
            self.waiting = True
        else:
            self.timer = self.loop.call_soon(self._step)

    def resume(self) -> None:
        if self.waiting:
            self.waiting = False
            self._step()

    def _write_token(self) -> None:
        text = self.pace.token(self.sent)
        if self.sent == 0:
            event = self._delta({"role": "assistant", "content": text})
        else:
            event = _chunk(self.before + json.dumps(text).encode() + self.after)
        assert self.conn.transport is not None
        self.conn.transport.write(event)
        self.sent += 1

    def _finish(self) -> None:
        out = [self._delta({}, "stop")]
        if self.usage:
            used = {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.sent,
                "total_tokens": self.prompt_tokens + self.sent,
            }
            out.append(_event(self.head | {"choices": [], "usage": used}))
        out.append(_chunk(b"data: [DONE]\n\n"))
        out.append(b"0\r\n\r\n")
        assert self.conn.transport is not None
        self.conn.transport.write(b"".join(out))
        self.conn.reply_done()

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.waiting = False


class _Connection(asyncio.Protocol):
    """One client connection: requests one after the other (keep-alive)."""

    def __init__(self, pace: Pace, stats: Stats) -> None:
        self.pace = pace
        self.stats = stats
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.reply: _Reply | None = None
        self.whole: asyncio.TimerHandle | None = None  # a reply that is not streamed
        self.close_after = False
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.reply is not None:
            self.reply.cancel()
        if self.whole is not None:
            self.whole.cancel()
        if self.reply is not None or self.whole is not None:
            self.stats.active -= 1
        self.reply = self.whole = None
        self.transport = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.reply is not None:
            self.reply.resume()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next_request()

    def reply_done(self) -> None:
        self.reply = self.whole = None
        self.stats.active -= 1
        if self.close_after and self.transport is not None:
            self.transport.close()
            return
        self._next_request()

    def _next_request(self) -> None:
        """Handle every whole request in the buffer, one at a time."""
        while self.reply is None and self.whole is None and self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    self._respond(431, {"error": {"message": "headers too large"}}, close=True)
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            method, _, rest = lines[0].partition(" ")
            path = rest.partition(" ")[0].split("?", 1)[0]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            size = int(headers.get("content-length", "0") or 0)
            if len(self.buffer) < end + 4 + size:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + size])
            del self.buffer[: end + 4 + size]
            self.close_after = headers.get("connection", "").lower() == "close"
            self._handle(method, path, body)

    def _handle(self, method: str, path: str, body: bytes) -> None:
        if method == "GET" and path == "/stats":
            stats = self.stats
            self._respond(
                200, {"requests": stats.requests, "active": stats.active, "peak": stats.peak}
            )
        elif method == "POST" and path.endswith("/chat/completions"):
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                self._respond(
                    400, {"error": {"message": "invalid JSON", "type": "invalid_request"}}
                )
                return
            self.stats.requests += 1
            self._completion(request, len(body))
        else:
            self._respond(404, {"error": {"message": f"no route {method} {path}"}})

    def _completion(self, request: dict[str, Any], size: int) -> None:
        model = str(request.get("model", "bench"))
        prompt_tokens = max(1, size // 4)
        self.stats.active += 1
        self.stats.peak = max(self.stats.peak, self.stats.active)
        if not request.get("stream"):
            pace = self.pace
            delay = pace.ttft + (max(0, pace.tokens - 1) / pace.tps if pace.tps else 0.0)
            loop = asyncio.get_running_loop()
            self.whole = loop.call_later(delay, self._whole, model, prompt_tokens)
            return
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        assert self.transport is not None
        self.transport.write(head)
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        self.reply = _Reply(self, model, include_usage, prompt_tokens)

    def _whole(self, model: str, prompt_tokens: int) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        text = "".join(self.pace.token(i) for i in range(self.pace.tokens))
        tokens = self.pace.tokens
        self._respond(
            200,
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": tokens,
                    "total_tokens": prompt_tokens + tokens,
                },
            },
        )
        self.reply_done()

    def _respond(self, status: int, obj: dict[str, Any], close: bool = False) -> None:
        body = json.dumps(obj).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n"
            + ("connection: close\r\n" if close or self.close_after else "")
            + "\r\n"
        )
        assert self.transport is not None
        self.transport.write(head.encode() + body)
        if close:
            self.transport.close()


async def serve(pace: Pace, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; prints the base URL first."""
    loop = asyncio.get_running_loop()
    stats = Stats()
    server = await loop.create_server(
        lambda: _Connection(pace, stats), host, port, backlog=2048, reuse_address=True
    )
    bound = server.sockets[0].getsockname()
    print(f"http://{bound[0]}:{bound[1]}/v1", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


class ModelServer:
    """``bench/model_server.py`` in a subprocess of its own; ``url`` is its base URL."""

    def __init__(self, ttft: float, tps: float, tokens: int) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--port", "0"]
        command += ["--ttft", str(ttft), "--tps", str(tps), "--tokens", str(tokens)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.stop()
            raise RuntimeError("the model server did not start")

    def stats(self) -> dict[str, int]:
        import urllib.request

        root = self.url.rsplit("/v1", 1)[0]
        with urllib.request.urlopen(f"{root}/stats", timeout=10) as reply:
            return dict(json.loads(reply.read()))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttft", type=float, default=0.2, help="seconds to the first token")
    parser.add_argument("--tps", type=float, default=100, help="tokens per second (0: no pauses)")
    parser.add_argument("--tokens", type=int, default=60, help="tokens per reply")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: the OS picks one")
    args = parser.parse_args()
    run: Any = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        run = uvloop.run
    run(serve(Pace(args.ttft, args.tps, args.tokens), args.host, args.port))


if __name__ == "__main__":
    main()
