"""The gateway's span: where one person's message enters the trace (``telemetry.tracing``).

The coordinator's ``Ingest``, made inside it, carries its context on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry.trace import SpanKind

from protocol import Channel
from telemetry import tracing


@contextlib.contextmanager
def received(username: str, group_id: str, text: str, channel: Channel) -> Iterator[None]:
    """The span of a person's message, from its arrival to its being stored."""
    if not tracing.active():
        yield
        return
    attributes = {
        "yeaft.group.id": group_id,
        "yeaft.channel": str(channel),
        "enduser.id": username,
        "yeaft.message.text": text if tracing.capture_content() else None,
    }
    with tracing.span("receive_message", attributes, SpanKind.SERVER):
        yield
