"""Several keys per provider: rotation, the cooldown ladder, cooldowns shared through the store."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from actors.config import RuntimeConfig
from engine.credentials import (
    Credential,
    CredentialPool,
    LocalCooldowns,
    next_cooldown,
    parse_keys,
)
from engine.engine import Engine
from engine.errors import ErrorKind
from engine.messages import Conversation, Message
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig, EngineSettings
from store.provider_state import Cooldown
from tests.engine_helpers import FakeSleep, Recorder
from tests.fixtures.stores import StoreFactory

KEYS = {"alpha": "sk-alpha-secret-0001", "beta": "sk-beta-secret-0002"}
ROOT = Path(__file__).resolve().parents[1]


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def two_keys(fake_llm: Any) -> EngineConfig:
    return EngineConfig(
        model="openai:gpt-test",
        openai_base_url=fake_llm.openai_base_url,
        openai_credentials=tuple(
            Credential(label=label, key=SecretStr(key)) for label, key in KEYS.items()
        ),
    )


def used_key(request: Any) -> str:
    return str(request.headers["authorization"]).removeprefix("Bearer ")


def test_the_cooldown_ladder() -> None:
    now, prev = 0.0, None
    spans = []
    for _ in range(6):
        prev = next_cooldown(prev, ErrorKind.AUTH, now)
        spans.append(prev.until - now)
        now = prev.until  # each failure comes as the previous cooldown ends
    assert spans == [60, 300, 1500, 3600, 3600, 3600]
    now, prev, spans = 0.0, None, []
    for _ in range(5):
        prev = next_cooldown(prev, ErrorKind.BILLING, now)
        spans.append((prev.until - now) / 3600)
        now = prev.until
    assert spans == [5, 10, 20, 24, 24]
    # A day with no failure after the window: the count starts again.
    assert next_cooldown(prev, ErrorKind.AUTH, now + 86_401).errors == 1
    # Retry-After never shortens an auth cooldown.
    assert next_cooldown(None, ErrorKind.AUTH, 0, retry_after=2).until == 60


def test_a_rate_limit_cools_a_key_as_long_as_the_provider_asks() -> None:
    # Without a word from the provider: 1 s, doubling, at most a minute.
    now, prev = 0.0, None
    spans = []
    for _ in range(9):
        prev = next_cooldown(prev, ErrorKind.RATE_LIMIT, now)
        spans.append(prev.until - now)
        now = prev.until
    assert spans == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    # Ten quiet minutes after the window: the back-off starts again.
    assert next_cooldown(prev, ErrorKind.RATE_LIMIT, now + 601).until == now + 601 + 1
    # The sequence: rate limits without Retry-After, then one asking
    # for 120 s. The key cools 120 s, not the 25 min of the ladder.
    now, prev = 0.0, None
    for _ in range(3):
        prev = next_cooldown(prev, ErrorKind.RATE_LIMIT, now)
        now += 0.5
    prev = next_cooldown(prev, ErrorKind.RATE_LIMIT, now, retry_after=120)
    assert prev.until - now == 120
    # The provider's latest word wins, even when shorter.
    assert next_cooldown(prev, ErrorKind.RATE_LIMIT, now, retry_after=2).until == now + 2
    # A rate limit never shortens a broken key's window, and does not climb its ladder.
    auth = next_cooldown(None, ErrorKind.AUTH, 0)
    assert next_cooldown(auth, ErrorKind.RATE_LIMIT, 1, retry_after=2).until == 60
    assert next_cooldown(prev, ErrorKind.AUTH, now).until == now + 60


@pytest.mark.parametrize(
    ("status", "message", "kind", "cooldown_s"),
    [
        (429, "Rate limit reached", "rate_limit", 1),
        (401, "Incorrect API key provided", "auth", 60),
        (402, "billing: add a payment method", "billing", 5 * 3600),
    ],
)
async def test_a_failing_key_is_rotated_and_cooled_down(
    fake_llm: Any, status: int, message: str, kind: str, cooldown_s: float
) -> None:
    clock = Clock()
    config = two_keys(fake_llm)
    engine = Engine(ProviderRegistry(config), settings=config, clock=clock, sleep=FakeSleep())
    fake_llm.error(status, message).text("answered by beta")
    rec = Recorder()
    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=rec)
    assert result.text == "answered by beta" and result.error is None
    assert [used_key(r) for r in fake_llm.requests] == [KEYS["alpha"], KEYS["beta"]]
    # The attempt names the credential by label; no key anywhere in it.
    assert result.attempts[0]["credential"] == "alpha" and result.attempts[0]["reason"] == kind
    assert not any(k in json.dumps(result.attempts) for k in KEYS.values())
    (rotate,) = [n for n in rec.of("notice") if n.kind == "rotate"]
    assert (rotate.detail["from"], rotate.detail["to"]) == ("alpha", "beta")
    cooling = await engine.access.state.cooldowns("openai")
    assert cooling["alpha"].until - clock.now == cooldown_s and cooling["alpha"].reason == kind
    # The next turn starts on beta: alpha is still cooling down.
    fake_llm.text("again")
    await engine.run_turn(Conversation(id="d"), Message.user("hi"), system="s")
    assert used_key(fake_llm.requests[-1]) == KEYS["beta"]
    # Once alpha's cooldown is over it is first again.
    clock.now += cooldown_s
    fake_llm.text("back")
    await engine.run_turn(Conversation(id="e"), Message.user("hi"), system="s")
    assert used_key(fake_llm.requests[-1]) == KEYS["alpha"]
    await engine.providers.aclose()


async def test_every_key_cooling_waits_for_the_first_to_come_back(fake_llm: Any) -> None:
    clock = Clock()
    delays: list[float] = []

    async def advancing(seconds: float) -> None:
        delays.append(seconds)
        clock.now += seconds

    config = two_keys(fake_llm)
    engine = Engine(ProviderRegistry(config), settings=config, clock=clock, sleep=advancing)
    pool = engine.access.pool("openai:gpt-test")
    assert pool is not None
    await pool.failed("alpha", ErrorKind.RATE_LIMIT, retry_after=60)
    clock.now += 20
    await pool.failed("beta", ErrorKind.RATE_LIMIT, retry_after=60)
    fake_llm.text("after the wait")
    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s")
    assert result.text == "after the wait"
    assert delays == [pytest.approx(40.0)]  # alpha's cooldown ends first
    assert len(fake_llm.requests) == 1 and used_key(fake_llm.requests[0]) == KEYS["alpha"]
    await engine.providers.aclose()


_OTHER_PROCESS = """
import asyncio, sys
from store.config import StoreConfig
from engine.credentials import Credential, CredentialPool
from pydantic import SecretStr

