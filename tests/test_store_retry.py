"""``until_stored``: unreachable-store errors are retried with back-off, others are not."""

from __future__ import annotations

import pytest

from store.base import StoreError, StoreUnavailable
from store.retry import until_stored


async def test_retries_until_the_store_answers_with_growing_delays() -> None:
    delays: list[float] = []
    attempts = 0

    async def sleep(s: float) -> None:
        delays.append(s)

    async def write() -> int:
        nonlocal attempts
        attempts += 1
        if attempts < 7:
            raise StoreUnavailable("connection refused")
        return 42

    assert await until_stored(write, "a result", first_delay=0.5, max_delay=4, sleep=sleep) == 42
    assert delays == [0.5, 1, 2, 4, 4, 4]


async def test_other_store_errors_are_raised_at_once() -> None:
    attempts = 0

    async def write() -> None:
        nonlocal attempts
        attempts += 1
        raise StoreError("not JSON")

    with pytest.raises(StoreError, match="not JSON"):
        await until_stored(write, "a notice")
    assert attempts == 1
