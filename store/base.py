"""The store contract shared by the embedded and Redis backends.

The contract is split by role (``GroupStore``, ``GroupLog``, ``EventLog``,
``TurnLog``, ``TranscriptStore``, ``UserStore``, ..., ``TaskLog`` in
``store.tasks``, ``PlacementStore`` in ``store.placement``, ``LoginLog``
in ``store.logins``, ``SessionLog`` in ``store.sessions``, ``ReactionLog`` in
``store.reactions``, ``ThreadLog`` (rules in ``store.threads``), ``MentionLog`` in
``store.mentions``, ``AuditLog`` in ``store.audit``, ``InviteLog`` in
``store.invites``, ``Quotas`` in ``store.quotas`` and ``DisabledAccounts`` in
``store.disabled``); ``Store`` is all of them plus ``close``. Both backends
implement ``Store``, and one test suite runs against both through a
parametrised fixture.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from pydantic import BaseModel, Field

from protocol import EventFrame

# The settings model lives in the protocol, the layer every other one sees;
# it is re-exported here because a group record is a store type.
from protocol.settings import GroupSettings as GroupSettings
from store.audit import AuditLog
from store.budgets import Budgets
from store.chatviews import GroupSummary, SearchHit, TurnUsage, UsageTotals
from store.conversation import ConversationInfo, GroupKind
from store.disabled import DisabledAccounts
from store.events import EventBatch
from store.invites import InviteLog
from store.logins import LoginLog
from store.members import MemberChange
from store.mentions import MentionLog
from store.placement import PlacementStore
from store.quotas import Quotas
from store.reactions import ReactionLog
from store.sessions import SessionLog
from store.tasks import TaskLog
from store.threads import MAX_THREAD_READ, ThreadSummary
from store.turns import TurnEnd, TurnRecord


def new_id(prefix: str) -> str:
    """Time-ordered unique ids (``msg_...``, ``grp_...``)."""
    return f"{prefix}_{time.time_ns():x}{uuid.uuid4().hex[:8]}"


class Group(BaseModel):
    id: str
    name: str
    roster: list[str] = Field(default_factory=list)
    default_vp: str | None = None
    members: list[str] = Field(default_factory=list)
    # Who may change members and settings (store.members); None in records
    # made before owners existed: their first member owns them.
    owner: str | None = None
    settings: GroupSettings = Field(default_factory=GroupSettings)
    created_at: float = Field(default_factory=time.time)
    # A one-to-one conversation is a group of this kind (store.conversation).
    kind: GroupKind = GroupKind.GROUP
    conversation: ConversationInfo | None = None


class GroupMessage(BaseModel):
    """One row of a group's log: what a person or a VP said in the group."""

    id: str = Field(default_factory=lambda: new_id("msg"))
    ts: float = Field(default_factory=time.time)
    author: str
    role: str  # "user" | "assistant" | "system"
    text: str
    mentions: list[str] = Field(default_factory=list)
    # The group's members the message mentions (``@bob``): people, not VPs
    # (``store.mentions``).
    people: list[str] = Field(default_factory=list)
    # causedBy chain, clientMessageId, route_forward fields, ...
    meta: dict[str, Any] = Field(default_factory=dict)


class StoreError(Exception):
    """A store operation failed for a reason the caller can report."""


class NotFound(StoreError):
    pass


class StoreUnavailable(StoreError):
    """The store could not be reached (connection refused or lost, server loading).

    Transient by nature: a write that must not be lost (a turn's result, a
    notice) is retried until the store answers again.
    """


def user_record_key(user: dict[str, Any]) -> str:
    """The username a user record is stored under; refuses records without one.

    The store keeps user records as opaque JSON objects (the gateway decides
    what is in them), but it needs a non-empty string key to file them under.
    """
    username = user.get("username") if isinstance(user, dict) else None
    if not isinstance(username, str) or not username:
        raise StoreError("a user record needs a non-empty string 'username'")
    return username


def encode_user(user: dict[str, Any]) -> str:
    """A user record as compact JSON; StoreError when it cannot be one."""
    try:
        return json.dumps(user, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"user record is not JSON-serialisable: {exc}") from exc


