"""A provider that fails on its side, hangs or stalls: reported as what it is, never a hang.

The SDK paths run the real ``openai`` and ``anthropic`` clients against the
local fake server; every deadline here is a fraction of a second, and
retries sleep on a recorder instead of the clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import SecretStr

from engine.engine import Engine, TurnResult
from engine.events import StopEvent
from engine.messages import Conversation, Message
from engine.settings import EngineConfig
from tests.engine_helpers import FakeSleep, Recorder
from tests.fixtures.llm_server import FakeLLM

VENDORS = ["openai", "anthropic"]

MakeEngine = Callable[..., Engine]


@pytest.fixture
async def sdk_engine(fake_llm: FakeLLM) -> AsyncIterator[MakeEngine]:
    """Engines on the real SDKs, both pointed at ``fake_llm``; closed after the test."""
    made: list[Engine] = []

    def make(model: str, fallbacks: list[str] | None = None, **settings: Any) -> Engine:
        config = EngineConfig(
            openai_api_key=SecretStr("sk-test"),
            openai_base_url=fake_llm.openai_base_url,
            anthropic_api_key=SecretStr("sk-ant-test"),
            anthropic_base_url=fake_llm.anthropic_base_url,
            **settings,
        )
        engine = Engine(
            model=model,
            fallbacks=fallbacks or [],
            settings=config,
            sleep=FakeSleep(),
            rand=lambda: 0.5,
        )
        made.append(engine)
        return engine

    yield make
    for engine in made:
        await engine.providers.aclose()


async def turn(engine: Engine, recorder: Recorder | None = None) -> TurnResult:
    return await engine.run_turn(
        Conversation(id="c"), Message.user("hi"), system="Be brief.", emit=recorder
    )


# --- server errors -----------------------------------------------------------


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_500_is_reported_as_a_server_error_not_a_timeout(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.error(500, "The server had an error while processing your request")
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=0), recorder)

    assert result.error_kind == "server_error"
    assert result.error is not None
    assert f"{vendor}:primary: server_error 500 (The server had an error" in result.error
    assert "timeout" not in result.error
    assert len(recorder.of("stop")) == 1 and isinstance(recorder.events[-1], StopEvent)


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_500_is_retried_like_other_transient_failures(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.error(500).text("second try")

    result = await turn(sdk_engine(f"{vendor}:primary", max_retries=1))

    assert result.text == "second try"
    assert [a["reason"] for a in result.attempts] == ["server_error"]
