"""Reactions on a group's messages and the group's pinned messages, kept by both backends.

The rules, applied by :func:`apply_reaction` and :func:`apply_pin` inside
one atomic store step (a write transaction on SQLite, an optimistic
WATCH/MULTI transaction on Redis), so two people reacting at the same
instant on two gateways both land, each on what the other left:

- A reaction is one user's emoji on one message. Each user adds or removes
  only their own; a message keeps its emoji in the order they were first
  used and each emoji's users in the order they reacted. An emoji whose
  last user removed it is gone. At most ``MAX_REACTION_KINDS`` different
  emoji per message: one more is refused (``ReactionError``); reacting with
  an emoji already there is always allowed.
- A group's pins are an ordered list (oldest pin first) of message ids with
  who pinned each and when. Pinning what is pinned, or unpinning what is
  not, changes nothing. At most ``MAX_PINS`` at once.
- A change that changed something appends its event (``message_reactions``
  or ``message_pins`` of ``protocol.reactions``, carrying the whole new
  state) to the group's event log **in the same step**, so a change is never
  stored without being shown, and the events of a message come in the order
  of the changes: a client replaces what it shows with each one.

Whether the message exists and the user may see it is the caller's check
(the gateway's); the store keeps what it is given. Both backends hold the
same JSON (:func:`encode_reactions`, :func:`encode_pins`): a message's
reactions as ``[[emoji, [user, ...]], ...]`` and a group's pins as
``[[messageId, by, ts], ...]``. Deleting a group deletes both.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from protocol.reactions import (
    MAX_PINS,
    MAX_REACTION_KINDS,
    MessagePins,
    MessageReactions,
    PinView,
    ReactionView,
)


@dataclass(frozen=True, slots=True)
class Reaction:
    """One emoji on a message and the users who reacted with it, in order."""

    emoji: str
    users: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Pin:
    """A pinned message: who pinned it, and when (epoch seconds)."""

    message_id: str
    by: str
    ts: float


@dataclass(frozen=True, slots=True)
class ReactionChange:
    """What a reaction step did: ``on`` is whether the user's reaction is there now.

    ``seq`` is the event's seq in the group's log; 0 when nothing changed
    (then nothing was appended).
    """

    message_id: str
    emoji: str
    user: str
    on: bool
    reactions: tuple[Reaction, ...]
    seq: int = 0

    @property
    def changed(self) -> bool:
        return self.seq > 0


@dataclass(frozen=True, slots=True)
class PinChange:
    """What a pin step did; ``seq`` as in :class:`ReactionChange`."""

    message_id: str
    pinned: bool
    pins: tuple[Pin, ...]
    seq: int = 0

    @property
    def changed(self) -> bool:
        return self.seq > 0


class ReactionErrorCode(StrEnum):
    """Why a reaction or a pin was refused."""

    TOO_MANY_REACTIONS = "too_many_reactions"
    TOO_MANY_PINS = "too_many_pins"


class ReactionError(Exception):
    """A reaction or pin broke a limit; nothing was written."""

    def __init__(self, code: ReactionErrorCode, message: str, limit: int) -> None:
        super().__init__(message)
        self.code = ReactionErrorCode(code)
        self.message = message
        self.limit = limit

    def __reduce__(self) -> tuple[type[ReactionError], tuple[ReactionErrorCode, str, int]]:
        return (ReactionError, (self.code, self.message, self.limit))


class ReactionLog(Protocol):
    """Reactions and pins (rules in the module docstring)."""

    @abstractmethod
    async def react(
        self, group_id: str, message_id: str, emoji: str, user: str, *, on: bool | None, ts: float
    ) -> ReactionChange:
        """Add (``on`` True), remove (False) or toggle (None) ``user``'s ``emoji``, atomically.

        When that changed something, the ``message_reactions`` event is
        appended in the same step. Raises ReactionError past the limit.
        """

    @abstractmethod
    async def reactions_of(
        self, group_id: str, message_ids: Sequence[str]
    ) -> dict[str, tuple[Reaction, ...]]:
        """The reactions of those messages that have any."""

    @abstractmethod
    async def pin(
        self, group_id: str, message_id: str, user: str, *, pinned: bool, ts: float
    ) -> PinChange:
        """Pin or unpin a message, atomically, with its ``message_pins`` event when it changed.

        Raises ReactionError past the limit.
        """

    @abstractmethod
    async def pins_of(self, group_id: str) -> tuple[Pin, ...]:
        """The group's pinned messages, oldest pin first."""


# -- the rules -----------------------------------------------------------------
def apply_reaction(
    current: tuple[Reaction, ...], emoji: str, user: str, on: bool | None
) -> tuple[bool, tuple[Reaction, ...] | None]:
    """Whether ``user``'s reaction is on after the step, and the new reactions (None: unchanged)."""
    found = next((r for r in current if r.emoji == emoji), None)
    had = found is not None and user in found.users
    want = (not had) if on is None else on
    if want == had:
        return had, None
    if want:
        if found is None:
            if len(current) >= MAX_REACTION_KINDS:
                raise ReactionError(
                    ReactionErrorCode.TOO_MANY_REACTIONS,
                    f"a message carries at most {MAX_REACTION_KINDS} different reactions",
                    MAX_REACTION_KINDS,
                )
            return True, (*current, Reaction(emoji, (user,)))
        return True, tuple(
            Reaction(r.emoji, (*r.users, user)) if r.emoji == emoji else r for r in current
        )
    kept = (
        Reaction(r.emoji, tuple(u for u in r.users if u != user)) if r.emoji == emoji else r
        for r in current
    )
    return False, tuple(r for r in kept if r.users)


def apply_pin(
    current: tuple[Pin, ...], message_id: str, user: str, pinned: bool, ts: float
) -> tuple[Pin, ...] | None:
    """The group's pins after the step; None when it changes nothing."""
    there = any(p.message_id == message_id for p in current)
    if there == pinned:
        return None
    if not pinned:
        return tuple(p for p in current if p.message_id != message_id)
    if len(current) >= MAX_PINS:
        raise ReactionError(
            ReactionErrorCode.TOO_MANY_PINS,
            f"a group has at most {MAX_PINS} pinned messages: unpin one first",
            MAX_PINS,
        )
    return (*current, Pin(message_id, user, ts))


# -- what both backends store ----------------------------------------------------
def encode_reactions(reactions: tuple[Reaction, ...]) -> str:
    return json.dumps([[r.emoji, list(r.users)] for r in reactions], ensure_ascii=False)


def decode_reactions(data: str | bytes | None) -> tuple[Reaction, ...]:
    if not data:
        return ()
    return tuple(Reaction(str(emoji), tuple(map(str, users))) for emoji, users in json.loads(data))


def encode_pins(pins: tuple[Pin, ...]) -> str:
    return json.dumps([[p.message_id, p.by, p.ts] for p in pins], ensure_ascii=False)


def decode_pins(data: str | bytes | None) -> tuple[Pin, ...]:
    if not data:
        return ()
    return tuple(Pin(str(m), str(by), float(ts)) for m, by, ts in json.loads(data))


# -- the events ---------------------------------------------------------------------
def reaction_views(reactions: tuple[Reaction, ...]) -> list[ReactionView]:
    return [ReactionView(emoji=r.emoji, users=list(r.users)) for r in reactions]


def pin_views(pins: tuple[Pin, ...]) -> list[PinView]:
    return [PinView(message_id=p.message_id, by=p.by, ts=p.ts) for p in pins]


def reactions_frame(
    group_id: str, change: ReactionChange, ts: float, request_id: str | None = None
) -> MessageReactions:
    """The ``message_reactions`` frame of a reaction step."""
    return MessageReactions(
        group_id=group_id,
        message_id=change.message_id,
        reactions=reaction_views(change.reactions),
        emoji=change.emoji,
        by=change.user,
        on=change.on,
        ts=ts,
        request_id=request_id,
    )


def pins_frame(
    group_id: str, change: PinChange, user: str, ts: float, request_id: str | None = None
) -> MessagePins:
    """The ``message_pins`` frame of a pin step."""
    return MessagePins(
        group_id=group_id,
        message_id=change.message_id,
        pinned=change.pinned,
        pins=pin_views(change.pins),
        by=user,
        ts=ts,
        request_id=request_id,
    )
