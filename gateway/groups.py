"""Group operations on behalf of a user, shared by the HTTP API and the WebSocket.

Every operation starts with the same authorisation rule: the user must be a
member of the group. A group that does not exist and a group the user is not
in give the same ``not_found`` answer, so nobody learns which ids exist.
Reads (membership, history, the event-log head) go straight to the store;
changes go through the group's coordinator, which owns the group record,
and each one made is recorded in the audit log (``gateway.audit``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

from actors.commands import GroupCommand
from actors.vp_commands import AnswerReceipt
from coordinator.commands import (
    AbandonTask,
    AcceptTask,
    AddVP,
    Answer,
    Cancel,
    DeleteGroup,
    EditGroup,
    Ingest,
    MemberChange,
    RemoveVP,
    ReviseTask,
)
from coordinator.membership import GroupEdit, MemberOp
from gateway.audit import edit_detail, record
from gateway.errors import GatewayError, coordinator_refusal, not_found
from gateway.traces import received
from gateway.views import message_view, with_reactions, with_threads
from protocol import Channel, ErrorCode, GroupSettingsPatch
from protocol.common import is_id
from protocol.tasks import Task
from store.attachments import AttachmentStore
from store.audit import AuditAction
from store.base import Group, GroupMessage, Store
from store.conversation import GroupKind
from store.membership import owner_of
from store.threads import thread_of
from store.workspaces import remove_group_files

if TYPE_CHECKING:
    from coordinator.results import CancelResult, IngestResult
    from coordinator.runtime import Runtime
    from gateway.tail import Hub


T = TypeVar("T")


class GroupService:
    """What a user may do with groups, checked and carried out."""

    def __init__(self, runtime: Runtime, hub: Hub, attachments: AttachmentStore) -> None:
        self.runtime = runtime
        self.hub = hub
        self.attachments = attachments

    async def store(self) -> Store:
        return await self.runtime.store()

    # -- reads ---------------------------------------------------------------
    async def member_group(self, username: str, group_id: str) -> Group:
        """The group, if ``username`` is one of its members; else ``not_found``."""
        if not is_id(group_id):
            raise not_found("group")
        group = await (await self.store()).get_group(group_id)
        if group is None or username not in group.members or group.kind is not GroupKind.GROUP:
            raise not_found("group")
        return group

    async def list_for(self, username: str) -> list[Group]:
        """The user's groups; conversations are listed by ``gateway.conversations``."""
        groups = await (await self.store()).list_groups(member=username)
        return [g for g in groups if g.kind is GroupKind.GROUP]

    async def head_seq(self, group_id: str) -> int:
        """The newest sequence number of the group's event log (0 when empty)."""
        return await (await self.store()).head(group_id)

    async def history(
        self,
        username: str,
        group_id: str,
        before: str | None,
        limit: int,
        include_threads: bool = False,
    ) -> dict[str, Any]:
        """A page of the group's main timeline (oldest first) and the event-log head.

        Replies in threads are left out (each root carries its thread's
        summary; ``GET .../threads/{id}`` reads one) unless
        ``include_threads``: a page is ``limit`` messages of the timeline,
        however busy its threads. The head is read before the messages: a
        reply finished in between then shows up twice (in the page and in
        the replayed stream, told apart by ``meta.turnId``) instead of not
        at all.
        """
        await self.member_group(username, group_id)
        last_seq = await self.head_seq(group_id)
        store = await self.store()
        messages, more = await _timeline_page(store, group_id, before, limit, include_threads)
        views = [message_view(m, group_id) for m in messages]
        await with_reactions(store, group_id, views)
        await with_threads(store, group_id, views)
        return {"groupId": group_id, "messages": views, "lastSeq": last_seq, "hasMore": more}

    # -- changes -------------------------------------------------------------
    async def create(
        self,
        username: str,
        name: str,
        roster: list[str],
        default_vp: str | None = None,
        settings: GroupSettingsPatch | None = None,
    ) -> Group:
        """Create a group whose first member is its creator.

        ``settings`` was checked against its bounds when the request was parsed.
        """
        try:
            group = await self.runtime.create_group(
                name, list(roster), default_vp=default_vp, members=[username], settings=settings
            )
        except Exception as exc:
            raise _refusal(exc) from exc
        await self._audit(username, AuditAction.GROUP_CREATED, group.id, {"name": group.name})
        return group

    async def rename(self, username: str, group_id: str, name: str) -> Group:
        return await self.edit(username, group_id, GroupEdit(name=name))

    async def delete(self, username: str, group_id: str) -> None:
        """Delete a group (its owner only); every watcher, on every process, is told."""
        group = await self.member_group(username, group_id)
        await self._call(DeleteGroup(group_id, username))
        await self._audit(username, AuditAction.GROUP_DELETED, group_id, {"name": group.name})
        await self._deleted(group_id)

    async def admin_delete(self, admin: str, group: Group) -> int:
        """An administrator deletes any group; how many running or queued turns it stopped.

        The turns are stopped first, through the same cancel as ``POST
        /api/groups/{id}/cancel`` (the coordinator's delete cancels again,
        for a turn that began in between), then the group goes.
        """
        stopped = await self._call(Cancel(group.id, None))
        await self._call(DeleteGroup(group.id, admin, by_admin=True))
        detail = {
            "name": group.name,
            "owner": owner_of(group),
            "stoppedTurns": stopped.aborted,
            "byAdmin": True,
        }
        await self._audit(admin, AuditAction.GROUP_DELETED, group.id, detail)
        await self._deleted(group.id)
        return stopped.aborted

    async def admin_transfer(self, admin: str, group: Group, new_owner: str) -> Group:
        """An administrator hands any group over to one of its members."""
        op = MemberOp.transfer(new_owner)
        changed = await self._call(MemberChange(group.id, admin, op, by_admin=True))
        detail = {
            "username": new_owner,
            "scope": "group",
            "role": "owner",
            "previousOwner": owner_of(group),
            "byAdmin": True,
        }
        await self._audit(admin, AuditAction.ROLE_CHANGED, group.id, detail)
        return changed

    async def _deleted(self, group_id: str) -> None:
        self.hub.group_deleted(group_id)
        # Its files go with it: the workspace (under this process's data
        # directory) and the files sent with its messages.
        data_dir = self.runtime.config.store.data_dir
        await asyncio.to_thread(remove_group_files, data_dir, group_id)
        await self.attachments.delete_group(group_id)

    async def add_vp(self, username: str, group_id: str, vp_id: str) -> Group:
        await self.member_group(username, group_id)
        group = await self._call(AddVP(group_id, vp_id))
        await self._audit(username, AuditAction.VP_ADDED, group_id, {"vpId": vp_id})
        return group

    async def remove_vp(self, username: str, group_id: str, vp_id: str) -> Group:
        await self.member_group(username, group_id)
        group = await self._call(RemoveVP(group_id, vp_id))
        await self._audit(username, AuditAction.VP_REMOVED, group_id, {"vpId": vp_id})
        return group

    async def set_default_vp(self, username: str, group_id: str, vp_id: str | None) -> Group:
        edit = GroupEdit(default_vp=vp_id, clear_default_vp=vp_id is None)
        return await self.edit(username, group_id, edit)

    async def edit(self, username: str, group_id: str, edit: GroupEdit) -> Group:
        """Change name, default VP and settings (the owner only); announced to the group."""
        await self.member_group(username, group_id)
        group = await self._call(EditGroup(group_id, edit, username))
        await self._audit(username, AuditAction.GROUP_SETTINGS_CHANGED, group_id, edit_detail(edit))
        return group

    # -- members (see coordinator.membership for the rules) ----------------------
    async def invite(self, username: str, group_id: str, invitee: str) -> Group:
        """The owner adds a user by name; an unknown name is ``not_found`` on ``username``."""
        await self.member_group(username, group_id)
        if not invitee or await (await self.store()).get_user(invitee) is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"there is no user {invitee!r}: check the spelling, or create them "
                "with `yeaft user add`",
                field="username",
                detail={"reason": "unknown_user", "username": invitee},
            )
        return await self._members(username, group_id, MemberOp.invite(invitee))

    async def remove(self, username: str, group_id: str, member: str) -> Group:
        """The owner removes a member; a member removing themselves leaves."""
        op = MemberOp.leave(member) if member == username else MemberOp.remove(member)
        return await self._members(username, group_id, op)

    async def transfer(self, username: str, group_id: str, new_owner: str) -> Group:
        return await self._members(username, group_id, MemberOp.transfer(new_owner))

    async def leave(self, username: str, group_id: str) -> Group:
        return await self._members(username, group_id, MemberOp.leave(username))

    async def join(self, username: str, group_id: str, invite_id: str) -> Group:
        """``username`` joins by an invite link (checked and counted by ``gateway.invites``).

        Answers the group as it is, without a change, when they are in it already.
        """
        try:
            group = await self.runtime.send(
                MemberChange(group_id, username, MemberOp.join(username))
            )
        except Exception as exc:
            raise _refusal(exc) from exc
        detail = {"username": username, "invite": invite_id}
        await self._audit(username, AuditAction.MEMBER_ADDED, group_id, detail)
        return group

    # The HTTP API's older names for the same operations.
    add_member = invite
    remove_member = remove

    async def _members(self, username: str, group_id: str, op: MemberOp) -> Group:
        await self.member_group(username, group_id)
        group = await self._call(MemberChange(group_id, username, op))
        detail = {"username": op.user}
        if op.action == "owner":
            detail.update(scope="group", role="owner", previousOwner=username)
        await self._audit(username, _MEMBER_ACTIONS[op.action], group_id, detail)
        return group

    # -- conversation --------------------------------------------------------
    async def ingest(
        self,
        username: str,
        group_id: str,
        text: str,
        mentions: list[str] | None,
        client_message_id: str | None,
        attachments: list[dict[str, Any]] | None = None,
        channel: Channel = Channel.API,
        thread_id: str | None = None,
    ) -> IngestResult:
        """Store a user's message and fan it out; returns once it is stored.

        The coordinator, which holds the group, checks that ``username`` is a
        member (one store read less on the way to the first token). A reply
        in a thread (``thread_id``) is checked first (``gateway.threads``).
        """
        if not is_id(group_id):
            raise not_found("group")
        try:
            with received(username, group_id, text, channel):
                return await self.runtime.send(
                    Ingest(
                        group_id,
                        username,
                        text,
                        mentions,
                        client_message_id,
                        attachments,
                        member_of=GroupKind.GROUP,
                        channel=channel,
                        thread_id=thread_id,
                    )
                )
        except Exception as exc:
            error = _refusal(exc)
            # The same answer as for a group that does not exist.
            raise not_found("group") if error.code is ErrorCode.NOT_FOUND else error from exc

    async def cancel(self, username: str, group_id: str, vp_id: str | None) -> CancelResult:
        await self.member_group(username, group_id)
        return await self._call(Cancel(group_id, vp_id))

    async def answer(
        self, username: str, group_id: str, request_id: str, answer: str | tuple[str, ...]
    ) -> AnswerReceipt:
        await self.member_group(username, group_id)
        return await self._call(Answer(group_id, request_id, answer))

    async def task_verdict(
        self,
        username: str,
        verdict: AcceptTask | ReviseTask | AbandonTask,
    ) -> Task:
        """Accept, revise or abandon one of the group's tasks, as ``username`` (a member)."""
        await self.member_group(username, verdict.group_id)
        return await self._call(verdict)

    async def _audit(
        self, username: str, action: AuditAction, group_id: str, detail: dict[str, Any]
    ) -> None:
        """Record a change to a group, by ``username``, in the audit log (``gateway.audit``)."""
        await record(self.runtime, action, actor=username, target=group_id, detail=detail)

    async def _call(self, command: GroupCommand[T]) -> T:
        """Run one coordinator command; its refusals become GatewayErrors."""
        try:
            return await self.runtime.send(command)
        except Exception as exc:
            raise _refusal(exc) from exc


