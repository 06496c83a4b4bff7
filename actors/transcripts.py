"""A VP's engine transcript in a group, to and from the store.

The store keeps transcripts as opaque JSON text (it sits below the
engine and does not know its types); this is where they become
:class:`Conversation` objects again.
"""

from __future__ import annotations

from engine.messages import Conversation
from store.base import TranscriptStore


async def load_conversation(
    store: TranscriptStore, group_id: str, vp_id: str
) -> Conversation | None:
    data = await store.load_transcript(group_id, vp_id)
    return Conversation.model_validate_json(data) if data else None


async def save_conversation(
    store: TranscriptStore, group_id: str, vp_id: str, conv: Conversation
) -> None:
    # One pass in pydantic's own serialiser: several times faster than a
    # dict dump and json.dumps, and a long group's transcript is saved each turn.
    await store.save_transcript(group_id, vp_id, conv.model_dump_json())
