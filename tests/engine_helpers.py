"""Helpers shared by the engine tests: a scripted engine and an event recorder."""

from __future__ import annotations

from typing import Any

from engine.engine import Engine
from engine.events import EngineEvent
from engine.providers.registry import ProviderRegistry
from engine.providers.scripted import ScriptedModel, Step
from engine.settings import EngineConfig


class Recorder:
    """Collects engine events; ``kinds`` gives their type names in order."""

    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    async def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)

    @property
    def kinds(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]


class FakeSleep:
    """Records requested delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def scripted_engine(
    *steps: Step,
    providers: dict[str, ScriptedModel] | None = None,
    model: str = "offline:test",
    fallbacks: list[str] | None = None,
    **settings: Any,
) -> tuple[Engine, ScriptedModel, FakeSleep]:
    """An engine whose model plays ``steps`` in place of the offline one, with instant retries."""
    provider = ScriptedModel(list(steps))
    overrides: dict[str, Any] = {"offline": provider, **(providers or {})}
    sleep = FakeSleep()
    config = EngineConfig(**{"offline_tps": 0, **settings})
    engine = Engine(
        ProviderRegistry(config, overrides),
        model=model,
        fallbacks=fallbacks or [],
        settings=config,
        sleep=sleep,
        rand=lambda: 0.5,
    )
    return engine, provider, sleep
