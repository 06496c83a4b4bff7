"""People's @mentions and the activity log, kept by both backends.

- **Mentions.** A person's message may mention members of its group
  (``GroupMessage.people``, resolved by the coordinator). Both backends keep
  an index of them beside the message, written in the same step as the
  message: ``mentions_of`` lists a person's newest mentions across the
  groups given, newest first. Deleting a message takes its mentions out of
  the index. A person's mention count in a group (``GroupSummary.mentions``)
  is the number of their unread messages (``store.chatviews``) that mention
  them: it follows the read mark.
- **Activity.** The store appends an ``activity`` event
  (``protocol.inbox.ActivityEvent``) to one log, :data:`ACTIVITY_LOG`, for
  every message it stores (notices aside), deletes, and every read mark that
  moves.
  Each gateway process tails that one log (one blocking read however many
  groups and people it serves) and pushes the new summaries to the people
  concerned.
  On SQLite the event is written in the message's (or the mark's)
  transaction; on Redis it is appended right after, as its own command,
  because the log's key lives in another cluster slot than the group's: a
  crash in between loses a push, never a message (a client reads the whole
  inbox again when it reconnects).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.inbox import ActivityEvent, excerpt_of

ACTIVITY_LOG = "~activity"
"""The event log of stored messages and moved read marks, tailed by every gateway.

Not a group id (``~`` is not allowed in one), so no client can name it.
"""

MAX_MENTIONS_LISTED = 100
"""The most mentions ``mentions_of`` returns."""
MAX_PEOPLE_PER_MESSAGE = 32
"""The most people one message mentions (as many as ``@names`` a client may send)."""


@dataclass(frozen=True, slots=True)
class Mention:
    """A message that mentions a person: where, who wrote it, and its first words."""

    group_id: str
    message_id: str
    author: str
    excerpt: str
    ts: float
    thread_id: str | None = None
    """The thread the message is a reply in (``store.threads``); None on the main timeline."""


def counts_as_activity(role: str) -> bool:
    """Whether storing a message of ``role`` goes in the activity log.

    A notice changes nobody's summary (it is neither unread nor a group's
    last message), so it is not announced.
    """
    return role != "system"


def counts_as_mention(
    author: str, role: str, meta: dict[str, Any], people: Sequence[str], reader: str
) -> bool:
    """Whether an unread message counts as a mention of ``reader``."""
    return reader in people and author != reader and role != "system" and not meta.get("deleted")


def message_activity(
    group_id: str, message_id: str, author: str, ts: float, people: Sequence[str], text: str
) -> ActivityEvent:
    """The activity event of a stored message."""
    return ActivityEvent(
        kind="message",
        group_id=group_id,
        user=author,
        message_id=message_id,
        ts=ts,
        people=list(people),
        excerpt=excerpt_of(text) if people else "",
    )


def deleted_activity(group_id: str, username: str, message_id: str) -> ActivityEvent:
    """The activity event of a message deleted (its group's counts may drop)."""
    return ActivityEvent(kind="deleted", group_id=group_id, user=username, message_id=message_id)


def read_activity(group_id: str, username: str, message_id: str) -> ActivityEvent:
    """The activity event of a read mark that moved."""
    return ActivityEvent(kind="read", group_id=group_id, user=username, message_id=message_id)


class MentionLog(Protocol):
    """People's mentions across groups (rules in the module docstring)."""

    @abstractmethod
    async def mentions_of(
        self, username: str, group_ids: Sequence[str], *, limit: int = 50
    ) -> list[Mention]:
        """The newest messages of those groups that mention ``username``, newest first.

        Deleted messages and the person's own are left out; at most
        :data:`MAX_MENTIONS_LISTED`.
        """
