"""Spans of one person's message across processes, through the OpenTelemetry SDK.

Each process that takes part (the gateway, every coordinator shard, every
VP host) calls :func:`install` with the deployment's
:class:`~telemetry.config.TracingConfig`; with tracing off it installs
nothing and every span below is the API's no-op one.

The trace context crosses a Ray call inside the typed command
(``actors.commands.Command.trace``, a W3C ``traceparent``): a command made
while a span is current carries it (:func:`traceparent`), and the handler
table runs the command's handler under it (:func:`resumed`). A turn also
keeps it in its stored record, so a turn sent again after a restart stays in
its message's trace.

The provider is this module's own, not the process-wide global, so that a
test process can install, replace and drop one without the SDK's
set-once rule getting in the way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from telemetry.config import TracingConfig

if TYPE_CHECKING:
    # The SDK is imported only by a process that records spans (it costs
    # every actor process tens of milliseconds at start).
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.sampling import Sampler

log = logging.getLogger(__name__)

INSTRUMENTATION = "yeaft"
_PROPAGATOR = TraceContextTextMapPropagator()
_NOOP = trace.NoOpTracer()


class _State:
    """What this process installed (one per process; replaced under the lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.config: TracingConfig | None = None
        self.provider: TracerProvider | None = None
        self.tracer: trace.Tracer = _NOOP
        self.capture = False


_state = _State()


def install(
    config: TracingConfig | None, role: str, processor: SpanProcessor | None = None
) -> None:
    """Send this process's spans as ``config`` says (``role`` names the process in them).

    Installing the config already installed does nothing; another one
    replaces it (the old provider flushes and shuts down). ``processor``
    replaces the OTLP exporter (tests read spans from memory with it).
    """
    config = config or TracingConfig()
    with _state.lock:
        if processor is None and config == _state.config:
            return
        old = _state.provider
        # With a processor of a test's, no config stands for what is installed.
        _state.config = config if processor is None else None
        _state.provider, _state.tracer = None, _NOOP
        _state.capture = config.capture_content
        if config.enabled or processor is not None:
            from opentelemetry.sdk.trace import TracerProvider

            provider = TracerProvider(resource=_resource(config, role), sampler=_sampler(config))
            provider.add_span_processor(processor or _exporting(config))
            _state.provider = provider
            _state.tracer = provider.get_tracer(INSTRUMENTATION)
    if old is not None:
        old.shutdown()


def uninstall() -> None:
    """Stop tracing in this process (its spans flushed first)."""
    install(TracingConfig(), "")


def _resource(config: TracingConfig, role: str) -> Resource:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, Any] = {**config.resource, "service.name": config.service_name}
    if role:
        attributes["yeaft.process"] = role
    return Resource.create(attributes)


def _sampler(config: TracingConfig) -> Sampler:
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_OFF,
        ALWAYS_ON,
        ParentBased,
        TraceIdRatioBased,
    )

    kind = config.sampler.removeprefix("parentbased_")
    root: Sampler = {
        "always_on": ALWAYS_ON,
        "always_off": ALWAYS_OFF,
        "traceidratio": TraceIdRatioBased(config.ratio),
    }[kind]
    return ParentBased(root) if config.sampler.startswith("parentbased_") else root


def _exporting(config: TracingConfig) -> SpanProcessor:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from telemetry.export import BatchExport

    exporter = OTLPSpanExporter(
        endpoint=config.endpoint,
        headers=dict(config.headers),
        timeout=config.export_timeout_s,
    )
    # Not the SDK's BatchSpanProcessor: its fork hook (telemetry.export says why).
    return BatchExport(exporter, config.export_delay_s)


def active() -> bool:
    """Whether this process records spans."""
    return _state.provider is not None


def capture_content() -> bool:
    """Whether spans may hold message text, prompts and tool arguments."""
    return _state.capture and _state.provider is not None


# The most of one text (a call's messages, a tool's result) a span records.
CONTENT_CHARS = 32_000


def clipped(text: str) -> str:
    """``text`` as a span may record it: cut to ``CONTENT_CHARS``, saying so."""
    return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…[cut]"


def tracer() -> trace.Tracer:
    return _state.tracer


def flush(timeout_s: float = 5.0) -> bool:
    """Send the spans waiting in this process now (before it exits, say)."""
    provider = _state.provider
    return provider.force_flush(int(timeout_s * 1000)) if provider is not None else True


def traceparent() -> str | None:
    """The current span's W3C ``traceparent``, if a span is recording here."""
    if _state.provider is None:
        return None
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def resumed(parent: str | None) -> Iterator[None]:
    """Run the block in the trace ``parent`` names (a ``traceparent``); None: as it is."""
    if not parent or _state.provider is None:
        yield
        return
    token = otel_context.attach(_PROPAGATOR.extract({"traceparent": parent}))
    try:
        yield
    finally:
        otel_context.detach(token)


@contextlib.contextmanager
def span(
    name: str,
    attributes: Mapping[str, Any] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[Span]:
    """A span around the block, current inside it; an exception marks it failed."""
    if _state.provider is None:
        yield trace.INVALID_SPAN
        return
    with _state.tracer.start_as_current_span(
        name, kind=kind, attributes=_clean(attributes)
    ) as current:
        yield current


def event(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """An event on the current span (a decision worth seeing in the trace)."""
    if _state.provider is None:
        return
    trace.get_current_span().add_event(name, _clean(attributes))


def failed(current: Span, error_type: str, message: str | None = None) -> None:
    """Mark ``current`` as ended in an error of ``error_type`` (not raised through it)."""
    if not current.is_recording():
        return
    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, message))


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The attributes OpenTelemetry can hold: no None values."""
    if not attributes:
        return None
    return {k: v for k, v in attributes.items() if v is not None}
