"""A group's record: create, read, edit, roster, members, delete (the handlers).

The rules are in ``coordinator.groups`` (records, roster) and
``coordinator.membership`` (who may change what, and the notices).
"""

from __future__ import annotations

from actors.commands import AllowTool
from coordinator.commands import (
    AddVP,
    CreateConversation,
    CreateGroup,
    DeleteGroup,
    EditGroup,
    GetGroup,
    MemberChange,
    RemoveVP,
    SetMembers,
)
from coordinator.membership import require_owner
from coordinator.shard import OPS, Shard
from store.base import Group


@OPS.on(CreateGroup)
async def create_group(shard: Shard, cmd: CreateGroup) -> Group:
    group = await shard.groups.create(
        cmd.group_id, cmd.name, cmd.roster, cmd.default_vp, list(cmd.members or []), cmd.settings
    )
    await shard.turns.warm(group.roster)
    return group


@OPS.on(CreateConversation)
async def create_conversation(shard: Shard, cmd: CreateConversation) -> Group:
    return await shard.groups.create_conversation(cmd.group_id, cmd.name, cmd.info)


@OPS.on(GetGroup)
async def get_group(shard: Shard, cmd: GetGroup) -> Group | None:
    return await shard.groups.get(cmd.group_id)


@OPS.on(DeleteGroup)
async def delete_group(shard: Shard, cmd: DeleteGroup) -> bool:
    group_id = cmd.group_id
    group = await shard.groups.get(group_id)
    if group is not None:
        if cmd.actor is not None and not cmd.by_admin:
            require_owner(group, cmd.actor, "delete the group")
        await shard.cancel(group, None)
    await shard.team.forget(group_id)
    shard.forget(group_id)
    shard.turns.forget(group_id)
    deleted = await shard.groups.forget(group_id)
    if group is not None and deleted:
        await shard.membership.deleted(group, cmd.actor)
    return deleted


@OPS.on(EditGroup)
async def edit_group(shard: Shard, cmd: EditGroup) -> Group:
    return await shard.membership.edit(cmd.group_id, cmd.actor, cmd.edit)


@OPS.on(AddVP)
async def add_vp(shard: Shard, cmd: AddVP) -> Group:
    return await shard.groups.add_vp(cmd.group_id, cmd.vp_id)


@OPS.on(RemoveVP)
async def remove_vp(shard: Shard, cmd: RemoveVP) -> Group:
    _, vp = await shard.groups.member_vp(cmd.group_id, cmd.vp_id)
    await shard.turns.cancel(cmd.group_id, vp)
    return await shard.groups.remove_vp(cmd.group_id, vp)


@OPS.on(SetMembers)
async def set_members(shard: Shard, cmd: SetMembers) -> Group:
    return await shard.groups.set_members(cmd.group_id, cmd.members)


@OPS.on(MemberChange)
async def change_members(shard: Shard, cmd: MemberChange) -> Group:
    return await shard.membership.change(cmd.group_id, cmd.actor, cmd.op, by_admin=cmd.by_admin)


@OPS.on(AllowTool)
async def allow_tool(shard: Shard, cmd: AllowTool) -> None:
    await shard.membership.allow_tool(cmd.group_id, cmd.tool, cmd.vp_id)
