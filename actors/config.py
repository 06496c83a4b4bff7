"""Configuration every actor of one deployment shares.

It travels to each actor as a constructor argument (pickled by Ray), so an
actor started on another machine needs nothing but this object: the store's
location, the personas directory, the limits and the whole engine
configuration, provider credentials included. No actor reads its own process
environment for any of it; the driver (the process that starts the
deployment) builds the config once, from its settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from engine.a2a import A2aConfig
from engine.mcp import McpConfig
from engine.providers.base import Provider
from engine.settings import EngineConfig
from store import StoreConfig
from store.base import Store
from store.memory import MemoryBackend
from telemetry.config import TracingConfig


class Placement(StrEnum):
    """How Ray places the coordinator and VP actors over the nodes of a cluster."""

    # Ray's SPREAD strategy: each new actor goes to another node with room,
    # so the actors (and their memory and event loops) spread out.
    SPREAD = "spread"
    # Ray's default strategy: near the process that starts them, while it has room.
    DEFAULT = "default"

    @property
    def strategy(self) -> str:
        """The ``scheduling_strategy`` Ray option."""
        return self.value.upper()


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Frozen: a changed copy is ``dataclasses.replace(config, field=value, ...)``.

    Its ``repr`` shows the engine config, whose keys are masked, so a config
    may be logged.
    """

    namespace: str = "yeaft"
    # Prefix for actor names, so several deployments (or tests) share a cluster.
    prefix: str = ""
    # Where the group store and the memory are (the same for every process).
    store: StoreConfig = field(default_factory=StoreConfig)
    # Everything the VP actors' engines are configured with.
    engine: EngineConfig = field(default_factory=EngineConfig)
    # The MCP servers VPs may use (read from mcp.json by the driver; env and
    # header values are masked secrets).
    mcp: McpConfig = field(default_factory=McpConfig)
    # The remote A2A agents VPs may call (read from a2a.json by the driver;
    # tokens and header values are masked secrets).
    a2a: A2aConfig = field(default_factory=A2aConfig)
    # Where spans go (read from the gateway's OTEL_* variables; off by default).
    tracing: TracingConfig = field(default_factory=TracingConfig)
    personas_dir: str | None = None
    coordinator_shards: int = 2
    max_concurrent_turns: int = 64
    # How long a VP holds a turn that reached it before a turn the coordinator
    # sent earlier to the same (group, VP) lane (actors.lanes); then it runs.
    lane_gap_s: float = 2.0
    # A VP answering writes a busy agent_status with its turn's phase at
    # least this often (0: never), so clients tell a slow turn from a hung one.
    heartbeat_s: float = 10.0
    # Admission (coordinator.admission): turns dispatched and not finished,
    # at most this many per group and per VP actor; a person's message that
    # would pass either is refused with BUSY before it is stored. 64 per group
    # is four full fan-outs (cap 16); 256 per VP is four rounds of its
    # max_concurrent_turns. Each coordinator shard holds an equal share of
    # the VP bound.
    max_group_pending_turns: int = 64
    max_vp_pending_turns: int = 256
    ask_timeout_s: float = 600.0
    # Providers by vendor name that replace the configured ones (tests,
    # benchmarks); they must be picklable.
    provider_overrides: Mapping[str, Provider] = field(default_factory=dict)
    # Ray options for VP actors.
    vp_max_restarts: int = -1
    # VP host processes (actors.vp_host): 0 gives every VP a process of its
    # own; N > 0 runs all VPs in N processes, each VP in the one the store
    # placed it on (store.placement).
    vp_hosts: int = 0
    # Custom Ray resources each VP / coordinator actor asks for (empty: none),
    # so a deployment can keep them on the nodes that offer those resources
    # (``ray start --resources='{"yeaft_vp": 1000}'``). A restarted actor asks
    # again, and lands on another node that offers them.
    vp_resources: Mapping[str, float] = field(default_factory=dict)
    coordinator_resources: Mapping[str, float] = field(default_factory=dict)
    # How Ray spreads those actors over the nodes that may host them.
    actor_placement: Placement = Placement.SPREAD
    # Dream (memory maintenance): after this many turns of a VP in a group,
    # or when the group has been quiet this long after a turn (0 disables).
    dream_every_turns: int = 20
    dream_idle_s: float = 300.0
    # Memory recall before each turn: at most this many items, in at least
    # this many tokens (more for a model with a larger window, see
    # actors.memory_tier.recall_budget).
    recall_limit: int = 8
    recall_budget_tokens: int = 1200
    # Turn hooks (actors.hooks): factories as "package.module:factory", run
    # after the built-in ones; and whether installed packages' hooks (entry
    # point group yeaft.turn_hooks) are loaded too.
    turn_hooks: tuple[str, ...] = ()
    entry_point_hooks: bool = False

    def open_store(self) -> Store:
        return self.store.open_store()

    def open_memory(self) -> MemoryBackend:
        return self.store.open_memory()

    def actor_name(self, kind: str, key: str | int) -> str:
        return f"{self.prefix}{kind}:{key}"
