"""The driver-side entry to the actor system.

A :class:`Runtime` finds (or starts) the coordinator actor that owns a group
and sends it typed commands (``coordinator.commands``): ``await
runtime.send(Ingest(group_id, "ann", "@linus hi"))`` answers with the
command's result type. Refusals arrive as
:class:`~coordinator.errors.GroupError` (possibly wrapped by Ray). Groups are
sharded over ``coordinator_shards`` named actors by a stable hash
of the group id, so every gateway replica and every CLI process sends a
group's traffic to the same coordinator.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, TypeVar, cast

import ray
from ray import ObjectRef
from ray.actor import ActorHandle

from actors.commands import Command, GroupCommand
from actors.config import RuntimeConfig
from actors.vp_host import VPHost
from coordinator.commands import (
    CreateConversation,
    CreateGroup,
    Drain,
    QuestionGroup,
    ReachHosts,
    Reconfigure,
    Recover,
    SetMcp,
)
from coordinator.coordinator import CoordinatorWorker
from coordinator.results import DrainResult, RecoveryReport
from coordinator.shards import shard_of
from coordinator.vps import host_prefixes, start_pool
from engine.mcp import ConnectionReport, McpConfig
from protocol.settings import GroupSettingsPatch
from store.base import Group, Store, new_id
from store.conversation import ID_PREFIX, ConversationInfo

CoordinatorActor = ray.remote(CoordinatorWorker)
R = TypeVar("R")


class Runtime:
    """One process's view of a deployment: its configuration, coordinators and a store.

    The configuration reaches every actor as a constructor argument; actors
    read nothing from the environment of the machine they land on.
    """

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self._coordinators: dict[int, ActorHandle[CoordinatorWorker]] = {}
        self._store: Store | None = None

    def _coordinator(self, group_id: str) -> ActorHandle[CoordinatorWorker]:
        return self._shard(shard_of(group_id, self.config.coordinator_shards))

    async def send(self, command: GroupCommand[R]) -> R:
        """Carry out a group's command on the coordinator shard that owns the group."""
        result: R = await self._coordinator(command.group_id).call.remote(command)
        return result

    def post(self, command: GroupCommand[Any]) -> None:
        """Send a group's command and return at once: nothing waits for its answer."""
        self._coordinator(command.group_id).call.remote(command)

    async def _on_shard(self, shard: int, command: Command[R]) -> R:
        result: R = await self._shard(shard).call.remote(command)
        return result

    async def _on_every_shard(self, command: Command[R]) -> list[R]:
        shards = range(self.config.coordinator_shards)
        return list(await asyncio.gather(*(self._on_shard(i, command) for i in shards)))

    def _shard(self, shard: int) -> ActorHandle[CoordinatorWorker]:
        handle = self._coordinators.get(shard)
        if handle is None:
            started = CoordinatorActor.options(
                name=self.config.actor_name("coordinator", shard),
                namespace=self.config.namespace,
                get_if_exists=True,
                lifetime="detached",
                max_restarts=-1,
                num_cpus=0,
                resources=dict(self.config.coordinator_resources),
                scheduling_strategy=self.config.actor_placement.strategy,
                max_concurrency=10_000,
            ).remote(shard, self.config)
            handle = self._coordinators[shard] = cast("ActorHandle[CoordinatorWorker]", started)
        return handle

    def start_vp_hosts(self) -> int:
        """Start the pooled VP host processes now, not on a first message; returns how many.

        Each coordinator shard then calls them once (not awaited here): a
        process's first call to an actor waits while Ray finds it.
        """
        started = start_pool(self.config)
        if started:
            for shard in range(self.config.coordinator_shards):
                self._shard(shard).call.remote(ReachHosts())
        return started

    async def recover(self) -> RecoveryReport:
        """Start every coordinator shard and wait until each took back its unfinished turns.

        A server calls this before it takes traffic: after a crash or a
        restart every turn that has no result runs again (never started) or
        ends with an error result (started).
        """
        return sum(await self._on_every_shard(Recover()), RecoveryReport())

    async def drain(self, timeout_s: float) -> DrainResult:
        """Let every shard's turns finish for up to ``timeout_s``; end the rest with a result.

        Only for a deployment this process owns (its local Ray instance): a
        gateway replica that stops must not end the turns of a shared cluster.
        """
        results = await self._on_every_shard(Drain(timeout_s))
        return DrainResult(
            drained=all(r.drained for r in results),
            interrupted=sum(r.interrupted for r in results),
        )

    async def store(self) -> Store:
        """A store for reads (history, events) that need no coordinator."""
        if self._store is None:
            self._store = self.config.open_store()
        return self._store

    async def create_group(
        self,
        name: str,
        roster: list[str],
        *,
        default_vp: str | None = None,
        members: list[str] | None = None,
        settings: GroupSettingsPatch | None = None,
        group_id: str | None = None,
    ) -> Group:
        """Create a group under a new id (or ``group_id``)."""
        command = CreateGroup(
            group_id or new_id("grp"), name, roster, default_vp, members, settings
        )
        return await self.send(command)

    async def create_conversation(self, name: str, info: ConversationInfo) -> Group:
        """Create a one-to-one conversation under a new id (``conv_...``)."""
        return await self.send(CreateConversation(new_id(ID_PREFIX), name, info))

    async def question_group(self, request_id: str) -> str | None:
        """The group or conversation an open question was asked in, or None.

        The question's id names the VP that asked; any coordinator can ask that
        VP, so the shard is picked by the question's id.
        """
        shard = shard_of(request_id, self.config.coordinator_shards)
        return await self._on_shard(shard, QuestionGroup(request_id))

    async def set_mcp(self, config: McpConfig) -> int:
        """Use these MCP servers everywhere, without a restart; returns the VP hosts told.

        The coordinator shards start new VP hosts with them, and every VP of
        this deployment that is running now switches at once (a VP a host
        makes later too): a server that is gone or changed is closed, a new
        one is opened on first use. A host that Ray restarts after a crash
        comes back with the configuration it was first started with, until
        the next change or a restart of the server (which reads the servers
        file again).
        """
        self.config = dataclasses.replace(self.config, mcp=config)
        await self._on_every_shard(SetMcp(config))
        # Told together: no host waits for another to let go of its servers.
        hosts = await asyncio.to_thread(self._running_hosts)
        answers = await asyncio.gather(
            *(h.set_mcp.remote(config) for h in hosts), return_exceptions=True
        )
        for answer in answers:
            # A host gone since it was listed: a new one starts with the new servers.
            if isinstance(answer, BaseException) and not isinstance(
                answer, ray.exceptions.RayActorError
            ):
                raise answer
        return sum(not isinstance(a, BaseException) for a in answers)

    async def mcp_reports(self, within_s: float = 5.0) -> list[tuple[str, list[ConnectionReport]]]:
        """The MCP connections of every running VP host, each with the host's name.

        A host that does not answer within ``within_s`` (busy starting, or
        gone) is left out; the listing then shows what the others report.
        """
        hosts = await asyncio.to_thread(self._running_hosts)
        if not hosts:
            return []
        answers = await asyncio.gather(
            *(_within(h.mcp_reports.remote(), within_s) for h in hosts), return_exceptions=True
        )
        out: list[tuple[str, list[ConnectionReport]]] = []
        for answer in answers:
            if not isinstance(answer, BaseException):
                out.append(answer)
        return out

    async def reconfigure(self, config: RuntimeConfig) -> None:
        """Serve under ``config`` from now on, in the processes that run now.

        ``config`` names the same actors (prefix, namespace, shard and host
        counts): each coordinator shard ends its open turns with a result and
        starts again on ``config`` (its store, engine, limits), then each VP
        host stops its VPs and makes them anew with it. Nothing restarts, so
        this costs milliseconds where new processes cost seconds. A host
        that Ray restarts after a crash comes back with the configuration
        it was first started with.
        """
        if config.prefix != self.config.prefix or config.namespace != self.config.namespace:
            raise ValueError("reconfigure keeps the deployment's actor names")
        if config.coordinator_shards != self.config.coordinator_shards:
            raise ValueError("reconfigure keeps the number of coordinator shards")
        self.config = config
        await self.aclose()
        await self._on_every_shard(Reconfigure(config))
        hosts = self._running_hosts()
        await asyncio.gather(*(h.reconfigure.remote(config) for h in hosts))

    def _running_hosts(self) -> list[ActorHandle[VPHost]]:
        """The VP hosts of this deployment that run now (of either kind)."""
        heads = host_prefixes(self.config)
        hosts: list[ActorHandle[VPHost]] = []
        for actor in ray.util.list_named_actors(all_namespaces=True):
            name = actor["name"] if isinstance(actor, dict) else actor
            ns = actor.get("namespace") if isinstance(actor, dict) else self.config.namespace
            if ns != self.config.namespace or not name.startswith(heads):
                continue
            try:
                hosts.append(cast("ActorHandle[VPHost]", ray.get_actor(name, namespace=ns)))
            except ValueError:
                pass  # gone since it was listed
        return hosts

    def shutdown(self) -> None:
        """Kill every actor of this deployment (its name prefix), by handle."""
        for actor in ray.util.list_named_actors(all_namespaces=True):
            name = actor["name"] if isinstance(actor, dict) else actor
            ns = actor.get("namespace") if isinstance(actor, dict) else self.config.namespace
            if ns == self.config.namespace and name.startswith(self.config.prefix):
                try:
                    ray.kill(ray.get_actor(name, namespace=ns), no_restart=True)
                except ValueError:
                    pass
        self._coordinators.clear()

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.close()
            self._store = None


async def _within(ref: ObjectRef[R], seconds: float) -> R:
    async with asyncio.timeout(seconds):
        return await ref
