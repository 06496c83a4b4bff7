"""Order statistics of the benchmarks' samples (p50, p99, ...)."""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (0 <= q <= 1): the sorted value at the nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
