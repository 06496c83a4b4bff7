"""From a VP's engine events to envelopes in the group's event log.

Each engine event goes through the web bridge (coalescing text deltas) and
becomes a ``yeaft_output`` envelope appended to the group's event log, which
is what every gateway tails. The writer also publishes ``agent_status``
transitions and holds back text that could still turn out to be the skip
token, so a VP that chooses silence shows nothing at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.bridge import WebBridge
from engine.events import EngineEvent, StopEvent, TextDelta, ToolCallEvent
from personas.prompts import SKIP_TOKEN
from protocol import AgentStatus, YeaftOutput
from store.base import Store

BeforeStop = Callable[[StopEvent, bool], Awaitable[None]]


class EnvelopeWriter:
    """Writes one turn's envelopes.

    ``before_stop`` runs before the ``result`` envelope goes out (with the
    stop event and whether the VP chose silence), so whatever it stores is
    in place by the time any client learns the turn has ended.
    """

    def __init__(
        self,
        store: Store,
        group_id: str,
        vp_id: str,
        turn_id: str,
        before_stop: BeforeStop | None = None,
    ) -> None:
        self.before_stop = before_stop
        self.store = store
        self.group_id = group_id
        self.vp_id = vp_id
        self.turn_id = turn_id
        self.bridge = WebBridge(self._send_data, session_id=group_id)
        self.state = "idle"
        self.text = ""
        self.skipped = False
        self._held: list[TextDelta] = []
        self._released = False

    def envelope(self, data: dict[str, Any]) -> YeaftOutput:
        return YeaftOutput.model_validate(
            {
                "type": "yeaft_output",
                "conversationId": self.group_id,
                "groupId": self.group_id,
                "vpId": self.vp_id,
                "turnId": self.turn_id,
                "data": data,
            }
        )

    async def _send_data(self, data: dict[str, Any]) -> None:
        await self.store.append_event(self.group_id, self.envelope(data))

    async def status(self, state: str) -> None:
        if state == self.state:
            return
        self.state = state
        await self.store.append_event(
            self.group_id,
            AgentStatus.model_validate(
                {
                    "type": "agent_status",
                    "groupId": self.group_id,
                    "vpId": self.vp_id,
                    "turnId": self.turn_id,
                    "state": state,
                }
            ),
        )

    async def feed(self, event: EngineEvent) -> None:
        if isinstance(event, TextDelta):
            self.text += event.text
            if not self._released:
                self._held.append(event)
                if SKIP_TOKEN.startswith(self.text.strip()):
                    return  # could still be the skip token: say nothing yet
                await self._release()
                return
            await self.status("streaming")
        elif isinstance(event, StopEvent) and self._held and self.text.strip() == SKIP_TOKEN:
            self.skipped = True
            self._held.clear()
        elif self._held:
            # A reply that was only a prefix of the token, or a tool call
            # after it: what was held goes out first, in order.
            await self._release()
        if isinstance(event, ToolCallEvent):
            await self.status("tool")
        if isinstance(event, StopEvent) and self.before_stop is not None:
            await self.before_stop(event, self.skipped)
        await self.bridge.feed(event)

    async def _release(self) -> None:
        self._released = True
        await self.status("streaming")
        for held in self._held:
            await self.bridge.feed(held)
        self._held.clear()

    async def close(self, reason: str) -> None:
        await self.bridge.close()
        await self.status("error" if reason == "error" else "idle")

    async def system(self, message: str, subtype: str = "notice", **detail: Any) -> None:
        await self._send_data(
            {"type": "system", "subtype": subtype, "message": message, "detail": detail}
        )
