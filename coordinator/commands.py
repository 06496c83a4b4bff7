"""The coordinator's operations, one frozen command type each, with its result type.

A group's commands (:class:`~actors.commands.GroupCommand`) carry its
``group_id``: ``Runtime.send`` finds the shard that owns the group by it. A
shard's commands (recovery, drain, MCP servers, a new configuration) go to
every shard, or to the one a key picks. Each has one handler, in the
``coordinator.ops_*`` module of its concept (tasks: ``coordinator.team.ops``);
the shard's Ray front (``coordinator.coordinator``) runs them through one table.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.commands import AllowTool, Command, Forward, GroupCommand
from actors.config import RuntimeConfig
from actors.vp_commands import AnswerReceipt, VPStats
from coordinator.membership import GroupEdit, MemberOp
from coordinator.regenerate import RegenerateResult
from coordinator.results import CancelResult, DrainResult, IngestResult, RecoveryReport
from coordinator.versions import EditResult, ResendResult
from engine.mcp import McpConfig
from protocol import Channel
from protocol.settings import GroupSettingsPatch
from protocol.tasks import Task
from store.base import Group
from store.conversation import ConversationInfo, GroupKind

__all__ = [
    "AbandonTask",
    "AcceptTask",
    "AddVP",
    "AllowTool",
    "Answer",
    "Cancel",
    "CreateConversation",
    "CreateGroup",
    "DeleteGroup",
    "Drain",
    "EditGroup",
    "EditMessage",
    "Forward",
    "GetGroup",
    "Ingest",
    "MemberChange",
    "QuestionGroup",
    "ReachHosts",
    "Reconfigure",
    "Recover",
    "Regenerate",
    "RemoveVP",
    "Resend",
    "ReviseTask",
    "SetMcp",
    "SetMembers",
    "TeamIdle",
    "VPStatsOf",
    "WaitIdle",
    "Warm",
]


# -- a group's record ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CreateGroup(GroupCommand[Group]):
    """Create a group under ``group_id``; its VPs' actors start at once."""

    group_id: str
    name: str
    roster: list[str]
    default_vp: str | None = None
    members: list[str] | None = None
    settings: GroupSettingsPatch | None = None


@dataclass(frozen=True, slots=True)
class CreateConversation(GroupCommand[Group]):
    """Create a one-to-one conversation: a private group of one VP and its owner."""

    group_id: str
    name: str
    info: ConversationInfo


@dataclass(frozen=True, slots=True)
class GetGroup(GroupCommand[Group | None]):
    group_id: str


@dataclass(frozen=True, slots=True)
class DeleteGroup(GroupCommand[bool]):
    """Delete the group (its turns stopped first); with ``actor``, only if they own it.

    ``by_admin``: ``actor`` is an instance administrator (the gateway checked
    it), who may delete any group.
    """

    group_id: str
    actor: str | None = None
    by_admin: bool = False


@dataclass(frozen=True, slots=True)
class EditGroup(GroupCommand[Group]):
    """Change name, default VP and settings at once.

    With ``actor``: only the owner may, and the change is announced to the
    group. Without: the deployment's own change (a conversation's title, a
    script), stored and not announced.
    """

    group_id: str
    edit: GroupEdit
    actor: str | None = None


@dataclass(frozen=True, slots=True)
class AddVP(GroupCommand[Group]):
    group_id: str
    vp_id: str


@dataclass(frozen=True, slots=True)
class RemoveVP(GroupCommand[Group]):
    """Take a VP out of the roster; its turns in the group stop first."""

    group_id: str
    vp_id: str


@dataclass(frozen=True, slots=True)
class SetMembers(GroupCommand[Group]):
    """Replace the member list (the deployment's own change: no checks, no notice)."""

    group_id: str
    members: list[str]


@dataclass(frozen=True, slots=True)
class MemberChange(GroupCommand[Group]):
    """Invite, remove, leave or hand over, as ``actor`` (``coordinator.membership``).

    ``by_admin``: ``actor`` is an instance administrator (the gateway checked
    it), who may hand any group over to one of its members without being one.
    """

    group_id: str
    actor: str
    op: MemberOp
    by_admin: bool = False


