"""A rate-limited key pauses for as long as the provider asks, and a turn waits that out.

The real ``openai`` and ``anthropic`` SDKs against the fake provider server,
which answers 429 with and without ``Retry-After`` and the vendors'
rate-limit reset headers. Time is an injected clock that the injected
sleep moves on, so a two-minute cooldown takes no time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from engine.credentials import Credential
from engine.engine import Engine
from engine.messages import Conversation, Message
from engine.providers.registry import ProviderRegistry
from engine.providers.wire import rate_limit_reset_from
from engine.settings import EngineConfig
from tests.engine_helpers import Recorder


class Clock:
    """Wall time the test moves: the engine's clock, and its sleep moves it on."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


MakeEngine = Callable[[EngineConfig, Clock], Engine]


@pytest.fixture
async def engines() -> AsyncIterator[MakeEngine]:
    """Engines on the test's clock, their SDK clients closed however the test ends."""
    made: list[Engine] = []

    def make(config: EngineConfig, clock: Clock) -> Engine:
        engine = Engine(ProviderRegistry(config), settings=config, clock=clock, sleep=clock.sleep)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        await engine.providers.aclose()


def one_key(fake_llm: Any, model: str = "openai:gpt-test", **kw: Any) -> EngineConfig:
    """The issue's set-up: the only credential of the provider."""
    key = (Credential(label="only", key=SecretStr("sk-only-secret-0001")),)
    return EngineConfig(
        model=model,
        openai_base_url=fake_llm.openai_base_url,
        anthropic_base_url=fake_llm.anthropic_base_url,
        openai_credentials=key,
        anthropic_credentials=key,
        **kw,
    )


def waits(rec: Recorder) -> list[str]:
    return [n.message for n in rec.of("notice") if n.kind == "queued" and n.detail["waiting"]]


async def turn(engine: Engine, rec: Recorder | None = None) -> Any:
    return await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=rec)


async def test_a_rate_limited_key_cools_as_asked_and_later_turns_wait_then_answer(
    fake_llm: Any, engines: MakeEngine
) -> None:
    clock = Clock()
    config = one_key(fake_llm)
    engine = engines(config, clock)
    pool = engine.access.pool("openai:gpt-test")
    assert pool is not None
    # The sequence: 429s without Retry-After, then one asking for 120 s.
    fake_llm.error(429, "Rate limit reached").error(429, "Rate limit reached")
    fake_llm.error(429, "Rate limit reached", headers={"Retry-After": "120"})
    rec = Recorder()
    first = await turn(engine, rec)
    # The turn waited out the short back-offs (1 s, then 2 s), showing it, and
    # ended at once on the 120 s one (past the 60 s bound), saying when to try again.
    assert clock.slept == [1.0, 2.0]
    assert waits(rec)[0] == "waiting for the provider's rate limit (about 1 s)"
    assert first.error is not None and "try again in about 2 min" in first.error
    cooling = (await engine.access.state.cooldowns("openai"))["only"]
    assert cooling.until - clock.now == 120  # not the 1,495 s of the ladder
    # 61 s later the key has 59 s to go: the next turn waits that out, then answers.
    clock.now += 61
    clock.slept.clear()
    fake_llm.text("answered after the pause")
    rec = Recorder()
    second = await turn(engine, rec)
    assert second.error is None and second.text == "answered after the pause"
    assert clock.slept == [59.0]
    assert waits(rec)[0] == "waiting for the provider's rate limit (about 59 s)"
    # The VP shows the wait (queued) and then goes on (thinking).
    queued = [n.detail["waiting"] for n in rec.of("notice") if n.kind == "queued"]
    assert queued == [True, False]
    # A new 429 with a short Retry-After: the turn waits that long and answers.
    clock.slept.clear()
    fake_llm.error(429, "slow down", headers={"Retry-After": "30"}).text("after thirty")
    third = await turn(engine)
    assert third.text == "after thirty" and clock.slept == [30.0]


async def test_past_the_bound_a_turn_ends_at_once_saying_when(
    fake_llm: Any, engines: MakeEngine
) -> None:
    clock = Clock()
    config = one_key(fake_llm, rate_limit_wait=10)
    engine = engines(config, clock)
    fake_llm.error(429, "Rate limit reached", headers={"Retry-After": "45"})
    first = await turn(engine)
    assert clock.slept == [] and first.error is not None
    assert "try again in about 45 s (after 08:00:45 UTC)" in first.error
    # The next turn does not call the provider at all while the key cools.
    asked = len(fake_llm.requests)
    second = await turn(engine)
    assert len(fake_llm.requests) == asked and clock.slept == []
    assert second.error is not None and "try again in about 45 s" in second.error


async def test_the_openai_reset_headers_set_the_cooldown(
    fake_llm: Any, engines: MakeEngine
) -> None:
    clock = Clock()
    config = one_key(fake_llm)
    engine = engines(config, clock)
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "7s",
        "x-ratelimit-remaining-tokens": "1500",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    fake_llm.error(429, "Rate limit reached for requests", headers=headers).text("ok")
    result = await turn(engine)
    assert result.text == "ok" and clock.slept == [7.0]  # the requests limit ran out


async def test_the_anthropic_reset_headers_set_the_cooldown(
    fake_llm: Any, engines: MakeEngine
) -> None:
    clock = Clock()
    config = one_key(fake_llm, model="anthropic:claude-test")
    engine = engines(config, clock)
    # The SDK reads the reset time against the real clock; the fake server
    # says "in 12 s" from now.
    reset = datetime.fromtimestamp(datetime.now(UTC).timestamp() + 12, UTC)
    headers = {
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": reset.isoformat().replace("+00:00", "Z"),
    }
    fake_llm.error(429, "rate_limit_error", headers=headers).text("ok")
    result = await turn(engine)
    assert result.text == "ok"
    # Read against the real clock, a moment after it was written: wide bounds
    # (the exact arithmetic is checked with a fixed clock below).
    (slept,) = clock.slept
    assert 4 <= slept <= 12


def test_reset_headers_pick_the_limit_that_ran_out() -> None:
    now = 1_800_000_000.0
    assert rate_limit_reset_from({}, now) is None
    # No limit says it ran out: the soonest reset.
    both = {"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "1m30s"}
    assert rate_limit_reset_from(both, now) == 0.02
    spent = {**both, "x-ratelimit-remaining-tokens": "0"}
    assert rate_limit_reset_from(spent, now) == 90.0
    at = datetime.fromtimestamp(now + 3, UTC).isoformat()
    assert rate_limit_reset_from({"anthropic-ratelimit-requests-reset": at}, now) == 3.0
    assert rate_limit_reset_from({"x-ratelimit-reset-tokens": "soon"}, now) is None
