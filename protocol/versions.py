"""Edits of a person's message and versions of a VP's reply: the client frames and events.

A person edits their own message: the edit is stored as a new version of
it (the earlier ones kept, readable), and may be resent, which has the VPs
that answered it answer the new text again. A VP's reply that is answered
again (resent, or regenerated) gets a new version beside the old one; the
group shows one version of each reply, the *chosen* one (the newest until
someone picks another), and the VPs' later turns read that one.

Client frames (each answered directly, echoing ``requestId``; refusals are
typed ``error`` frames):

- ``message_edit {groupId, messageId, text, resend?, requestId?}``: store
  ``text`` as the new version of the user's own message; with ``resend``
  the VPs that answered it answer again (as ``message_resend``). Answered
  with ``message_edited`` (and, with ``resend``, ``message_resent`` too).
- ``message_resend {groupId, messageId, requestId?}``: have the VPs that
  answered the user's own message answer its current version again.
  Answered with ``message_resent``.
- ``reply_version_choose {groupId, messageId, requestId?}``: show reply
  version ``messageId`` in place of the other versions of that reply, for
  the whole group. Answered with ``reply_versions``.

Refusals: a group the user is not in, or a message the group does not
hold, is ``not_found``; a message that is someone else's or a VP's is
``forbidden`` (``detail.reason`` ``not_author``); a deleted message is
``conflict`` (``deleted``); a message with a turn still running on it is
``conflict`` (``turn_running``, ``detail.vps`` naming them: stop them
first); more than :data:`MAX_VERSIONS` versions is ``conflict``
(``too_many_versions``); empty, blank or too long ``text`` is
``invalid_frame`` on ``text``; a resend no VP can answer is ``conflict``
(``nothing_to_resend``).

Server frames appended to the group's event log (so every member on every
gateway sees them, and a reconnecting client gets them again):

- ``message_edited``: the message's new text, its version number (the
  first text is version 1) and who edited it when;
- ``reply_versions``: which version of a reply (``rootId`` is its first
  version's id) the group now shows.

A regenerated or resent reply is announced as before: ``message_changed``
``superseded`` on the version it replaces, carrying the new ``turnId``;
the new turn streams, and its stored reply names the one it replaces
(``meta.regenerates``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ClientModel, Id, ServerModel, Text

MAX_VERSIONS = 50
"""The most versions (the first text and its edits) one message may have."""


class MessageEdit(ClientModel):
    """Store ``text`` as the new version of the user's own message; ``resend`` answers it again."""

    type: Literal["message_edit"] = "message_edit"
    group_id: Id
    message_id: Id
    text: Text
    resend: bool = False
    request_id: Id | None = None


class MessageResend(ClientModel):
    """Have the VPs that answered the user's own message answer its current version again."""

    type: Literal["message_resend"] = "message_resend"
    group_id: Id
    message_id: Id
    request_id: Id | None = None


class ReplyVersionChoose(ClientModel):
    """Show reply version ``messageId`` instead of its other versions, for the whole group."""

    type: Literal["reply_version_choose"] = "reply_version_choose"
    group_id: Id
    message_id: Id
    request_id: Id | None = None


class MessageEdited(ServerModel):
    """A person's message has a new version: ``text`` is what it says now.

    ``version`` counts its texts (the first is 1); ``editedAt`` is when, in
    Unix seconds. ``seq`` is set when it comes from the group's event log.
    """

    type: Literal["message_edited"] = "message_edited"
    group_id: str
    message_id: str
    text: str
    version: int = Field(ge=2)
    by: str
    edited_at: float
    request_id: str | None = None
    seq: int | None = Field(default=None, ge=0)


class ResentTurn(ServerModel):
    """A VP answering again: its new turn, and the reply version it replaces."""

    vp_id: str
    turn_id: str
    replaces: str


class SkippedVP(ServerModel):
    """A VP that answered the message but does not answer again, and why.

    ``reason``: ``answered_since`` (it has replied to something later, and
    answering again would rewind past that), ``busy`` (it is answering
    something else), ``not_in_roster`` (it left the group).
    """

    vp_id: str
    reason: str


class MessageResent(ServerModel):
    """The answer to a resend: the turns that answer again and the VPs that do not."""

    type: Literal["message_resent"] = "message_resent"
    group_id: str
    message_id: str
    turns: list[ResentTurn]
    skipped: list[SkippedVP] = Field(default_factory=list)
    request_id: str | None = None


class ReplyVersions(ServerModel):
    """The group now shows version ``chosen`` of the reply whose first version is ``rootId``."""

    type: Literal["reply_versions"] = "reply_versions"
    group_id: str
    root_id: str
    chosen: str
    by: str
    ts: float
    request_id: str | None = None
    seq: int | None = Field(default=None, ge=0)
