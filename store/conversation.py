"""What makes a group record a one-to-one conversation.

A conversation (the seed's chat mode) is stored as a group of a special
kind: exactly one VP in its roster and one person, its owner, in its
members. Everything a group has (the durable message log, the event log with
its sequence numbers, durable turns, recovery after a restart, cancel and
questions) then serves conversations unchanged, and the one envelope writer
of the actors stays the only one. The gateway shows such a record only to
its owner and only through the conversation frames and endpoints.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

ID_PREFIX = "conv"
"""Conversation ids are ``conv_...`` (``store.base.new_id``); group ids are not."""

PROVIDER = "yeaft"
"""The only provider a conversation runs on: this server's own engine."""


def is_conversation_id(record_id: str) -> bool:
    """Whether an id was minted for a conversation (tells them apart without a read)."""
    return record_id.startswith(ID_PREFIX + "_")


class GroupKind(StrEnum):
    """Whether a group record is a team group or a private conversation."""

    GROUP = "group"
    CONVERSATION = "conversation"


class ConversationInfo(BaseModel):
    """The conversation part of a group record of kind ``conversation``.

    ``workDir`` is a workspace name (``store.workspaces``), never a path;
    ``autoTitle`` says the title was not chosen by the owner, so the first
    message may name the conversation.
    """

    owner: str
    vp_id: str
    provider: str = PROVIDER
    work_dir: str
    auto_title: bool = True
