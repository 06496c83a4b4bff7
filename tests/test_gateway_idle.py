"""An idle gateway does not poll: its timers wake it only while something happens.

The loop-lag probe runs while client frames come in (a keepalive ping is
not one that counts) and waits for the next frame once none has come for
a while; the server's main loop wakes on a stop request instead of
looking ten times a second. Clocks and sleeps are injected, and every
wait is for an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI

from gateway import server as server_module
from gateway.limits import LagMeter, LagProbe
from gateway.server import QuietServer
from tests.fixtures.gateway import StartGateway, WsClient


class FakeTime:
    """A clock and a sleep that advances it (by ``late`` more than asked, once)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps = 0
        self.late = 0.0
        self.slept = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds + self.late
        self.late = 0.0
        self.sleeps += 1
        self.slept.set()
        await asyncio.sleep(0)

    async def until(self, sleeps: int) -> None:
        while self.sleeps < sleeps:
            self.slept.clear()
            await self.slept.wait()


async def settled(probe: LagProbe) -> None:
    """Let the probe's task run (a turn of the loop at a time) until it waits for a frame."""
    for _ in range(1000):
        if probe.waiting:
            return
        await asyncio.sleep(0)
    raise AssertionError("the probe never waited for a frame")


async def test_the_lag_probe_runs_while_frames_come_and_waits_for_one_after() -> None:
    fake = FakeTime()
    meter = LagMeter(threshold=0.1, clock=fake.clock)
    probe = LagProbe(meter, interval=0.05, quiet=1.0, clock=fake.clock, sleep=fake.sleep)
    task = asyncio.create_task(probe.run())
    try:
        # No frame yet: the probe waits, and sleeps not once.
        await settled(probe)
        for _ in range(10):
            await asyncio.sleep(0)
        assert fake.sleeps == 0

        probe.frame()
        await fake.until(3)
        assert not probe.waiting
        assert not meter.lagged_within(5)
        # The loop woke the probe 0.3 s late: that is lag.
        fake.late = 0.3
        await fake.until(fake.sleeps + 2)
        assert meter.lagged_within(1)

        # A second with no frame: it waits again.
        await settled(probe)
        assert 101.0 < fake.now < 101.1
        asleep_at = fake.sleeps
        for _ in range(10):
            await asyncio.sleep(0)
        assert fake.sleeps == asleep_at

        # The next frame starts it again.
        probe.frame()
        await fake.until(asleep_at + 1)
        assert not probe.waiting
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class Ticks(QuietServer):
    """Records each tick's counter and stops on the ``stop_after``-th tick.

    It installs no signal handlers (pytest owns the signals), so a signal
    handed to ``handle_exit`` is not raised again when it stops.
    """

    def __init__(self, config: uvicorn.Config, stop_after: int | None = None) -> None:
        super().__init__(config)
        self.ticks: list[int] = []
        self.ticked = asyncio.Event()
        self.stop_after = stop_after

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def on_tick(self, counter: int) -> bool:
        self.ticks.append(counter)
        self.ticked.set()
        if self.stop_after is not None and len(self.ticks) >= self.stop_after:
            self.should_exit = True
        return await super().on_tick(counter)


def listening() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def config() -> uvicorn.Config:
    return uvicorn.Config(FastAPI(), lifespan="off", log_level="warning")


@pytest.mark.parametrize("how", ["should_exit", "signal"])
async def test_a_stop_request_wakes_the_quiet_server(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Were the stop request not to wake the main loop, it would sleep an hour.
    monkeypatch.setattr(server_module, "DATE_REFRESH_S", 3600.0)
    server = Ticks(config())
    with listening() as sock:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.ticks:
            server.ticked.clear()
            await server.ticked.wait()
        assert not task.done()
        if how == "signal":
            server.handle_exit(signal.SIGTERM, None)
        else:
            server.should_exit = True
        await asyncio.wait_for(task, 30)
    # Woken once, it ticks and stops.
    assert server.ticks == [0, 10]


async def test_every_tick_of_the_quiet_server_refreshes_the_date(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module, "DATE_REFRESH_S", 0.0)
    server = Ticks(config(), stop_after=4)
    with listening() as sock:
        await asyncio.wait_for(server.serve(sockets=[sock]), 30)
    # uvicorn refreshes the Date header on the ticks its counter makes a multiple of 10.
    assert server.ticks == [0, 10, 20, 30]
    assert any(name == b"date" for name, _ in server.server_state.default_headers)


async def test_a_keepalive_ping_leaves_the_lag_probe_asleep(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    probe = gw.ctx.lag
    assert probe.waiting  # no frame yet
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert probe.waiting
    await ws.request({"type": "list_groups"})
    assert not probe.waiting
    await ws.close()
