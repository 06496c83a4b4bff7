"""Configuration every actor of one deployment shares.

It travels to each actor as a constructor argument (pickled by Ray), so an
actor started on another machine needs nothing but this object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.settings import EngineSettings
from store import StoreConfig
from store.base import Store
from store.memory import MemoryBackend


@dataclass(slots=True)
class RuntimeConfig:
    namespace: str = "yeaft"
    # Prefix for actor names, so several deployments (or tests) share a cluster.
    prefix: str = ""
    store_url: str | None = None
    data_dir: str = str(Path("~/.yeaft").expanduser())
    event_retention: int = 10_000
    redis_prefix: str = "yeaft"
    # EngineSettings fields to override (model, fallback_models, ...).
    engine: dict[str, Any] = field(default_factory=dict)
    personas_dir: str | None = None
    coordinator_shards: int = 2
    max_concurrent_turns: int = 64
    ask_timeout_s: float = 600.0
    # Providers by vendor name that replace the configured ones (tests,
    # benchmarks); they must be picklable.
    provider_overrides: dict[str, Any] = field(default_factory=dict)
    # Ray options for VP actors.
    vp_max_restarts: int = -1
    # Dream (memory maintenance): after this many turns of a VP in a group,
    # or when the group has been quiet this long after a turn (0 disables).
    dream_every_turns: int = 20
    dream_idle_s: float = 300.0
    # Memory recall before each turn.
    recall_limit: int = 8
    recall_budget_tokens: int = 1200

    def open_store(self) -> Store:
        return StoreConfig(
            self.store_url, Path(self.data_dir), self.event_retention, self.redis_prefix
        ).open_store()

    def open_memory(self) -> MemoryBackend:
        return StoreConfig(
            self.store_url, Path(self.data_dir), self.event_retention, self.redis_prefix
        ).open_memory()

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(**self.engine)

    def actor_name(self, kind: str, key: str | int) -> str:
        return f"{self.prefix}{kind}:{key}"
