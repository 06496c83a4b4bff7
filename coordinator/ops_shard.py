"""A shard's own operations: recovery, a graceful stop, its VP hosts (the handlers)."""

from __future__ import annotations

from dataclasses import replace

from coordinator.commands import Drain, QuestionGroup, ReachHosts, Recover, SetMcp
from coordinator.results import DrainResult, RecoveryReport
from coordinator.shard import OPS, Shard


@OPS.on(Recover)
async def recover(shard: Shard, cmd: Recover) -> RecoveryReport:
    return await shard.recover()


@OPS.on(Drain)
async def drain(shard: Shard, cmd: Drain) -> DrainResult:
    await shard.recover()
    return await shard.turns.drain(cmd.timeout_s)


@OPS.on(ReachHosts)
async def reach_hosts(shard: Shard, cmd: ReachHosts) -> None:
    shard.turns.reach_hosts()


@OPS.on(QuestionGroup)
async def question_group(shard: Shard, cmd: QuestionGroup) -> str | None:
    return await shard.turns.question_group(cmd.request_id)


@OPS.on(SetMcp)
async def set_mcp(shard: Shard, cmd: SetMcp) -> None:
    """VP hosts this shard starts from now on get these MCP servers."""
    shard.config = replace(shard.config, mcp=cmd.config)
    shard.turns.config = shard.config
