"""A VP's engine transcript in a group, to and from the store.

The store keeps transcripts as opaque JSON documents (it sits below the
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
    return Conversation.model_validate(data) if data else None


async def save_conversation(
    store: TranscriptStore, group_id: str, vp_id: str, conv: Conversation
) -> None:
    await store.save_transcript(group_id, vp_id, conv.model_dump(mode="json"))
