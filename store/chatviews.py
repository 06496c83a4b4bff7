"""What the chat UI reads beside the log: search hits, group summaries, usage totals.

The types and rules both backends share, so they agree on every edge case:

- **Search.** A query is split into words (runs of Unicode letters and
  digits, case-folded);
  a message matches when every word of the query starts a word of the
  message (``cach`` finds "cache"). Hits come newest first. Messages of
  role ``system`` (notices) and deleted messages are not indexed. The
  embedded store uses SQLite FTS5; the Redis store keeps an inverted index
  per group (a sorted set of ``term NUL messageId``, read by prefix with
  ``ZRANGEBYLEX``), at most :data:`MAX_POSTINGS_PER_TERM` ids per query
  word and group, so a very common word looks at its newest-sorted ids only.
- **Unread.** Each user has a read mark per group: the log position of the
  newest message they have seen (``mark_read``, which never moves back).
  Unread is the number of messages after it that someone else wrote and
  that are not deleted or notices, counted up to :data:`UNREAD_CAP`; the
  mention count is the number of those that mention the reader.
- **Usage.** Each finished turn adds its tokens and cost to its group once
  (``add_usage`` is idempotent on the turn id), whether or not it stored a
  reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from store.quotas import UsageKey

# Counting unread messages stops here: a client shows "999+".
UNREAD_CAP = 999
# Ids read per query word per group from the Redis inverted index.
MAX_POSTINGS_PER_TERM = 5_000
# Query words beyond this are ignored.
MAX_QUERY_TERMS = 8
# Messages of one group a search returns at most.
MAX_SEARCH_HITS = 100
SNIPPET_BEFORE = 60
SNIPPET_LENGTH = 200
# Newest messages after a read mark that are looked at to count unread ones.
UNREAD_SCAN = 2_000
# Newest messages read to find a group's last message for the group list.
LAST_MESSAGE_WINDOW = 20

# Letters and digits; "_" separates words, as in SQLite's unicode61 tokenizer,
# so both backends split ``route_forward`` into the same two words.
_WORD = re.compile(r"[^\W_]+")


def terms_of(text: str) -> list[str]:
    """The distinct index terms of ``text``, in order: its case-folded words."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.casefold()):
        seen.setdefault(word, None)
    return list(seen)


def query_terms(query: str) -> list[str]:
    """The words of a search query (at most :data:`MAX_QUERY_TERMS`)."""
    return terms_of(query)[:MAX_QUERY_TERMS]


def is_searchable(role: str, meta: dict[str, Any]) -> bool:
    """Whether a message belongs in the search index."""
    return role != "system" and not meta.get("deleted")


def counts_as_unread(author: str, role: str, meta: dict[str, Any], reader: str) -> bool:
    """Whether a message after the reader's mark counts as unread for them."""
    return author != reader and role != "system" and not meta.get("deleted")


def snippet(text: str, terms: list[str]) -> str:
    """About :data:`SNIPPET_LENGTH` characters of ``text`` around the first query word."""
    folded = text.casefold()
    # casefold() may change lengths (ß → ss); positions then are approximate,
    # which only moves the window a little.
    hits = [i for i in (folded.find(t) for t in terms) if i >= 0]
    start = max(0, min(hits) - SNIPPET_BEFORE) if hits else 0
    piece = " ".join(text[start : start + SNIPPET_LENGTH].split())
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + SNIPPET_LENGTH < len(text) else ""
    return f"{prefix}{piece}{suffix}"


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message that matched a search."""

    group_id: str
    message_id: str
    author: str
    role: str
    ts: float
    snippet: str
    thread_id: str | None = None
    """The thread the message is a reply in (``store.threads``); None on the main timeline."""


@dataclass(frozen=True, slots=True)
class LastMessage:
    """The newest message of a group, as the group list shows it."""

    message_id: str
    author: str
    role: str
    text: str
    ts: float


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group's line in the group list: its last message, the reader's unread count
    and how many of those unread messages mention the reader (``store.mentions``)."""

    group_id: str
    unread: int
    last: LastMessage | None = None
    mentions: int = 0


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Tokens and cost of every turn of a group that has finished."""

    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """What one turn used, added to its group's totals once.

    ``accounts`` are budget accounts (``store.budgets``) charged its tokens
    and cost in the same step, also once: those of a turn that reserved
    nothing because its group set no limit on them. ``row``, when given,
    is the usage record (``store.quotas``) its tokens and cost are added
    to, in the same step and also once.
    """

    turn_id: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    accounts: tuple[str, ...] = ()
    row: UsageKey | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens
