"""Reactions and pins on a group's messages: the client frames and the events they cause.

Client frames (each answered with the state it left, as the server frame
below without ``seq`` and echoing ``requestId``, whether or not it changed
anything; refusals are typed ``error`` frames):

- ``message_react {groupId, messageId, emoji, on?, requestId?}``: the user's
  own reaction with ``emoji`` on a message: ``on`` true adds it, false
  removes it, absent toggles it. Anyone's message, a person's or a VP's.
- ``message_pin {groupId, messageId, pinned, requestId?}``: pin or unpin a
  message for the whole group; pinning twice, or unpinning what is not
  pinned, changes nothing.

Refusals: a group the user is not in, or a message it does not hold (or a
deleted one), is ``not_found`` (field ``messageId`` for the message); an
emoji that is not one (:func:`emoji_problem`) is ``invalid_frame`` on
``emoji``; a new kind of reaction beyond ``MAX_REACTION_KINDS`` on one
message, or a pin beyond ``MAX_PINS`` in a group, is ``conflict`` with
``detail {reason, limit}``.

Server frames, appended to the group's event log in the same store step as
the change (so every member on every gateway sees them in log order, and a
client that reconnects with ``lastSeq`` gets them again):

- ``message_reactions``: a message's reactions as they are now (each emoji
  with the users who reacted, in the order they did), and the change that
  made them (``emoji``, ``by``, ``on``);
- ``message_pins``: the group's pinned list as it is now (oldest pin
  first), and the change (``messageId``, ``pinned``, ``by``).

A page of history (``GET /api/groups/{id}/messages``) carries each
message's ``reactions`` in the same shape, so a reload shows them.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from protocol.common import ClientModel, Id, ServerModel

MAX_EMOJI_CHARS = 16
"""The most code points one reaction may have (a family or a flag is several)."""
MAX_REACTION_KINDS = 20
"""The most different emoji one message may carry."""
MAX_PINS = 50
"""The most messages one group may have pinned at once."""

# Joiners, variation selectors, keycap and skin-tone pieces are allowed
# inside an emoji; letters, spaces, markup and control characters are not.
_KEYCAP_BASES = frozenset("0123456789#*")
_SYMBOL_CATEGORIES = frozenset({"So", "Sk", "Sm", "Me"})
_ALLOWED_FORMAT = frozenset({"\u200d", "\ufe0e", "\ufe0f"})


def emoji_problem(text: str) -> str | None:
    """Why ``text`` is not a reaction, or None when it is one.

    A reaction is 1 to :data:`MAX_EMOJI_CHARS` code points with at least one
    symbol (an emoji, a keycap's enclosing mark), and nothing else but
    emoji pieces: joiners, variation selectors, modifiers, and the digits,
    ``#`` and ``*`` a keycap starts with. ``👍``, ``🇫🇷``, ``👨‍👩‍👧``, ``1️⃣``
    and ``❤️`` are reactions; ``ok``, ``:)`` and ``<b>`` are not.
    """
    if not text:
        return "an emoji is needed"
    if len(text) > MAX_EMOJI_CHARS:
        return f"a reaction is one emoji of at most {MAX_EMOJI_CHARS} code points"
    symbol = False
    for char in text:
        category = unicodedata.category(char)
        if category in _SYMBOL_CATEGORIES and (ord(char) > 0x7F):
            symbol = True
        elif char in _ALLOWED_FORMAT or category == "Mn" or char in _KEYCAP_BASES:
            continue
        elif "\U000e0020" <= char <= "\U000e007f":
            continue  # tag characters of subdivision flags
        else:
            return "a reaction is one emoji, without letters, spaces or punctuation"
    return None if symbol else "a reaction needs an emoji"


def _check_emoji(text: str) -> str:
    problem = emoji_problem(text)
    if problem is not None:
        raise PydanticCustomError("emoji", problem)
    return text


Emoji = Annotated[
    str, Field(min_length=1, max_length=MAX_EMOJI_CHARS), AfterValidator(_check_emoji)
]
"""One emoji, as a reaction (:func:`emoji_problem` says what passes)."""


class MessageReact(ClientModel):
    """Add (``on`` true), remove (false) or toggle (absent) the user's reaction on a message."""

    type: Literal["message_react"] = "message_react"
    group_id: Id
    message_id: Id
    emoji: Emoji
    on: bool | None = None
    request_id: Id | None = None


class MessagePin(ClientModel):
    """Pin (``pinned`` true) or unpin a message for the whole group."""

    type: Literal["message_pin"] = "message_pin"
    group_id: Id
    message_id: Id
    pinned: bool
    request_id: Id | None = None


class ReactionView(ServerModel):
    """One emoji on a message and who reacted with it, in the order they did."""

    emoji: str
    users: list[str]


class PinView(ServerModel):
    """One pinned message: who pinned it and when (Unix seconds)."""

    message_id: str
    by: str
    ts: float


class MessageReactions(ServerModel):
    """A message's reactions as they are now, after ``by`` turned ``emoji`` on or off.

    ``seq`` is set when it comes from the group's event log; the direct
    answer to a ``message_react`` has none and echoes ``requestId``.
    """

    type: Literal["message_reactions"] = "message_reactions"
    group_id: str
    message_id: str
    reactions: list[ReactionView]
    emoji: str
    by: str
    on: bool
    ts: float
    request_id: str | None = None
    seq: int | None = Field(default=None, ge=0)


class MessagePins(ServerModel):
    """The group's pinned messages as they are now, after ``by`` pinned or unpinned one."""

    type: Literal["message_pins"] = "message_pins"
    group_id: str
    message_id: str
    pinned: bool
    pins: list[PinView]
    by: str
    ts: float
    request_id: str | None = None
    seq: int | None = Field(default=None, ge=0)
