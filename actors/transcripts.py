"""A VP's engine transcripts, to and from the store, and kept between turns.

The store keeps a transcript as opaque JSON texts (it sits below the engine
and does not know its types): a head (the :class:`Conversation` without its
messages) and one row per message. This is where they become a
:class:`Conversation` again, parsed in one pass, and where a save works out
which rows to write: a turn adds a few messages to a transcript of
hundreds, so only the rows from the first message that changed are written.

A message of a saved transcript is never edited in place: whatever changes
one (a deletion in the group, a shortened tool result) puts a new object in
its place, so a saved message still in the list by identity, with its text
the same length, is the message the store holds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from engine.messages import Conversation, Message
from store.base import StoredTranscript, TranscriptStore

# Transcripts kept in memory between turns (least recently used go first).
CACHED_TRANSCRIPTS = 512


@dataclass(frozen=True, slots=True)
class _Saved:
    """The messages the store holds as rows: each one's object and its text's length then."""

    messages: tuple[tuple[Message, int], ...]

    @classmethod
    def of(cls, messages: list[Message]) -> _Saved:
        return cls(tuple((m, len(m.content)) for m in messages))

    def unchanged(self, messages: list[Message]) -> int:
        """How many of ``messages``, from the first, are still the rows the store holds."""
        n = 0
        for (saved, size), msg in zip(self.messages, messages, strict=False):
            if msg is not saved or len(msg.content) != size:
                break
            n += 1
        return n


def _conversation(stored: StoredTranscript) -> tuple[Conversation, int]:
    """The conversation a stored transcript holds, and how many of its messages are rows."""
    if not stored.messages:
        # A head alone: a transcript without messages, or one saved whole
        # (its messages inside the head) before transcripts had rows.
        return Conversation.model_validate_json(stored.head), 0
    head = stored.head.rstrip()
    # The head is a JSON object without "messages"; the rows are that list.
    body = head[:-1].rstrip()
    comma = "" if body.endswith("{") else ","
    text = f'{body}{comma}"messages":[{",".join(stored.messages)}]}}'
    return Conversation.model_validate_json(text), len(stored.messages)


async def load_conversation(
    store: TranscriptStore, group_id: str, vp_id: str
) -> Conversation | None:
    """A VP's transcript in a group, or None if it was never saved."""
    stored = await store.load_transcript(group_id, vp_id)
    return _conversation(stored)[0] if stored is not None else None


class TranscriptCache:
    """This VP's transcripts by group: from memory, else from the store; and their saves.

    Only the VP's own actor writes them, so the copy kept between turns is
    always the newest; a restarted actor starts from the store.
    """

    def __init__(self, vp_id: str, size: int = CACHED_TRANSCRIPTS) -> None:
        self.vp_id = vp_id
        self.size = size
        self._items: OrderedDict[str, Conversation] = OrderedDict()
        # Per group, what the store holds of the conversation kept in _items.
        self._saved: dict[str, _Saved] = {}

    async def take(self, store: TranscriptStore, group_id: str) -> Conversation:
        conv = self._items.pop(group_id, None)
        if conv is not None:
            return conv
        self._saved.pop(group_id, None)
        stored = await store.load_transcript(group_id, self.vp_id)
        if stored is None:
            return Conversation(id=f"{group_id}:{self.vp_id}")
        conv, rows = _conversation(stored)
        self._saved[group_id] = _Saved.of(conv.messages[:rows])
        return conv

    def keep(self, group_id: str, conv: Conversation) -> None:
        self._items[group_id] = conv
        while len(self._items) > self.size:
            gone, _ = self._items.popitem(last=False)
            self._saved.pop(gone, None)

    async def save(self, store: TranscriptStore, group_id: str, conv: Conversation) -> None:
        """Write ``conv``: its head, and its messages from the first the store does not hold.

        Raises the store's error; what the store held before stays known, so
        the next save writes whatever this one did not.
        """
        saved = self._saved.get(group_id)
        keep = saved.unchanged(conv.messages) if saved is not None else 0
        messages = list(conv.messages)
        head = conv.model_dump_json(exclude={"messages"})
        rows = [m.model_dump_json() for m in messages[keep:]]
        if not await store.save_transcript(group_id, self.vp_id, head, rows, keep):
            # The store holds fewer rows than this copy thought: write them all.
            rows = [m.model_dump_json() for m in messages[:keep]] + rows
            await store.save_transcript(group_id, self.vp_id, head, rows)
        if self._items.get(group_id) is conv:
            self._saved[group_id] = _Saved.of(messages)
