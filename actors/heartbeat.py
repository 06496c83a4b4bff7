"""A turn's heartbeat: a ``busy`` agent_status with its phase, every few seconds.

A VP that answers writes ``agent_status`` when its state changes; a long
model call or tool call changes nothing for minutes, and a client could not
tell it from a VP that hung. So from its start to its result a turn also
writes ``{state: "busy", phase: <thinking|streaming|tool|queued>,
heartbeatS}`` every ``every_s`` seconds. The result's last status (``idle``,
or ``error``) ends it: the heartbeat stops, and its write in flight lands,
before the result is written, so no ``busy`` ever follows a turn's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from protocol import AgentStatus
from store.base import StoreError

log = logging.getLogger(__name__)


class Heartbeat:
    """Writes ``frame()`` with ``write`` every ``every_s`` seconds, from start to stop.

    ``frame`` returns None once the turn is over (nothing more is written).
    """

    def __init__(
        self,
        every_s: float,
        frame: Callable[[], AgentStatus | None],
        write: Callable[[AgentStatus], Awaitable[object]],
    ) -> None:
        self.every_s = every_s
        self._frame = frame
        self._write = write
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Beats written (tests read it).
        self.beats = 0

    def start(self) -> None:
        if self.every_s > 0 and self._task is None and not self._stopping.is_set():
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """No more beats; returns once a beat being written is in."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            await task

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.every_s)
            if self._stopping.is_set():
                return
            frame = self._frame()
            if frame is None:
                return
            try:
                await self._write(frame)
                self.beats += 1
            except StoreError as exc:
                # Only this beat is lost; the next one may get through.
                log.warning("heartbeat of %s not written: %s", frame.turn_id, exc)
            except Exception:
                # An indicator never breaks its turn: the beats stop, the turn goes on.
                log.exception("heartbeat of %s stopped", frame.turn_id)
                return