# What each member change is in the audit log (MemberOp.action).
_MEMBER_ACTIONS = {
    "invited": AuditAction.MEMBER_ADDED,
    "removed": AuditAction.MEMBER_REMOVED,
    "left": AuditAction.MEMBER_LEFT,
    "owner": AuditAction.ROLE_CHANGED,
}


def _refusal(exc: Exception) -> GatewayError:
    return coordinator_refusal(exc, "group service")


# The most reads one history page makes while skipping threads' replies.
_PAGE_READS = 8


async def _timeline_page(
    store: Store, group_id: str, before: str | None, limit: int, include_threads: bool
) -> tuple[list[GroupMessage], bool]:
    """Up to ``limit`` messages before ``before`` (oldest first), and whether older ones exist.

    Without ``include_threads`` the log is read page by page, backwards,
    keeping the main timeline's messages, for at most :data:`_PAGE_READS`
    reads (a page may then hold fewer, with ``hasMore`` still true).
    """
    if include_threads:
        messages = await store.read_messages(group_id, before=before, limit=limit)
        return messages, len(messages) == limit
    kept: list[GroupMessage] = []
    cursor = before
    for _ in range(_PAGE_READS):
        batch = await store.read_messages(group_id, before=cursor, limit=limit)
        kept = [m for m in batch if thread_of(m.meta) is None] + kept
        if len(batch) < limit:
            return kept[-limit:], len(kept) > limit
        if len(kept) >= limit:
            return kept[-limit:], True
        cursor = batch[0].id
    return kept[-limit:], True
