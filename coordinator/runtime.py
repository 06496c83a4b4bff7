"""The driver-side entry to the actor system.

A ``Runtime`` finds (or starts) the coordinator actor that owns a group and
forwards calls to it. Groups are sharded over ``coordinator_shards`` named
actors by a stable hash of the group id, so every gateway replica and every
CLI process sends a group's traffic to the same coordinator.
"""

from __future__ import annotations

import zlib
from typing import Any

import ray

from actors.config import RuntimeConfig
from coordinator.coordinator import CoordinatorWorker
from protocol.settings import GroupSettingsPatch
from store.base import Group, Store, new_id

CoordinatorActor = ray.remote(CoordinatorWorker)


def shard_of(group_id: str, shards: int) -> int:
    return zlib.crc32(group_id.encode()) % max(1, shards)


class Runtime:
    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self._coordinators: dict[int, Any] = {}
        self._store: Store | None = None

    def coordinator(self, group_id: str) -> Any:
        shard = shard_of(group_id, self.config.coordinator_shards)
        handle = self._coordinators.get(shard)
        if handle is None:
            handle = CoordinatorActor.options(
                name=self.config.actor_name("coordinator", shard),
                namespace=self.config.namespace,
                get_if_exists=True,
                lifetime="detached",
                max_restarts=-1,
                num_cpus=0,
                max_concurrency=10_000,
            ).remote(shard, self.config)
            self._coordinators[shard] = handle
        return handle

    async def store(self) -> Store:
        """A store for reads (history, events) that need no coordinator."""
        if self._store is None:
            self._store = self.config.open_store()
        return self._store

    async def call(self, group_id: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` on the coordinator that owns ``group_id``."""
        return await getattr(self.coordinator(group_id), method).remote(group_id, *args, **kwargs)

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
        group_id = group_id or new_id("grp")
        group: Group = await self.call(
            group_id, "create_group", name, roster, default_vp, members, settings
        )
        return group

    async def ingest(
        self,
        group_id: str,
        sender: str,
        text: str,
        mentions: list[str] | None = None,
        client_message_id: str | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            group_id, "ingest", sender, text, mentions, client_message_id
        )
        return result

    async def wait_idle(self, group_id: str, timeout_s: float = 60.0) -> bool:
        done: bool = await self.call(group_id, "wait_idle", timeout_s)
        return done

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
