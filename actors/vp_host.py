"""The Ray actor that hosts VPs: one VP per process, or several in a pool.

A VP (:class:`~actors.vp_actor.VPActor`) is a persona's engine and turns;
a :class:`VPHost` is the process it runs in. With ``RuntimeConfig.vp_hosts``
at 0 every VP has a host of its own (the cluster shape: Ray spreads them over
the nodes, and a crash takes one VP with it); with N > 0 the VPs share N
hosts, each VP in the one the store placed it on (the laptop shape: a
process, its Ray core worker and its imports serve several VPs, so memory,
idle CPU and the first message's wait for processes to start shrink with
the roster).
Either way a VP behaves the same: its turns, queue, questions and scripted
test models are its own; the host shares the store, memory and
provider-state connections, the attachment store and one connection per MCP
server (a server of ``scope: vp`` has one per VP).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TypeVar, cast

import ray
from ray import cloudpickle

from actors.config import RuntimeConfig
from actors.process import settle
from actors.vp_actor import VPActor, VPShared
from actors.vp_commands import VPCommand
from engine.mcp import ConnectionReport, McpConfig
from engine.providers.registry import ProviderRegistry
from telemetry import tracing

R = TypeVar("R")


class VPHost:
    """The Ray-facing side of the VPs in one process; each call names its VP.

    VPs are made on their first call (a group's creation warms them), so a
    host that Ray restarts after a crash makes them again as their turns
    arrive, with the configuration it was started with; ``set_mcp`` changes
    it for the VPs it holds and those it makes later.
    """

    def __init__(self, config: RuntimeConfig) -> None:
        self._open(config)
        settle()

    def _open(self, config: RuntimeConfig) -> None:
        """Serve ``config``: its shared connections open, no VP made yet."""
        self.config = config
        tracing.install(config.tracing, "vp-host")
        self._shared = VPShared.open(config)
        # The SDKs of the configured models are imported while the process
        # is idle, not in the first turn of each process.
        ProviderRegistry(config.engine, overrides=config.provider_overrides).preload()
        self._vps: dict[str, VPActor] = {}

    def _vp(self, vp_id: str) -> VPActor:
        vp = self._vps.get(vp_id)
        if vp is None:
            config = self.config
            if config.provider_overrides:
                # A VP's own copy of the test and benchmark providers, as if it
                # had a process of its own (a scripted model keeps its script).
                own = cloudpickle.loads(cloudpickle.dumps(config.provider_overrides))
                config = dataclasses.replace(config, provider_overrides=own)
            vp = self._vps[vp_id] = VPActor(vp_id, config, self._shared)
        return vp

    async def reach(self) -> None:
        """A caller's first call, made ahead so that no turn's call is the first.

        The MCP servers the personas may use start opening now, in the
        background, so that they are ready by the first turn.
        """
        self._shared.start_mcp()

    async def call(self, vp_id: str, command: VPCommand[R]) -> R:
        """Carry out ``command`` on VP ``vp_id`` (made now unless the command says not to)."""
        vp = self._vp(vp_id) if command.makes_vp else self._vps.get(vp_id)
        if vp is None:
            return cast("R", command.absent)
        return await vp.call(command)

    async def reconfigure(self, config: RuntimeConfig) -> None:
        """Serve under ``config`` from now on, in this process.

        Every VP here stops (its turns aborted, each returning its outcome),
        the shared connections close and open again on ``config``; VPs are
        made anew, with it, on their next call.
        """
        vps, shared = list(self._vps.values()), self._shared
        self._open(config)
        await asyncio.gather(*(vp.close() for vp in vps), return_exceptions=True)
        await shared.close()
        self._shared.start_mcp()

    async def set_mcp(self, config: McpConfig) -> None:
        """Every VP here uses these MCP servers from its next turn on; VPs made later too.

        The process's connections change once, for all its VPs: a server
        removed or changed is closed, an unchanged one keeps its connection.
        """
        self.config = dataclasses.replace(self.config, mcp=config)
        await self._shared.mcp.reconfigure(config)
        for vp in list(self._vps.values()):
            await vp.set_mcp(config)
        self._shared.start_mcp()

    async def mcp_reports(self) -> tuple[str, list[ConnectionReport]]:
        """This process's MCP connections as a listing shows them, with the host's name."""
        name = ray.get_runtime_context().get_actor_name() or "vp-host"
        return name, self._shared.mcp.reports()
