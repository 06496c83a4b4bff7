"""Small helpers both backends use, so they agree on every edge case."""

from __future__ import annotations

import json
from typing import Any

from store.base import EventBatch, GroupMessage, StoreError

DEFAULT_EVENT_RETENTION = 10_000


def client_message_id(message: GroupMessage) -> str | None:
    """The idempotency key of a message, or None when it has none.

    Clients send ``clientMessageId`` as a string; anything else is turned into
    one so a number and its decimal string dedupe the same way on both backends.
    """
    value = message.meta.get("clientMessageId")
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def dump_envelope(envelope: dict[str, Any]) -> str:
    """Serialise an envelope compactly; a value JSON cannot hold is a caller bug."""
    try:
        return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"event envelope is not JSON-serialisable: {exc}") from exc


def make_batch(
    after_seq: int,
    events: list[tuple[int, dict[str, Any]]],
    first_seq: int,
    last_seq: int,
) -> EventBatch:
    """Build the answer of a read, deciding the gap signal in one place.

    A gap means the reader's next wanted seq (``after_seq + 1``) is older than
    the oldest seq still held, so some events it never saw were trimmed.
    """
    gap = first_seq > 0 and after_seq + 1 < first_seq
    return EventBatch(events=events, gap=gap, first_seq=first_seq, last_seq=last_seq)


def check_retention(event_retention: int) -> int:
    if event_retention < 1:
        raise ValueError("event_retention must be at least 1")
    return event_retention