# -- messages and turns --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ingest(GroupCommand[IngestResult]):
    """Store a person's message and fan it out; answered once it is stored.

    ``member_of``: refuse (``not_found``) unless ``sender`` is a member of
    the group and the group is of that kind.
    """

    group_id: str
    sender: str
    text: str
    mentions: list[str] | None = None
    client_message_id: str | None = None
    attachments: list[dict[str, object]] | None = None
    member_of: GroupKind | None = None
    # How the message came in (the gateway connection's); the VP's prompt names it.
    channel: Channel = Channel.API
    # A reply in the thread under this message (checked by the gateway: gateway.threads).
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class Regenerate(GroupCommand[RegenerateResult]):
    """Have the VP of reply ``message_id`` answer its message again (a new turn)."""

    group_id: str
    message_id: str
    by: str


@dataclass(frozen=True, slots=True)
class EditMessage(GroupCommand[EditResult]):
    """Store ``text`` as the new version of ``by``'s message ``message_id``; ``resend`` reruns.

    Refused while a turn on the message runs (``coordinator.ops_versions``).
    """

    group_id: str
    message_id: str
    text: str
    by: str
    resend: bool = False


@dataclass(frozen=True, slots=True)
class Resend(GroupCommand[ResendResult]):
    """Have the VPs that answered ``by``'s message ``message_id`` answer it again."""

    group_id: str
    message_id: str
    by: str


@dataclass(frozen=True, slots=True)
class Cancel(GroupCommand[CancelResult]):
    """Stop one VP's turns in the group, or every turn (which also ends its chains)."""

    group_id: str
    vp_id: str | None = None


@dataclass(frozen=True, slots=True)
class Answer(GroupCommand[AnswerReceipt]):
    """Deliver a person's answer to the VP that asked ``request_id``; the VP checks it.

    A tuple is the choices of a multi-select question.
    """

    group_id: str
    request_id: str
    answer: str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WaitIdle(GroupCommand[bool]):
    """Wait until no turn of the group runs or is about to be dispatched; False on timeout."""

    group_id: str
    timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Warm(GroupCommand[None]):
    """Start the actors of the group's roster now (someone opened it) unless they run."""

    group_id: str


@dataclass(frozen=True, slots=True)
class VPStatsOf(GroupCommand[list[VPStats]]):
    """Counters of the group's VPs (or of ``vp_ids``); starts their actors too."""

    group_id: str
    vp_ids: list[str] | None = None


# -- tasks (team mode) ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AcceptTask(GroupCommand[Task]):
    """``by`` accepts the task's answer: it is done, and a skill draft is learned from it."""

    group_id: str
    task_id: str
    by: str


@dataclass(frozen=True, slots=True)
class ReviseTask(GroupCommand[Task]):
    """``by`` asks for another attempt at the task, with the changes ``text`` says."""

    group_id: str
    task_id: str
    by: str
    text: str


@dataclass(frozen=True, slots=True)
class AbandonTask(GroupCommand[Task]):
    group_id: str
    task_id: str
    by: str


@dataclass(frozen=True, slots=True)
class TeamIdle(GroupCommand[None]):
    """Wait until the shard's team mode has nothing running (tests, shutdown)."""

    group_id: str


# -- a shard's ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Recover(Command[RecoveryReport]):
    """Take over the shard's turns that have no result (once per actor life)."""


@dataclass(frozen=True, slots=True)
class Drain(Command[DrainResult]):
    """A graceful stop: let turns finish for ``timeout_s``, end the rest with a result."""

    timeout_s: float


@dataclass(frozen=True, slots=True)
class ReachHosts(Command[None]):
    """Call the pooled VP hosts once now, so that no turn's call is the first."""


@dataclass(frozen=True, slots=True)
class QuestionGroup(Command[str | None]):
    """The group an open question was asked in (any shard may be asked)."""

    request_id: str


@dataclass(frozen=True, slots=True)
class SetMcp(Command[None]):
    """VP hosts the shard starts from now on get these MCP servers."""

    config: McpConfig


@dataclass(frozen=True, slots=True)
class Reconfigure(Command[None]):
    """Serve under ``config`` from now on, in the same process (``Runtime.reconfigure``)."""

    config: RuntimeConfig
