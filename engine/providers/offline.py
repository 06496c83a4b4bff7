"""A built-in offline model: the system runs with no key and no network.

It writes deterministic, persona-aware replies (:mod:`engine.providers.offline_voice`)
at the latency and token rate its model string asks for
(:class:`~engine.providers.replies.Pace`):
``offline:default?ttft=0.2&tps=100&tokens=60``. A string without ``tps``
streams at the provider's ``default_tps`` (``YEAFT_OFFLINE_TPS``: 40 under
``yeaft serve``, so parallel replies are visibly parallel; 0, no pauses, for
engines built in code). Team mode's calls are answered by its stand-in,
:mod:`engine.providers.offline_team`.

This is a demo voice, not a test double: tests script their model with
:class:`engine.providers.scripted.ScriptedModel`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from engine.call_context import CallMode
from engine.providers.base import ModelRequest, StreamItem
from engine.providers.offline_team import team_reply
from engine.providers.offline_voice import dream_summary, persona_reply, wants_chinese
from engine.providers.replies import Pace, Reply, fixed_length, stream_reply

__all__ = ["OfflineProvider", "demo_reply"]

_REMEMBER = re.compile(r"\bremember(?:\s+that)?\s+(.+)", re.IGNORECASE | re.DOTALL)


def demo_reply(request: ModelRequest) -> Reply:
    """What the offline model does: enough to demonstrate the system.

    It answers in the persona's voice, saves a fact when asked to "remember
    that ...", mentions what it recalled, and in dream mode writes one
    summary memory. A team mode call gets the JSON of
    :mod:`engine.providers.offline_team`. Anything cleverer needs a real model.
    """
    answer = team_reply(request)
    if answer is not None:
        return Reply(answer)
    dreaming = request.context.mode is CallMode.DREAM
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        if last.tool_name == "remember":
            if dreaming:
                return Reply("[[SKIP]]")
            zh = wants_chinese(request, str(last.content))
            return Reply("记下了，我会记住。" if zh else "Noted. I will keep that in mind.")
        return Reply(f"Done ({last.tool_name or 'tool'}).")
    if last is not None and "remember" in {t.name for t in request.tools}:
        if dreaming:
            summary = {"text": dream_summary(last.content), "scope": "private", "tags": ["summary"]}
            return Reply(tool_calls=[("remember", summary)])
        match = _REMEMBER.search(last.content)
        if match:
            fact = match.group(1).strip().rstrip(".!")
            return Reply(tool_calls=[("remember", {"text": fact, "scope": "user"})])
    return Reply(persona_reply(request))


class OfflineProvider:
    """The offline model. Deterministic and free."""

    def __init__(self, *, name: str = "offline", default_tps: float = 0.0) -> None:
        self.name = name
        # The pace of a model string without ``tps`` (EngineConfig.offline_tps).
        self.default_tps = default_tps
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        pace = Pace.parse(request.model, self.default_tps).for_request(request)
        self.calls += 1
        reply = demo_reply(request)
        if pace.tokens is not None and not reply.tool_calls:
            reply.text = fixed_length(reply.text, pace.tokens)
        async for item in stream_reply(reply, request, pace, self.calls):
            yield item

    async def aclose(self) -> None:
        return None
