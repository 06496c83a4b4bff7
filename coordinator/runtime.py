"""The driver-side entry to the actor system.

A :class:`Runtime` finds (or starts) the coordinator actor that owns a group
and hands out a typed :class:`~coordinator.client.CoordinatorClient` for it.
Groups are sharded over ``coordinator_shards`` named actors by a stable hash
of the group id, so every gateway replica and every CLI process sends a
group's traffic to the same coordinator.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import cast

import ray
from ray.actor import ActorHandle

from actors.config import RuntimeConfig
from actors.vp_host import VPHost
from coordinator.client import CoordinatorClient
from coordinator.coordinator import CoordinatorWorker
from coordinator.results import DrainResult, RecoveryReport
from coordinator.shards import shard_of
from coordinator.vps import host_prefixes, start_pool
from engine.mcp import McpConfig
from protocol.settings import GroupSettingsPatch
from store.base import Group, Store, new_id
from store.conversation import ID_PREFIX, ConversationInfo

CoordinatorActor = ray.remote(CoordinatorWorker)


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

    def group(self, group_id: str) -> CoordinatorClient:
        """The typed client for ``group_id``'s coordinator."""
        return CoordinatorClient(self._coordinator(group_id), group_id)

    def start_vp_hosts(self) -> int:
        """Start the pooled VP host processes now, not on a first message; returns how many.

        Each coordinator shard then calls them once (not awaited here): a
        process's first call to an actor waits while Ray finds it.
        """
        started = start_pool(self.config)
        if started:
            for shard in range(self.config.coordinator_shards):
                self._shard(shard).reach_hosts.remote()
        return started

    async def recover(self) -> RecoveryReport:
        """Start every coordinator shard and wait until each took back its unfinished turns.

        A server calls this before it takes traffic: after a crash or a
        restart every turn that has no result runs again (never started) or
        ends with an error result (started).
        """
        shards = range(self.config.coordinator_shards)
        reports: list[RecoveryReport] = await asyncio.gather(
            *(self._shard(i).recover.remote() for i in shards)
        )
        return sum(reports, RecoveryReport())

    async def drain(self, timeout_s: float) -> DrainResult:
        """Let every shard's turns finish for up to ``timeout_s``; end the rest with a result.

        Only for a deployment this process owns (its local Ray instance): a
        gateway replica that stops must not end the turns of a shared cluster.
        """
        shards = range(self.config.coordinator_shards)
        results: list[DrainResult] = await asyncio.gather(
            *(self._shard(i).drain.remote(timeout_s) for i in shards)
        )
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
        client = self.group(group_id or new_id("grp"))
        return await client.create_group(name, roster, default_vp, members, settings)

    async def create_conversation(self, name: str, info: ConversationInfo) -> Group:
        """Create a one-to-one conversation under a new id (``conv_...``)."""
        return await self.group(new_id(ID_PREFIX)).create_conversation(name, info)

    async def question_group(self, request_id: str) -> str | None:
        """The group or conversation an open question was asked in, or None.

        The question's id names the VP that asked; any coordinator can ask that
        VP, so the shard is picked by the question's id.
        """
        handle = self._shard(shard_of(request_id, self.config.coordinator_shards))
        group_id: str | None = await handle.question_group.remote(request_id)
        return group_id

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
        shards = range(self.config.coordinator_shards)
        await asyncio.gather(*(self._shard(i).set_mcp.remote(config) for i in shards))
        heads = host_prefixes(self.config)
        told = 0
        for actor in ray.util.list_named_actors(all_namespaces=True):
            name = actor["name"] if isinstance(actor, dict) else actor
            ns = actor.get("namespace") if isinstance(actor, dict) else self.config.namespace
            if ns != self.config.namespace or not name.startswith(heads):
                continue
            try:
                handle = cast("ActorHandle[VPHost]", ray.get_actor(name, namespace=ns))
                await handle.set_mcp.remote(config)
                told += 1
            except (ValueError, ray.exceptions.RayActorError):
                pass  # gone since it was listed: a new one starts with the new servers
        return told

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
