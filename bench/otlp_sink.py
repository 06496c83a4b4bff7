"""A local OTLP/HTTP endpoint that takes every export and keeps only counts.

For benchmarks that measure what recording traces costs the server: the
spans have somewhere to go, as in production, without a backend's own load
on the machine.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OtlpSink:
    """Answers ``POST /v1/traces`` with 200 on 127.0.0.1; counts requests and bytes."""

    def __init__(self) -> None:
        sink = self
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(size)
                with sink._lock:
                    sink.requests += 1
                    sink.bytes += size
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
