"""Helpers shared by the tests of ``engine.bridge`` (``tests/test_bridge*.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.bridge import Payload, WebBridge
from engine.events import StopEvent, StopReason
from engine.messages import Usage
from protocol import dump, parse_data

LONG = 3600.0  # an interval no test waits out: only size, clock or close flush
WAIT_LIMIT = 2.0


class Recorder:
    """An async ``send`` that records payloads and lets a test await them."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        self._arrived = asyncio.Condition()

    async def __call__(self, payload: Payload) -> None:
        # Every payload the bridge produces must survive the wire unchanged.
        data = dump(payload)
        assert dump(parse_data(data)) == data
        async with self._arrived:
            self.payloads.append(data)
            self._arrived.notify_all()

    async def wait_for(self, count: int) -> None:
        # The bound only turns a broken timer into a failure instead of a hang.
        async with asyncio.timeout(WAIT_LIMIT), self._arrived:
            await self._arrived.wait_for(lambda: len(self.payloads) >= count)

    def blocks(self) -> list[tuple[str, Any]]:
        """Each payload reduced to (block type, its main value)."""
        out: list[tuple[str, Any]] = []
        for p in self.payloads:
            if p["type"] in ("assistant", "user"):
                block = p["message"]["content"][0]
                value = {
                    "text": block.get("text"),
                    "thinking": block.get("thinking"),
                    "tool_use": block.get("id"),
                    "tool_result": block.get("tool_use_id"),
                }[block["type"]]
                out.append((block["type"], value))
            else:
                out.append((p["type"], p.get("subtype")))
        return out


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def stop(reason: StopReason = StopReason.END_TURN, **kw: Any) -> StopEvent:
    fields: dict[str, Any] = {"usage": Usage(), "cost_usd": 0.0, "duration_ms": 5}
    fields.update(kw)
    return StopEvent(reason=reason, **fields)


def eager(recorder: Recorder, **kw: Any) -> WebBridge:
    """A bridge that never holds a delta: every flush is due at once."""
    return WebBridge(recorder, "conv-1", flush_interval=0, **kw)