async def main():
    config = StoreConfig(sys.argv[1] or None, sys.argv[2], redis_prefix=sys.argv[3])
    state = config.open_provider_state()
    creds = [Credential(label=l, key=SecretStr("x")) for l in ("alpha", "beta")]
    picked = await CredentialPool("openai", creds, state).pick()
    cooling = await state.cooldowns("openai")
    print(picked.label, cooling["alpha"].reason)
    await state.aclose()

asyncio.run(main())
"""


async def test_cooldowns_are_shared_across_processes_through_the_store(
    store_factory: StoreFactory, fake_llm: Any
) -> None:
    cfg = store_factory.config
    config = two_keys(fake_llm)
    state = cfg.open_provider_state()
    engine = Engine(ProviderRegistry(config), settings=config, provider_state=state)
    fake_llm.error(429, "Rate limit reached").text("ok")
    await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s")
    # Another process, opening the deployment's store, sees alpha cooling down.
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", _OTHER_PROCESS, cfg.url or "", str(cfg.data_dir), cfg.redis_prefix],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["beta", "rate_limit"]
    # And an actor's engine built from the same runtime config does too.
    other = Engine(
        ProviderRegistry(config), settings=config, provider_state=cfg.open_provider_state()
    )
    fake_llm.text("from beta")
    await other.run_turn(Conversation(id="d"), Message.user("hi"), system="s")
    assert used_key(fake_llm.requests[-1]) == KEYS["beta"]
    await state.aclose()
    await other.access.state.aclose()  # type: ignore[attr-defined]
    await engine.providers.aclose()
    await other.providers.aclose()


def test_keys_from_settings_and_a_profiles_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert [c.label for c in parse_keys("a=sk-1, b=sk-2", "openai")] == ["a", "b"]
    assert [c.label for c in parse_keys("sk-1,sk-2", "openai")] == ["openai#1", "openai#2"]
    profiles = tmp_path / "keys.json"
    profiles.write_text(json.dumps({"anthropic": [{"label": "team", "key": "sk-ant-x"}]}))
    monkeypatch.setenv("OPENAI_API_KEYS", f"alpha={KEYS['alpha']},beta={KEYS['beta']}")
    monkeypatch.setenv("YEAFT_CREDENTIALS_FILE", str(profiles))
    config = EngineSettings().to_config()
    assert [c.label for c in config.credentials("openai")] == ["alpha", "beta"]
    assert [c.label for c in config.credentials("anthropic")] == ["team"]
    # The credentials travel in the runtime config, never read by the actor's node.
    runtime = RuntimeConfig(engine=config)
    for text in (
        repr(runtime),
        str(config),
        config.model_dump_json(),
        repr(Engine(settings=config).access),
    ):
        assert not any(k in text for k in KEYS.values()) and "sk-ant-x" not in text


async def test_rotation_logs_name_labels_never_keys(
    fake_llm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = two_keys(fake_llm)
    engine = Engine(ProviderRegistry(config), settings=config, sleep=FakeSleep())
    fake_llm.error(401, "Incorrect API key").error(401, "Incorrect API key")
    rec = Recorder()
    result = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s", emit=rec)
    assert result.error_kind == "auth"
    assert [a["credential"] for a in result.attempts] == ["alpha", "beta"]
    shown = caplog.text + repr(rec.events) + repr(result) + repr(engine.access.pools)
    assert not any(k in shown for k in KEYS.values())
    await engine.providers.aclose()


async def test_a_pool_picks_in_order_skipping_cooling_keys() -> None:
    clock = Clock()
    book = LocalCooldowns()
    creds = [Credential(label=label, key=SecretStr(k)) for label, k in KEYS.items()]
    pool = CredentialPool("openai", creds, book, clock)
    assert (await pool.pick()) == creds[0]
    await book.put_cooldown("openai", "alpha", Cooldown(clock.now + 5, 1, "rate_limit"))
    assert (await pool.pick()) == creds[1]
    await book.put_cooldown("openai", "beta", Cooldown(clock.now + 3, 1, "auth"))
    soonest = await pool.pick()
    assert isinstance(soonest, Cooldown) and soonest.reason == "auth"
