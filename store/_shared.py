"""Small helpers both backends use, so they agree on every edge case."""

from __future__ import annotations

from store.base import GroupMessage

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


def check_retention(event_retention: int) -> int:
    if event_retention < 1:
        raise ValueError("event_retention must be at least 1")
    return event_retention