def decode_user(data: str | bytes) -> dict[str, Any]:
    """A stored user record back as a dict."""
    user = json.loads(data)
    if not isinstance(user, dict):
        raise StoreError("a stored user record is not a JSON object")
    return user


class GroupStore(Protocol):
    """Group records: who is in a group, its roster and settings."""

    @abstractmethod
    async def create_group(self, group: Group) -> Group:
        """Create a group; raises StoreError if the id exists."""

    @abstractmethod
    async def get_group(self, group_id: str) -> Group | None: ...

    @abstractmethod
    async def save_group(self, group: Group) -> Group:
        """Overwrite an existing group; raises NotFound if it does not exist."""

    @abstractmethod
    async def delete_group(self, group_id: str) -> bool:
        """Delete a group and everything under it; False if it did not exist."""

    @abstractmethod
    async def list_groups(self, member: str | None = None) -> list[Group]: ...


class GroupLog(Protocol):
    """A group's durable log of messages (what people and VPs said)."""

    @abstractmethod
    async def append_message(
        self,
        group_id: str,
        message: GroupMessage,
        turns: Sequence[TurnRecord] = (),
        announce: EventFrame | None = None,
    ) -> tuple[GroupMessage, bool]:
        """Append to the group log. Idempotent on ``meta['clientMessageId']``:
        a repeat returns the stored message and ``False``.

        ``turns``, the turns dispatched to answer a new message, are recorded
        in the same write (as ``TurnLog.add_turns`` would), and so is
        ``announce``, the frame that shows the message to the group's
        clients (appended to the event log as ``EventLog.append_event``
        would): a message is never stored without being shown. A repeat
        records and appends nothing.
        """

    @abstractmethod
    async def read_messages(
        self, group_id: str, *, before: str | None = None, limit: int = 100
    ) -> list[GroupMessage]:
        """The newest ``limit`` messages older than message id ``before``, oldest first."""

    @abstractmethod
    async def get_message(self, group_id: str, message_id: str) -> GroupMessage | None: ...

    async def group_and_messages(
        self, group_id: str, limit: int
    ) -> tuple[Group | None, list[GroupMessage]]:
        """The group's record and its newest ``limit`` messages (a turn's first read).

        A backend that can read both in one step does (one trip to its
        thread or server before a turn's first token, not two).
        """
        store = cast("Store", self)
        group, messages = await asyncio.gather(
            store.get_group(group_id), self.read_messages(group_id, limit=limit)
        )
        return group, messages


class ThreadLog(Protocol):
    """The replies of a group's threads (rules in ``store.threads``)."""

    @abstractmethod
    async def thread_replies(
        self, group_id: str, root_id: str, *, limit: int = MAX_THREAD_READ
    ) -> list[GroupMessage]:
        """The newest ``limit`` replies in the thread under ``root_id``, oldest first.

        Deleted replies are there as their tombstones, as in the group log.
        """

    @abstractmethod
    async def thread_summaries(
        self, group_id: str, root_ids: Sequence[str]
    ) -> dict[str, ThreadSummary]:
        """The summaries of those of ``root_ids`` that have a reply that counts."""


class EventLog(Protocol):
    """A group's event log: the frames clients stream, numbered 1, 2, ... per group."""

    @abstractmethod
    async def append_event(self, group_id: str, frame: EventFrame) -> int:
        """Append one frame; returns its per-group sequence number.

        The frame is serialised once; the stored text carries ``seq`` set to
        the returned number (a ``seq`` on the frame itself is ignored).
        """

    @abstractmethod
    async def append_events(self, group_id: str, frames: Sequence[EventFrame]) -> list[int]:
        """Append frames in order, in one write; returns their sequence numbers.

        Nothing another writer appends comes between them. Costs one store
        step however many frames: a turn's status and the text it announces
        go together.
        """

    @abstractmethod
    async def read_events(
        self, group_id: str, after_seq: int, *, limit: int = 500, wait: float = 0.0
    ) -> EventBatch:
        """Events with seq > ``after_seq``, oldest first. With ``wait`` > 0,
        blocks up to that many seconds for the first new event when none is
        there yet."""

    @abstractmethod
    async def head(self, group_id: str) -> int:
        """The newest sequence number assigned in the group (0 when none)."""


