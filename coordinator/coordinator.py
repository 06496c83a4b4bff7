"""The coordinator actor: the Ray front of one shard of groups.

Every operation arrives as a typed command (``coordinator.commands``) through
one remote method, :meth:`CoordinatorWorker.call`, and is carried out by its
handler in the shard's table (``coordinator.shard.OPS``; the handlers are in
``coordinator.ops_*`` and ``coordinator.team.ops``). The shard's state and
the rules are in :class:`~coordinator.shard.Shard`.
"""

from __future__ import annotations

from typing import TypeVar

import coordinator.ops_groups
import coordinator.ops_messages
import coordinator.ops_shard
import coordinator.ops_versions
import coordinator.team.ops  # noqa: F401 - the handlers register in OPS when imported
from actors.commands import Command, Handlers
from actors.config import RuntimeConfig
from actors.process import settle
from coordinator.commands import Reconfigure
from coordinator.shard import OPS, Shard
from telemetry import tracing

R = TypeVar("R")


class CoordinatorWorker:
    """One shard of groups behind a Ray actor; :meth:`call` takes every command.

    Operations that fail raise :class:`~coordinator.errors.GroupError`;
    ``Forward`` never raises (a refusal is a ``ForwardResult``).
    """

    def __init__(self, shard: int, config: RuntimeConfig) -> None:
        tracing.install(config.tracing, "coordinator")
        self.shard = Shard(shard, config)
        settle()

    async def call(self, command: Command[R]) -> R:
        """Carry out one command on this shard (or, for a few, on this front)."""
        if type(command) in FRONT.kinds():
            return await FRONT.run(self, command)
        return await OPS.run(self.shard, command)


# Commands that replace the shard itself, handled by the front that holds it.
FRONT: Handlers[CoordinatorWorker] = Handlers("coordinator front")


@FRONT.on(Reconfigure)
async def reconfigure(front: CoordinatorWorker, cmd: Reconfigure) -> None:
    """Serve under the command's config from now on, in this process: state, store and all.

    The turns still open end with a result (as a drain with no grace time),
    team-mode jobs stop, the old store closes; then the shard starts again
    as a new actor would on the new config, recovery included. Its actor
    name and number stay: they are where Ray finds it.
    """
    await front.shard.close()
    tracing.install(cmd.config.tracing, "coordinator")
    front.shard = Shard(front.shard.number, cmd.config)
    await front.shard.recover()
