"""How an engine reaches its providers: credential pools, the provider lane, thinking options.

One :class:`ProviderAccess` per engine, built from its
:class:`~engine.settings.EngineConfig` and the deployment's shared provider
state (credential cooldowns and lane slots, kept in the store by
:mod:`store.provider_state`; this process only when there is none).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from engine.credentials import Clock, CooldownBook, CredentialPool, LocalCooldowns
from engine.provider_lane import LocalSlots, ProviderLane, SlotBook
from engine.settings import EngineConfig


class ProviderState(CooldownBook, SlotBook, Protocol):
    """Cooldowns and slots in one place (``StoreConfig.open_provider_state``)."""

    async def aclose(self) -> None:
        """Close the connection to where they are kept."""


class _LocalState(LocalCooldowns, LocalSlots):
    def __init__(self) -> None:
        LocalCooldowns.__init__(self)
        LocalSlots.__init__(self)

    async def aclose(self) -> None:
        """Nothing to close: the state lives in this object."""


class ProviderAccess:
    """The pools, the lane and the per-model request options of one engine.

    ``overridden`` vendors (a test's or benchmark's provider objects) have no
    credentials to rotate, but still go through the lane.
    """

    def __init__(
        self,
        settings: EngineConfig,
        state: ProviderState | None = None,
        *,
        overridden: frozenset[str] = frozenset(),
        clock: Clock = time.time,
    ) -> None:
        self.settings = settings
        self.state: ProviderState = state if state is not None else _LocalState()
        self.clock = clock
        self.pools: dict[str, CredentialPool] = {}
        for vendor in ("openai", "anthropic"):
            creds = settings.credentials(vendor)
            if creds and vendor not in overridden:
                self.pools[vendor] = CredentialPool(vendor, creds, self.state, clock)
        caps = settings.provider_concurrency
        self.lane = (
            ProviderLane(caps, self.state, lease_s=settings.provider_lease_s, clock=clock)
            if caps
            else None
        )

    def __repr__(self) -> str:
        return f"ProviderAccess(pools={list(self.pools.values())!r}, lane={self.lane is not None})"

    def pool(self, model: str) -> CredentialPool | None:
        return self.pools.get(model.partition(":")[0])

    def options(self, model: str) -> dict[str, Any]:
        """Options the configuration adds to every request to ``model`` (thinking)."""
        return self.settings.thinking_options(model)