class TurnLog(Protocol):
    """Durable turn records (``store.turns``): what was dispatched and how far it got."""

    @abstractmethod
    async def add_turns(self, group_id: str, turns: Sequence[TurnRecord]) -> None:
        """Record dispatched turns; a turn id already recorded keeps its record."""

    @abstractmethod
    async def start_turn(
        self, group_id: str, turn_id: str, frame: EventFrame | None = None
    ) -> bool:
        """Mark a turn started and append its first ``frame``, in one step.

        False when the turn is already finished: then nothing is appended and
        the turn must not run. A turn with no record may run (it was not
        dispatched by a coordinator).
        """

    @abstractmethod
    async def finish_turn(
        self,
        group_id: str,
        turn_id: str,
        frame: EventFrame | None,
        end: TurnEnd,
        *,
        after: EventFrame | None = None,
        usage: TurnUsage | None = None,
    ) -> int | None:
        """Append a turn's result ``frame`` and mark the turn finished, in one step.

        Returns the frame's seq (0 without a frame), or None when the turn was
        already finished: then nothing is appended, so a turn gets at most one
        result whoever tries to finish it and however often a write is retried.
        A turn with no record gets one, finished.

        ``after`` (the VP's last status) is appended right after the result and
        only with it. ``usage`` is added to the group's totals in the same step
        whether or not the turn was finished before (as :meth:`add_usage`: once
        per turn id).
        """

    @abstractmethod
    async def turns_of(self, group_id: str, trigger_id: str) -> list[TurnRecord]:
        """The turns dispatched to answer the group-log message ``trigger_id``."""

    @abstractmethod
    async def open_turns(self) -> list[TurnRecord]:
        """Every turn of every group that is not finished, oldest first."""


@dataclass(frozen=True, slots=True)
class StoredTranscript:
    """A VP's transcript in a group as the store holds it: a head and message rows.

    ``head`` is JSON text; ``messages`` the JSON text of each message row, in
    order. What they mean belongs to the layer that saved them
    (``actors.transcripts``); a transcript saved whole before rows existed
    is a head alone.
    """

    head: str
    messages: list[str]


class TranscriptStore(Protocol):
    """Each VP's engine transcript per group, kept as opaque JSON texts: a head and rows.

    A turn adds a few messages to a transcript of hundreds, so a save writes
    the head and only the rows from the first one that changed; a transcript
    is the largest thing a turn writes.
    """

    @abstractmethod
    async def load_transcript(self, group_id: str, vp_id: str) -> StoredTranscript | None:
        """A VP's transcript in a group, head and rows read together; None if never saved.

        The store keeps transcripts opaque: their shape belongs to the engine,
        which sits above the store and is not imported here.
        """

    @abstractmethod
    async def save_transcript(
        self, group_id: str, vp_id: str, head: str, messages: Sequence[str], keep: int = 0
    ) -> bool:
        """Replace the head, keep the first ``keep`` rows, and put ``messages`` after them.

        All of it or nothing. False, with nothing written, when the store
        holds fewer than ``keep`` rows (the caller then saves the whole
        transcript with ``keep=0``, which always succeeds).
        """


class UserStore(Protocol):
    """User records, opaque JSON objects keyed by ``username``."""

    @abstractmethod
    async def get_user(self, username: str) -> dict[str, Any] | None:
        """The record stored for ``username`` (exact, case-sensitive), or None."""

    @abstractmethod
    async def put_user(self, user: dict[str, Any]) -> None:
        """Create or replace the record of ``user['username']``.

        The record must be a JSON-serialisable object with a non-empty
        string ``username``; anything else raises StoreError.
        """

    @abstractmethod
    async def create_user(self, user: dict[str, Any]) -> bool:
        """Store the record of ``user['username']`` only if there is none; atomic.

        False, with nothing written, when the name is taken: of two
        processes creating the same user at once, exactly one succeeds.
        """

    @abstractmethod
    async def list_users(self) -> list[dict[str, Any]]:
        """Every user record, sorted by username."""

    @abstractmethod
    async def identity_user(self, identity: str) -> str | None:
        """The username an external identity (an OpenID issuer and subject) is linked to."""

    @abstractmethod
    async def link_identity(self, identity: str, username: str) -> bool:
        """Link ``identity`` to ``username`` unless it is linked already; atomic.

        False, with nothing written, when it is: of two first sign-ins at
        once, exactly one links (the other finds the link).
        """


