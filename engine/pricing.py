"""Per-turn cost, from the prices in the model registry (USD per million tokens).

There is one table of prices: the ``input``/``output``/``cache_*`` fields of
the registry's entries (:mod:`engine.models`), which a user models file
overrides. :class:`PriceTable` only does the arithmetic.
"""

from __future__ import annotations

import fnmatch

from engine.messages import Usage
from engine.models import Entries, ModelRegistry, Price, UnknownModel

__all__ = ["Price", "PriceTable"]


class PriceTable:
    """Costs from the registry; ``prices`` (pattern → price), when given, replaces it."""

    def __init__(
        self, prices: dict[str, Price] | None = None, registry: ModelRegistry | None = None
    ) -> None:
        self._prices = prices
        self._registry = registry or ModelRegistry()

    @classmethod
    def overlay(cls, entries: Entries) -> PriceTable:
        """The built-in prices under the user's model entries."""
        return cls(registry=ModelRegistry(entries))

    def price(self, model: str) -> Price | None:
        if self._prices is not None:
            for pattern, price in self._prices.items():
                if fnmatch.fnmatchcase(model, pattern):
                    return price
            return None
        try:
            return self._registry.price(model)
        except UnknownModel:
            return None

    def cost(self, model: str, usage: Usage) -> float:
        """Cost of ``usage`` on ``model`` (``provider:name``); 0 for unknown models."""
        p = self.price(model)
        if p is None:
            return 0.0
        total = (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_read_tokens * p.cache_read
            + usage.cache_write_tokens * p.cache_write
        )
        return round(total / 1_000_000, 8)
