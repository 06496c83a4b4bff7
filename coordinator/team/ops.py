"""A person's word on a task: accept, revise, abandon (the handlers; see ``desk``)."""

from __future__ import annotations

from coordinator.commands import AbandonTask, AcceptTask, ReviseTask, TeamIdle
from coordinator.shard import OPS, Shard
from protocol.tasks import Task


@OPS.on(AcceptTask)
async def accept_task(shard: Shard, cmd: AcceptTask) -> Task:
    return await shard.team.accept(await shard.groups.require(cmd.group_id), cmd.task_id, cmd.by)


@OPS.on(ReviseTask)
async def revise_task(shard: Shard, cmd: ReviseTask) -> Task:
    group = await shard.groups.require(cmd.group_id)
    return await shard.team.revise(group, cmd.task_id, cmd.by, cmd.text)


@OPS.on(AbandonTask)
async def abandon_task(shard: Shard, cmd: AbandonTask) -> Task:
    group = await shard.groups.require(cmd.group_id)
    return await shard.team.abandon(group, cmd.task_id, cmd.by)


@OPS.on(TeamIdle)
async def team_idle(shard: Shard, cmd: TeamIdle) -> None:
    """Wait until no routing, attempt or learning of the shard is running (tests)."""
    await shard.team.idle()