class MemberStore(Protocol):
    """Atomic member changes of a group record."""

    @abstractmethod
    async def change_members(self, group_id: str, change: MemberChange) -> Group:
        """Apply ``change`` to the stored record in one atomic step; returns the new record.

        Raises NotFound when the group does not exist and MemberError when the
        change breaks a rule (then nothing is written).
        """


class PresenceStore(Protocol):
    """Who is connected, per gateway process, with an expiry."""

    @abstractmethod
    async def mark_online(self, users: Iterable[str], node: str, ttl_s: float) -> None:
        """Record (or renew) that ``node`` serves ``users`` for the next ``ttl_s`` seconds."""

    @abstractmethod
    async def mark_offline(self, user: str, node: str) -> None:
        """``node`` no longer serves ``user``."""

    @abstractmethod
    async def online(self, users: Iterable[str]) -> set[str]:
        """Those of ``users`` some node serves now (entries not yet expired)."""


class ChatViews(Protocol):
    """Search, deletion, read marks and usage totals (rules in ``store.chatviews``)."""

    @abstractmethod
    async def search_messages(
        self, group_ids: Sequence[str], query: str, *, limit: int = 50
    ) -> list[SearchHit]:
        """Messages of these groups matching every word of ``query``, newest first."""

    @abstractmethod
    async def delete_message(
        self, group_id: str, message_id: str, *, by: str, ts: float
    ) -> GroupMessage | None:
        """Mark a message deleted (its text is dropped, it leaves the search index).

        Returns the tombstone (``meta.deleted``), or None when there is no such
        message. Deleting twice returns the first tombstone unchanged. Who may
        delete is the caller's rule.
        """

    @abstractmethod
    async def supersede_message(
        self, group_id: str, message_id: str, *, turn_id: str, by: str, ts: float
    ) -> GroupMessage | None:
        """Mark a VP reply as superseded by the regenerated turn ``turn_id``."""

    @abstractmethod
    async def mark_read(self, group_id: str, username: str, message_id: str) -> bool:
        """Move the user's read mark up to ``message_id``; never back. False if unknown."""

    @abstractmethod
    async def summaries(self, group_ids: Sequence[str], username: str) -> list[GroupSummary]:
        """Each group's last message and the user's unread count, in the order given."""

    @abstractmethod
    async def add_usage(self, group_id: str, usage: TurnUsage) -> bool:
        """Add one finished turn's usage to its group; False if that turn was added before."""

    @abstractmethod
    async def group_usage(self, group_id: str) -> UsageTotals: ...


class VersionLog(Protocol):
    """Edits of messages and choices of reply versions (the rules: ``store.versions``)."""

    @abstractmethod
    async def edit_message(
        self, group_id: str, message_id: str, text: str, *, by: str, ts: float
    ) -> GroupMessage | None:
        """Store ``text`` as the new version of a message; None when there is no such message.

        Raises ``store.versions.VersionError`` (deleted, too many versions) and
        writes nothing then.
        """

    @abstractmethod
    async def choose_version(
        self, group_id: str, root_id: str, chosen: str | None, *, by: str, ts: float
    ) -> GroupMessage | None:
        """Pick the version of reply ``root_id`` the group shows (None: the newest again)."""


class Store(
    GroupStore,
    GroupLog,
    EventLog,
    TurnLog,
    TranscriptStore,
    UserStore,
    MemberStore,
    PresenceStore,
    ChatViews,
    Budgets,
    Quotas,
    TaskLog,
    PlacementStore,
    LoginLog,
    SessionLog,
    ReactionLog,
    VersionLog,
    ThreadLog,
    MentionLog,
    AuditLog,
    InviteLog,
    DisabledAccounts,
    Protocol,
):
    """Every role at once: what a backend implements and a process opens.

    Code that needs one role takes that role's protocol, so a test can hand
    it something smaller and a reader sees what it touches.
    """

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads; later calls raise StoreError."""
