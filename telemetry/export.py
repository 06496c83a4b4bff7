"""Finished spans, sent in batches from a thread of their own, with no fork hooks.

The SDK's ``BatchSpanProcessor`` registers an ``os.register_at_fork`` hook
that starts a new export thread in every forked child. uvloop (the loop of
Ray's async actors) runs those hooks when it spawns a process, between fork
and exec: a VP host opening a stdio MCP server then started a thread in a
half-made child, which could hang on a lock held by a thread that did not
survive the fork, and with it the VP host's loop, which waits for the exec.
This processor registers nothing: a forked child that exports spans (none
of ours does) starts its thread when it first needs one.
"""

from __future__ import annotations

import collections
import logging
import os
import threading

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

MAX_QUEUE = 2048
MAX_BATCH = 512


class BatchExport(SpanProcessor):
    """Queue ended spans; a daemon thread exports them every ``delay_s`` or per full batch."""

    def __init__(self, exporter: SpanExporter, delay_s: float) -> None:
        self.exporter = exporter
        self.delay_s = delay_s
        self.dropped = 0
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._wake = threading.Condition()
        self._export_lock = threading.Lock()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._pid = 0

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopped or not span.context.trace_flags.sampled:
            return
        with self._wake:
            if len(self._queue) >= MAX_QUEUE:
                self.dropped += 1
                return
            self._queue.append(span)
            self._ensure_thread()
            if len(self._queue) >= MAX_BATCH:
                self._wake.notify()

    def _ensure_thread(self) -> None:
        """The export thread of this process, started on first use (and after a fork)."""
        if self._thread is not None and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name="yeaft-span-export", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                if not self._stopped and len(self._queue) < MAX_BATCH:
                    self._wake.wait(self.delay_s)
                if self._stopped:
                    return
            self._export_all()

    def _take(self) -> list[ReadableSpan]:
        with self._wake:
            batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
        return batch

    def _export_all(self) -> None:
        with self._export_lock:
            while batch := self._take():
                try:
                    self.exporter.export(batch)
                except Exception:
                    log.warning("spans could not be exported", exc_info=True)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self._export_all()
        return True

    def shutdown(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()
        thread = self._thread
        if thread is not None and thread.is_alive() and self._pid == os.getpid():
            thread.join(timeout=self.delay_s + 5)
        self._export_all()
        self.exporter.shutdown()
