"""Per-turn cost from a configurable price table (USD per million tokens)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.messages import Usage


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


# Patterns are matched against "provider:model" with fnmatch; the first match
# wins, so specific entries come before broad ones. Figures are list prices at
# the time of writing and are meant to be overridden by a prices file.
DEFAULT_PRICES: dict[str, Price] = {
    "offline:*": Price(0.0, 0.0),
    "openai:gpt-4o-mini*": Price(0.15, 0.60, 0.075),
    "openai:gpt-4o*": Price(2.50, 10.00, 1.25),
    "openai:gpt-4.1-mini*": Price(0.40, 1.60, 0.10),
    "openai:gpt-4.1*": Price(2.00, 8.00, 0.50),
    "anthropic:claude-*haiku*": Price(1.00, 5.00, 0.10, 1.25),
    "anthropic:claude-*sonnet*": Price(3.00, 15.00, 0.30, 3.75),
    "anthropic:claude-*opus*": Price(15.00, 75.00, 1.50, 18.75),
}


def read_prices(path: str | Path) -> dict[str, Price]:
    """The entries of a JSON price file, in the file's order.

    File shape: ``{"openai:my-model*": {"input": 1.0, "output": 2.0}}``.
    """
    raw = json.loads(Path(path).expanduser().read_text())
    return {k: Price(**v) for k, v in raw.items()}


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES if prices is None else prices)

    @classmethod
    def overlay(cls, entries: Mapping[str, Price]) -> PriceTable:
        """The defaults, overlaid (and preceded) by ``entries``; no entries: the defaults."""
        merged = dict(entries)
        merged.update({k: v for k, v in DEFAULT_PRICES.items() if k not in merged})
        return cls(merged)

    def price(self, model: str) -> Price | None:
        for pattern, price in self._prices.items():
            if fnmatch.fnmatchcase(model, pattern):
                return price
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
