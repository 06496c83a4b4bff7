"""The gateway's shutdown: one part that does not close never holds it up."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway import server


async def test_a_part_that_does_not_close_is_named_with_where_it_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(server, "CLOSE_TIMEOUT_S", 0.05)
    never = asyncio.Event()
    stuck = asyncio.create_task(never.wait(), name="stuck-tail")
    cancelled = asyncio.Event()

    async def close_forever() -> None:
        try:
            await stuck
        finally:
            cancelled.set()

    with caplog.at_level(logging.WARNING, logger="gateway.server"):
        await server._closing("the stuck part", close_forever())
    await asyncio.wait_for(cancelled.wait(), 5)
    [record] = [r for r in caplog.records if "did not close" in r.getMessage()]
    message = record.getMessage()
    assert "the stuck part did not close within 0 s" in message
    # Where the part waits, and where the task it waits on does.
    assert "test_gateway_close.py" in message and "close_forever" in message
    assert "stuck-tail:" in message and " wait" in message.split("stuck-tail:")[1]
    stuck.cancel()


async def test_a_part_that_closes_in_time_is_awaited_and_its_error_raised() -> None:
    closed = []

    async def close() -> None:
        closed.append(True)

    await server._closing("a part", close())
    assert closed == [True]

    async def fail() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await server._closing("a failing part", fail())
