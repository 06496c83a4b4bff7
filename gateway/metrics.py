"""Prometheus metrics of one gateway process, served at ``/metrics``.

Each app gets its own registry, so several apps in one process (tests) keep
separate counts. Turns and turn latency are counted where the event log is
tailed, once per group per gateway process whatever the number of clients;
with several replicas watching one group, each counts its turns.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from store.events import StoredEvent

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Metrics:
    """The gateway's counters, gauges and histograms in one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.connections = Gauge("yeaft_ws_connections", "Open WebSocket connections.", registry=r)
        self.closes = Counter(
            "yeaft_ws_closes", "WebSocket connections closed, by close code.", ["code"], registry=r
        )
        self.envelopes_sent = Counter(
            "yeaft_envelopes_sent", "Event-log envelopes written to clients.", registry=r
        )
        self.frames_received = Counter(
            "yeaft_frames_received", "Frames received from clients.", registry=r
        )
        self.error_frames = Counter(
            "yeaft_error_frames", "Error frames sent to clients, by code.", ["code"], registry=r
        )
        self.turns = Counter(
            "yeaft_turns",
            "VP turns that ended (result envelopes), by subtype.",
            ["subtype"],
            registry=r,
        )
        self.turn_seconds = Histogram(
            "yeaft_turn_duration_seconds",
            "Duration of VP turns (model time included), from result envelopes.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.tails = Gauge(
            "yeaft_group_tails", "Groups whose event log this process is tailing.", registry=r
        )
        self.logins = Counter(
            "yeaft_logins", "Login attempts, by outcome.", ["outcome"], registry=r
        )

    def observe_envelope(self, event: StoredEvent) -> None:
        """Count a turn when ``event`` is a result; called once per envelope tailed.

        Only the header is read for every event; a result (one per turn) is
        decoded to read its subtype and duration.
        """
        if event.type != "yeaft_output" or event.data_type != "result":
            return
        data = event.envelope().get("data")
        if not isinstance(data, dict):
            return
        self.turns.labels(subtype=str(data.get("subtype", "unknown"))).inc()
        duration = data.get("duration_ms")
        if isinstance(duration, int | float) and duration >= 0:
            self.turn_seconds.observe(duration / 1000.0)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return generate_latest(self.registry)
