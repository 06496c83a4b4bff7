"""How the coordinator reaches a VP: the host actor it runs in, and typed calls on it.

Which host runs a VP (``RuntimeConfig.vp_hosts``): with 0 each VP has a
host named after it; with N > 0 the VPs share N pooled hosts, and the store
decides each VP's host once (``store.placement``), so every coordinator
shard finds the same one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, cast

import ray
from ray.actor import ActorHandle

from actors.config import RuntimeConfig
from actors.vp_commands import VPCommand
from actors.vp_host import VPHost
from store.placement import PlacementStore

VPHostActor = ray.remote(VPHost)
R = TypeVar("R")
# A VP's own host is named after the VP; pooled hosts by their number.
OWN_HOST = "vp"
POOLED_HOST = "vps"


def own_host(config: RuntimeConfig, vp_id: str) -> str:
    """The actor name of ``vp_id``'s own host (with no pooled hosts)."""
    return config.actor_name(OWN_HOST, vp_id)


async def host_names(config: RuntimeConfig, store: PlacementStore, vp_ids: list[str]) -> list[str]:
    """The actor names of the hosts that run ``vp_ids``, in their order."""
    if config.vp_hosts <= 0:
        return [own_host(config, vp_id) for vp_id in vp_ids]
    pool = pooled_hosts(config)
    return [pool[host] for host in await store.place_vps(vp_ids, len(pool))]


def host_prefixes(config: RuntimeConfig) -> tuple[str, str]:
    """The name prefixes of a deployment's VP hosts, of either kind."""
    return config.actor_name(OWN_HOST, ""), config.actor_name(POOLED_HOST, "")


def pooled_hosts(config: RuntimeConfig) -> list[str]:
    """The actor names of the pooled hosts (none with a host per VP)."""
    return [config.actor_name(POOLED_HOST, i) for i in range(max(0, config.vp_hosts))]


def start_pool(config: RuntimeConfig) -> int:
    """Start every pooled host now (none with a host per VP); returns how many.

    A local instance calls this at start, so no first message waits for a
    process to start and import the engine.
    """
    names = pooled_hosts(config)
    for name in names:
        start_named(config, name)
    return len(names)


def start_named(config: RuntimeConfig, name: str) -> ActorHandle[VPHost]:
    """The VP host ``name``, found or started (at once: its process starts behind)."""
    started = VPHostActor.options(
        name=name,
        namespace=config.namespace,
        get_if_exists=True,
        lifetime="detached",
        max_restarts=config.vp_max_restarts,
        max_task_retries=0,
        num_cpus=0,
        resources=dict(config.vp_resources),
        scheduling_strategy=config.actor_placement.strategy,
        # Every VP of a pooled host may have its admitted turns waiting in
        # their lanes (each holds a call), and an abort or an answer that
        # releases them must still get in.
        max_concurrency=10_000,
    ).remote(config)
    return cast("ActorHandle[VPHost]", started)


def find_host(config: RuntimeConfig, name: str) -> ActorHandle[VPHost] | None:
    """The VP host ``name`` if it is running; never starts one."""
    try:
        found = ray.get_actor(name, namespace=config.namespace)
    except ValueError:
        return None
    return cast("ActorHandle[VPHost]", found)


@dataclass(frozen=True, slots=True)
class VPClient:
    """One VP as the coordinator calls it: its host's handle and its id."""

    host: ActorHandle[VPHost]
    vp_id: str

    def send(self, command: VPCommand[R]) -> ray.ObjectRef[R]:
        """Send ``command`` to the VP; the reference (awaitable) resolves to its answer."""
        ref: ray.ObjectRef[R] = self.host.call.remote(self.vp_id, command)
        return ref
