"""The typed way to a group's coordinator: one async method per operation.

A :class:`CoordinatorClient` wraps the actor handle of the coordinator that
owns a group; callers (the gateway, the CLI, tests, benchmarks) never name a
method as a string or read a result as a dict. Refusals arrive as
:class:`~coordinator.errors.GroupError` (possibly wrapped by Ray).
"""

from __future__ import annotations

from ray.actor import ActorHandle

from actors.vp_actor import VPStats
from coordinator.coordinator import CoordinatorWorker
from coordinator.membership import GroupEdit, MemberOp
from coordinator.regenerate import RegenerateResult
from coordinator.results import CancelResult, IngestResult
from protocol.settings import GroupSettingsPatch
from protocol.tasks import Task
from store.base import Group
from store.conversation import ConversationInfo, GroupKind


class CoordinatorClient:
    """Calls about one group, on the coordinator actor that owns the group's shard."""

    def __init__(self, handle: ActorHandle[CoordinatorWorker], group_id: str) -> None:
        self._handle = handle
        self.group_id = group_id

    # -- group management ---------------------------------------------------
    async def create_group(
        self,
        name: str,
        roster: list[str],
        default_vp: str | None = None,
        members: list[str] | None = None,
        settings: GroupSettingsPatch | None = None,
    ) -> Group:
        group: Group = await self._handle.create_group.remote(
            self.group_id, name, roster, default_vp, members, settings
        )
        return group

    async def create_conversation(self, name: str, info: ConversationInfo) -> Group:
        group: Group = await self._handle.create_conversation.remote(self.group_id, name, info)
        return group

    async def get_group(self) -> Group | None:
        group: Group | None = await self._handle.get_group.remote(self.group_id)
        return group

    async def rename_group(self, name: str) -> Group:
        group: Group = await self._handle.rename_group.remote(self.group_id, name)
        return group

    async def delete_group(self, actor: str | None = None) -> bool:
        """Delete the group; with ``actor``, only if they own it."""
        deleted: bool = await self._handle.delete_group.remote(self.group_id, actor)
        return deleted

    async def add_vp(self, vp_id: str) -> Group:
        group: Group = await self._handle.add_vp.remote(self.group_id, vp_id)
        return group

    async def remove_vp(self, vp_id: str) -> Group:
        group: Group = await self._handle.remove_vp.remote(self.group_id, vp_id)
        return group

    async def set_default_vp(self, vp_id: str | None) -> Group:
        group: Group = await self._handle.set_default_vp.remote(self.group_id, vp_id)
        return group

    async def update_settings(self, patch: GroupSettingsPatch) -> Group:
        group: Group = await self._handle.update_settings.remote(self.group_id, patch)
        return group

    async def set_members(self, members: list[str]) -> Group:
        group: Group = await self._handle.set_members.remote(self.group_id, members)
        return group

    async def change_members(self, actor: str, op: MemberOp) -> Group:
        """Invite, remove, leave or hand over, as ``actor`` (see ``coordinator.membership``)."""
        group: Group = await self._handle.change_members.remote(self.group_id, actor, op)
        return group

    async def edit_group(self, actor: str, edit: GroupEdit) -> Group:
        """Change name, default VP and settings, as ``actor`` (the owner)."""
        group: Group = await self._handle.edit_group.remote(self.group_id, actor, edit)
        return group

    # -- conversation ---------------------------------------------------------
    async def ingest(
        self,
        sender: str,
        text: str,
        mentions: list[str] | None = None,
        client_message_id: str | None = None,
        attachments: list[dict[str, object]] | None = None,
        member_of: GroupKind | None = None,
    ) -> IngestResult:
        """Store a person's message and fan it out; returns once it is stored.

        ``member_of``: refuse (``not_found``) unless ``sender`` is a member of
        the group and the group is of that kind.
        """
        result: IngestResult = await self._handle.ingest.remote(
            self.group_id, sender, text, mentions, client_message_id, attachments, member_of
        )
        return result

    async def regenerate(self, message_id: str, by: str) -> RegenerateResult:
        """Have the VP of reply ``message_id`` answer its message again (a new turn)."""
        result: RegenerateResult = await self._handle.regenerate.remote(
            self.group_id, message_id, by
        )
        return result

    async def cancel(self, vp_id: str | None = None) -> CancelResult:
        result: CancelResult = await self._handle.cancel.remote(self.group_id, vp_id)
        return result

    async def answer(self, request_id: str, answer: str) -> bool:
        delivered: bool = await self._handle.answer.remote(self.group_id, request_id, answer)
        return delivered

    async def wait_idle(self, timeout_s: float = 60.0) -> bool:
        idle: bool = await self._handle.wait_idle.remote(self.group_id, timeout_s)
        return idle

    # -- tasks (team mode) ----------------------------------------------------
    async def accept_task(self, task_id: str, by: str) -> Task:
        """``by`` accepts the task's answer: it is done, and a skill draft is learned from it."""
        task: Task = await self._handle.accept_task.remote(self.group_id, task_id, by)
        return task

    async def revise_task(self, task_id: str, by: str, text: str) -> Task:
        """``by`` asks for another attempt at the task, with the changes ``text`` says."""
        task: Task = await self._handle.revise_task.remote(self.group_id, task_id, by, text)
        return task

    async def abandon_task(self, task_id: str, by: str) -> Task:
        task: Task = await self._handle.abandon_task.remote(self.group_id, task_id, by)
        return task

    async def team_idle(self) -> None:
        """Wait until the coordinator's team mode has nothing running (tests)."""
        await self._handle.team_idle.remote()

    def warm(self) -> None:
        """Have the group's VP actors started now, so its next message does not wait
        for their processes; returns at once (nothing depends on it)."""
        self._handle.warm.remote(self.group_id)

    async def vp_stats(self, vp_ids: list[str] | None = None) -> list[VPStats]:
        stats: list[VPStats] = await self._handle.vp_stats.remote(self.group_id, vp_ids)
        return stats
