"""Versions of a group's messages: a person's edits and a VP reply's versions, on both backends.

A person's message keeps its current text in ``text`` (so search, history,
the group list and the VPs read what it says now) and its earlier texts in
``meta.versions``, oldest first, each ``{text, ts}`` (``ts``: when that text
was written). ``meta.editedAt`` and ``meta.editedBy`` say when and by whom
it was last edited. Only its author edits it (the caller's check), never
once deleted, and at most ``MAX_VERSIONS`` texts in all.

A VP's reply answered again (regenerated, or resent after an edit) is a new
message naming the one it replaces (``meta.regenerates``); the replaced one
is marked ``supersededBy`` the new turn. So the versions of one reply form
a chain whose first message is the *root* (:func:`family_roots`). The group
shows one version of each reply: ``meta.chosenVersion`` on the root when
someone picked one, else the newest. Answering again clears the pick, so
the new answer is shown.

Both steps change one stored message atomically (the backends' ``_patch``:
a write transaction on SQLite, a WATCH/MULTI transaction on Redis), so an
edit made at the same instant on two gateways both land, each on what the
other left; the caller then appends the event that announces it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from enum import StrEnum
from typing import Any

from protocol.versions import MAX_VERSIONS, MessageEdited, ReplyVersions
from store.base import GroupMessage


class VersionErrorCode(StrEnum):
    """Why an edit or a choice was refused; nothing was written."""

    DELETED = "deleted"
    TOO_MANY_VERSIONS = "too_many_versions"
    NOT_A_VERSION = "not_a_version"


class VersionError(Exception):
    """An edit or a choice of version broke a rule; nothing was written."""

    def __init__(self, code: VersionErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = VersionErrorCode(code)
        self.message = message

    def __reduce__(self) -> tuple[type[VersionError], tuple[VersionErrorCode, str]]:
        return (VersionError, (self.code, self.message))


# -- a person's edits --------------------------------------------------------------
def earlier_texts(message: GroupMessage) -> list[dict[str, Any]]:
    """A message's earlier texts, oldest first, each ``{text, ts}``."""
    return [dict(v) for v in message.meta.get("versions") or []]


def version_count(message: GroupMessage) -> int:
    """How many texts a message has had (1 when never edited)."""
    return len(earlier_texts(message)) + 1


def as_edited(message: GroupMessage, text: str, by: str, ts: float) -> GroupMessage:
    """``message`` with ``text`` as its new version, the current one kept among the earlier."""
    if message.meta.get("deleted"):
        raise VersionError(VersionErrorCode.DELETED, "a deleted message cannot be edited")
    if version_count(message) >= MAX_VERSIONS:
        raise VersionError(
            VersionErrorCode.TOO_MANY_VERSIONS,
            f"a message keeps at most {MAX_VERSIONS} versions",
        )
    current_ts = float(message.meta.get("editedAt") or message.ts)
    versions = [*earlier_texts(message), {"text": message.text, "ts": current_ts}]
    meta = {**message.meta, "versions": versions, "editedAt": ts, "editedBy": by}
    return message.model_copy(update={"text": text, "meta": meta})


def edited_frame(
    group_id: str, message: GroupMessage, request_id: str | None = None
) -> MessageEdited:
    """The ``message_edited`` event of an edited message."""
    return MessageEdited(
        group_id=group_id,
        message_id=message.id,
        text=message.text,
        version=version_count(message),
        by=str(message.meta.get("editedBy") or message.author),
        edited_at=float(message.meta.get("editedAt") or message.ts),
        request_id=request_id,
    )


# -- a reply's versions --------------------------------------------------------------
def family_roots(messages: Iterable[GroupMessage]) -> dict[str, str]:
    """Each reply version among ``messages`` -> the id of its reply's first version.

    Only replies with more than one version are listed. A chain whose first
    versions lie before ``messages`` still gets the right root: the oldest
    one present names it (its ``regenerates``).
    """
    by_id = {m.id: m for m in messages}
    roots: dict[str, str] = {}

    def root(message: GroupMessage) -> str:
        seen: set[str] = set()
        while True:
            older = message.meta.get("regenerates")
            if not older or older in seen:
                return message.id
            seen.add(str(older))
            found = by_id.get(str(older))
            if found is None:
                return str(older)
            message = found

    for message in by_id.values():
        if message.meta.get("regenerates"):
            first = root(message)
            roots[message.id] = first
            if first in by_id:
                roots[first] = first
        elif message.meta.get("supersededBy"):
            roots.setdefault(message.id, message.id)
    return roots


def chosen_versions(messages: list[GroupMessage]) -> dict[str, str]:
    """Each root of a reply with versions among ``messages`` -> the version the group shows.

    The root's ``chosenVersion`` when it is among them, else the newest
    version (by id) that is not deleted.
    """
    roots = family_roots(messages)
    by_id = {m.id: m for m in messages}
    members: dict[str, list[str]] = {}
    for member, root in roots.items():
        if not by_id[member].meta.get("deleted"):
            members.setdefault(root, []).append(member)
    chosen: dict[str, str] = {}
    for root, ids in members.items():
        picked = by_id[root].meta.get("chosenVersion") if root in by_id else None
        chosen[root] = str(picked) if picked in ids else max(ids)
    return chosen


def as_chosen(root: GroupMessage, chosen: str, by: str, ts: float) -> GroupMessage:
    """The root of a reply with ``chosen`` as the version the group shows."""
    meta = {**root.meta, "chosenVersion": chosen, "chosenBy": by, "chosenAt": ts}
    return root.model_copy(update={"meta": meta})


_CHOICE_KEYS = ("chosenVersion", "chosenBy", "chosenAt")


def as_unchosen(root: GroupMessage) -> GroupMessage:
    """The root of a reply without a picked version: the newest is shown."""
    meta = {
        k: v for k, v in root.meta.items() if k not in ("chosenVersion", "chosenBy", "chosenAt")
    }
    return root.model_copy(update={"meta": meta})


def versions_frame(
    group_id: str, root_id: str, chosen: str, by: str, ts: float, request_id: str | None = None
) -> ReplyVersions:
    """The ``reply_versions`` event of a choice."""
    return ReplyVersions(
        group_id=group_id, root_id=root_id, chosen=chosen, by=by, ts=ts, request_id=request_id
    )


# -- the store's steps ------------------------------------------------------------------
class MessageVersions:
    """Edits and version choices on either backend (mixed into both stores).

    Both are one atomic change of one stored message through the backend's
    own ``_patch`` (which also re-indexes it for search), so the two
    backends share this code and behave alike.
    """

    # The backend's atomic read-change-write of one message (None: no such message).
    _patch: Callable[
        [str, str, Callable[[GroupMessage], GroupMessage]], Awaitable[GroupMessage | None]
    ]

    async def edit_message(
        self, group_id: str, message_id: str, text: str, *, by: str, ts: float
    ) -> GroupMessage | None:
        """Store ``text`` as the new version of a message; None when there is no such message.

        Raises VersionError (deleted, too many versions) and writes nothing then.
        """
        return await self._patch(group_id, message_id, lambda m: as_edited(m, text, by, ts))

    async def choose_version(
        self, group_id: str, root_id: str, chosen: str | None, *, by: str, ts: float
    ) -> GroupMessage | None:
        """Pick the version of reply ``root_id`` the group shows (None: the newest again)."""

        def change(root: GroupMessage) -> GroupMessage:
            return as_unchosen(root) if chosen is None else as_chosen(root, chosen, by, ts)

        return await self._patch(group_id, root_id, change)
