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


def as_deleted(message: GroupMessage, by: str, ts: float) -> GroupMessage:
    """The tombstone of a deleted message: its text is gone, its place in the log stays.

    A message deleted before keeps its first tombstone.
    """
    if message.meta.get("deleted"):
        return message
    meta = {**message.meta, "deleted": True, "deletedBy": by, "deletedAt": ts}
    return message.model_copy(update={"text": "", "mentions": [], "people": [], "meta": meta})


def as_superseded(message: GroupMessage, turn_id: str, by: str, ts: float) -> GroupMessage:
    """A VP reply marked as replaced by the regenerated turn ``turn_id`` (the latest wins)."""
    meta = {**message.meta, "supersededBy": turn_id, "supersededAt": ts, "regeneratedBy": by}
    return message.model_copy(update={"meta": meta})


def last_shown(messages: list[GroupMessage]) -> GroupMessage | None:
    """The newest of ``messages`` (oldest first) a group list shows: no notice, no tombstone."""
    for message in reversed(messages):
        if message.role != "system" and not message.meta.get("deleted"):
            return message
    return None
