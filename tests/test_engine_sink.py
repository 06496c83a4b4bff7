"""A turn whose event sink fails stops at once, and says the sink failed, not the model.

The sink is the caller's (a VP actor writes the turn's stream to the store
through it); when it raises, the model is not to blame: no retry, no
fallback, and the caller gets the sink's own error (``SinkFailed.__cause__``)
to end the turn with (``actors.runner``: "the store was unavailable").
"""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import SinkFailed
from engine.events import EngineEvent, TextDelta
from engine.messages import Conversation, Message
from engine.providers.scripted import Reply, ScriptedModel
from tests.engine_helpers import scripted_engine


class StoreGone(Exception):
    pass


async def test_a_failing_sink_stops_the_turn_without_retry_or_fallback() -> None:
    backup = ScriptedModel([Reply("from the backup")])
    engine, provider, sleep = scripted_engine(
        Reply("one two three"),
        providers={"spare": backup},
        fallbacks=["spare:backup"],
    )
    seen: list[EngineEvent] = []

    async def sink(event: EngineEvent) -> None:
        seen.append(event)
        if isinstance(event, TextDelta):
            raise StoreGone("redis store unavailable")

    with pytest.raises(SinkFailed) as failed:
        await asyncio.wait_for(
            engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=sink), 10
        )
    assert isinstance(failed.value.__cause__, StoreGone)
    assert "redis store unavailable" in str(failed.value)
    # One model call, nothing retried or failed over, and no stop event after the failure.
    assert provider.calls == 1 and backup.calls == 0 and sleep.delays == []
    assert isinstance(seen[-1], TextDelta)
