"""What tracing is configured with: read once from the standard ``OTEL_*`` variables.

The gateway reads them in its own process (:meth:`TracingConfig.from_env`)
and hands the result to every actor in ``RuntimeConfig``: an actor sets its
exporter up from that, never from the environment of the node it landed
on. Tracing is off unless an OTLP endpoint is set (and ``OTEL_SDK_DISABLED``
is not true). Only OTLP over HTTP with protobuf is spoken; asking for gRPC
is refused at start with a message that says so.

Header values (``OTEL_EXPORTER_OTLP_HEADERS``) often hold an API key: they
are kept out of the ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

# The GenAI conventions' switch for recording prompts, replies and tool arguments.
CAPTURE_CONTENT_VAR = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SUPPORTED_PROTOCOL = "http/protobuf"
_SAMPLERS = {
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
}


class TracingConfigError(ValueError):
    """An ``OTEL_*`` setting this deployment cannot use; the message names it."""


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """Where spans go and what they may hold; ``endpoint`` None means tracing is off."""

    endpoint: str | None = None
    service_name: str = "yeaft"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    resource: Mapping[str, str] = field(default_factory=dict)
    # Prompts, replies, message text and tool arguments go into spans only when set.
    capture_content: bool = False
    sampler: str = "parentbased_always_on"
    ratio: float = 1.0
    # How long finished spans wait to be sent in a batch (OTEL_BSP_SCHEDULE_DELAY).
    export_delay_s: float = 5.0
    export_timeout_s: float = 10.0

    @property
    def enabled(self) -> bool:
        return self.endpoint is not None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TracingConfig:
        """The configuration the standard variables describe (see the module's docstring)."""

        def get(name: str) -> str:
            return env.get(name, "").strip()

        if get("OTEL_SDK_DISABLED").lower() == "true":
            return cls()
        protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if protocol and protocol != SUPPORTED_PROTOCOL:
            raise TracingConfigError(
                f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: "
                f"Yeaft sends traces over OTLP {SUPPORTED_PROTOCOL}; use the collector's "
                "HTTP port (4318) and unset the protocol or set it to http/protobuf"
            )
        endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
        if endpoint is None and get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT").rstrip("/") + "/v1/traces"
        if get("OTEL_TRACES_EXPORTER") == "none":
            endpoint = None
        sampler = get("OTEL_TRACES_SAMPLER") or "parentbased_always_on"
        if sampler not in _SAMPLERS:
            raise TracingConfigError(
                f"OTEL_TRACES_SAMPLER={sampler} is not one of {', '.join(sorted(_SAMPLERS))}"
            )
        return cls(
            endpoint=endpoint,
            service_name=get("OTEL_SERVICE_NAME") or "yeaft",
            headers=_pairs(
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or get("OTEL_EXPORTER_OTLP_HEADERS"),
            ),
            resource=_pairs("OTEL_RESOURCE_ATTRIBUTES", get("OTEL_RESOURCE_ATTRIBUTES")),
            capture_content=get(CAPTURE_CONTENT_VAR).lower() == "true",
            sampler=sampler,
            ratio=_number("OTEL_TRACES_SAMPLER_ARG", get("OTEL_TRACES_SAMPLER_ARG"), 1.0),
            export_delay_s=_number("OTEL_BSP_SCHEDULE_DELAY", get("OTEL_BSP_SCHEDULE_DELAY"), 5000)
            / 1000,
            export_timeout_s=_number(
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or get("OTEL_EXPORTER_OTLP_TIMEOUT"),
                10_000,
            )
            / 1000,
        )


def _pairs(name: str, text: str) -> dict[str, str]:
    """``k1=v1,k2=v2`` (values URL-encoded), as the OTLP variables write them."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            # The value is not echoed: a header may be a key.
            raise TracingConfigError(f"{name}: expected key=value pairs separated by commas")
        out[unquote(key.strip())] = unquote(value.strip())
    return out


def _number(name: str, text: str, default: float) -> float:
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise TracingConfigError(f"{name}={text} is not a number") from None
    if value < 0:
        raise TracingConfigError(f"{name}={text} must not be negative")
    return value
