"""EngineConfig and RuntimeConfig: built from the environment once, then frozen and explicit.

The environment is read by ``EngineSettings`` in the driver only; the config
it produces carries the provider keys as secrets that no repr, str or dump
shows, and nothing built from a config looks at the process environment.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from actors.config import RuntimeConfig
from engine.engine import Engine
from engine.messages import Conversation, Message
from engine.pricing import Price
from engine.providers.registry import ANTHROPIC_URL, ProviderRegistry
from engine.settings import EngineConfig, EngineSettings
from gateway.server import runtime_config, with_actor_layout
from gateway.settings import GatewaySettings
from tests.fixtures.llm_server import FakeLLM

OPENAI_KEY = "sk-openai-from-config-0123456789"
ANTHROPIC_KEY = "sk-ant-from-config-0123456789"

# Values a process's environment might hold that must have no effect on a
# config, nor on anything built from one.
WRONG_ENV = {
    "OPENAI_API_KEY": "sk-wrong-env-openai",
    "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    "ANTHROPIC_API_KEY": "sk-wrong-env-anthropic",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    "YEAFT_MODEL": "anthropic:wrong-model",
    "YEAFT_OPENAI_API_KEY": "sk-wrong-env-yeaft-openai",
    "YEAFT_MAX_OUTPUT_TOKENS": "7",
    "YEAFT_PRICES_FILE": "/nonexistent/prices.json",
}


def keyed() -> EngineConfig:
    return EngineConfig(
        model="openai:gpt-test",
        openai_api_key=SecretStr(OPENAI_KEY),
        anthropic_api_key=SecretStr(ANTHROPIC_KEY),
    )


def shows_no_key(text: str) -> bool:
    return OPENAI_KEY not in text and ANTHROPIC_KEY not in text


# --- reading the environment (driver only) ---------------------------------


def test_settings_read_the_environment_and_the_config_carries_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai:gpt-test*": {"input": 1.5, "output": 6.0}}))
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("YEAFT_ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("YEAFT_MODEL", "openai:gpt-test")
    monkeypatch.setenv("YEAFT_FALLBACK_MODELS", '["anthropic:claude-x", "offline:default"]')
    monkeypatch.setenv("YEAFT_MAX_OUTPUT_TOKENS", "321")
    monkeypatch.setenv("YEAFT_PRICES_FILE", str(prices))

    config = EngineSettings().to_config()

    assert isinstance(config, EngineConfig) and not isinstance(config, EngineSettings)
    assert config.openai_api_key is not None and config.anthropic_api_key is not None
    assert config.openai_api_key.get_secret_value() == OPENAI_KEY
    assert config.anthropic_api_key.get_secret_value() == ANTHROPIC_KEY
    assert config.openai_base_url == "http://127.0.0.1:8000/v1"
    assert config.model == "openai:gpt-test"
    assert config.fallback_models == ("anthropic:claude-x", "offline:default")
    assert config.max_output_tokens == 321
    ((pattern, info),) = config.models
    assert pattern == "openai:gpt-test*" and info.price == Price(1.5, 6.0)
    # The rest of the entry comes from the built-in entry the pattern falls under.
    assert info.context_window == 128_000
    # The engine prices from the config's entries, ahead of the built-in table.
    assert Engine(settings=config).prices.price("openai:gpt-test-1") == Price(1.5, 6.0)


def test_empty_keys_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")
    config = EngineSettings().to_config()
    assert config.openai_api_key is None and config.anthropic_base_url is None
    assert config.default_model() == "offline:default"
    assert EngineConfig(anthropic_api_key=SecretStr("")).anthropic_api_key is None


def test_a_bad_prices_file_fails_in_the_driver(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("YEAFT_PRICES_FILE", str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError):
        EngineSettings().to_config()


def test_a_config_never_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in WRONG_ENV.items():
        monkeypatch.setenv(name, value)
    config = EngineConfig()
    assert config == EngineConfig.model_construct()  # the declared defaults, nothing else
    assert config.openai_api_key is None and config.model is None
    assert config.default_model() == "offline:default"
    engine = Engine(settings=config)
    assert engine.model == "offline:default" and engine.settings.max_output_tokens == 4096
    with pytest.raises(Exception, match="OPENAI_API_KEY is not set"):
        ProviderRegistry(config).resolve("openai:gpt-4o")


def test_default_model_prefers_a_keyed_provider() -> None:
    assert keyed().replace(model=None).default_model() == "anthropic:claude-sonnet-4-5"
    only_openai = EngineConfig(openai_api_key=SecretStr(OPENAI_KEY), openai_model="gpt-x")
    assert only_openai.default_model() == "openai:gpt-x"


# --- frozen, copied with changes, picklable --------------------------------


def test_engine_config_is_frozen_and_copied_with_validated_changes() -> None:
    config = keyed()
    with pytest.raises(ValidationError):
        config.model = "offline:default"
    changed = config.replace(max_retries=0, fallback_models=["offline:default"])
    assert changed.max_retries == 0 and changed.fallback_models == ("offline:default",)
    assert config.max_retries == 3 and config.fallback_models == ()
    assert changed.openai_api_key == config.openai_api_key
    with pytest.raises(ValidationError):
        config.replace(max_retries="many")
    with pytest.raises(ValidationError):
        config.replace(no_such_setting=1)


def test_configs_survive_pickling_with_their_keys() -> None:
    runtime = RuntimeConfig(engine=keyed(), personas_dir="/srv/personas")
    copy = pickle.loads(pickle.dumps(runtime))
    assert copy == runtime
    assert copy.engine.openai_api_key is not None
    assert copy.engine.openai_api_key.get_secret_value() == OPENAI_KEY


def test_runtime_config_is_frozen() -> None:
    config = RuntimeConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.coordinator_shards = 4  # type: ignore[misc]
    moved = dataclasses.replace(config, coordinator_shards=4)
    assert moved.coordinator_shards == 4 and config.coordinator_shards == 2


# --- secrets stay masked ---------------------------------------------------


def test_keys_are_masked_in_reprs_strings_and_dumps(caplog: pytest.LogCaptureFixture) -> None:
    config = keyed()
    runtime = RuntimeConfig(engine=config)
    settings_like = EngineSettings(openai_api_key=SecretStr(OPENAI_KEY))
    shown = [
        repr(config),
        str(config),
        repr(runtime),
        str(runtime),
        repr(settings_like),
        str(config.model_dump()),
        config.model_dump_json(),
        json.dumps(config.model_dump(mode="json")),
    ]
    for text in shown:
        assert shows_no_key(text), text
    assert "**********" in repr(config) and "**********" in repr(runtime)
    with caplog.at_level(logging.INFO):
        logging.getLogger("yeaft.test").info("config %s / %r", runtime, config.model_dump())
    assert shows_no_key(caplog.text) and "openai_api_key" in caplog.text


def test_gateway_builds_one_runtime_config_with_the_engine_config(tmp_path: Path) -> None:
    settings = GatewaySettings(data_dir=tmp_path, redis_prefix="gw", coordinator_shards=3)
    config = runtime_config(settings, keyed())
    assert config.engine == keyed()
    assert config.personas_dir == str(tmp_path / "personas")
    assert (config.store.data_dir, config.store.redis_prefix, config.coordinator_shards) == (
        tmp_path,
        "gw",
        3,
    )
    assert shows_no_key(repr(config))


def test_a_local_instance_has_one_coordinator_shard_and_a_cluster_two(tmp_path: Path) -> None:
    unset = GatewaySettings(data_dir=tmp_path)
    assert with_actor_layout(unset, local=True).coordinator_shards == 1
    assert with_actor_layout(unset, local=False).coordinator_shards == 2
    chosen = GatewaySettings(data_dir=tmp_path, coordinator_shards=3)
    assert with_actor_layout(chosen, local=True).coordinator_shards == 3


def test_a_local_instance_pools_its_vps_and_a_cluster_gives_each_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    unset = GatewaySettings(data_dir=tmp_path)
    assert with_actor_layout(unset, local=True).vp_hosts == 2
    assert with_actor_layout(unset, local=False).vp_hosts == 0
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert with_actor_layout(unset, local=True).vp_hosts == 4
    chosen = GatewaySettings(data_dir=tmp_path, vp_hosts=0)
    assert with_actor_layout(chosen, local=True).vp_hosts == 0
    laid_out = with_actor_layout(GatewaySettings(data_dir=tmp_path, vp_hosts=3), local=False)
    assert runtime_config(laid_out, EngineConfig()).vp_hosts == 3


# --- providers take credentials from the config, not the environment -------


async def test_providers_use_the_configured_key_and_url_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM
) -> None:
    for name, value in WRONG_ENV.items():
        monkeypatch.setenv(name, value)
    fake_llm.text("from the configured server")
    fake_llm.text("and again")
    config = keyed().replace(
        openai_base_url=fake_llm.openai_base_url, anthropic_base_url=fake_llm.anthropic_base_url
    )
    engine = Engine(settings=config)
    try:
        first = await engine.run_turn(Conversation(id="c"), Message.user("hi"), system="s")
        second = await engine.run_turn(
            Conversation(id="d"), Message.user("hi"), system="s", model="anthropic:claude-test"
        )
    finally:
        await engine.providers.aclose()
    assert first.text == "from the configured server" and second.text == "and again"
    openai_call, anthropic_call = fake_llm.requests
    assert openai_call.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert openai_call.body["model"] == "gpt-test"
    assert openai_call.body["max_tokens"] == 4096  # not YEAFT_MAX_OUTPUT_TOKENS
    # Anthropic's SDK 2.x sends the key as a bearer token, older ones as x-api-key.
    sent = anthropic_call.headers
    assert ANTHROPIC_KEY in (sent.get("x-api-key"), sent.get("authorization", "")[7:])


async def test_an_unset_base_url_means_the_vendor_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in WRONG_ENV.items():
        monkeypatch.setenv(name, value)
    registry = ProviderRegistry(keyed())
    try:
        openai_provider, _ = registry.resolve("openai:gpt-test")
        anthropic_provider, _ = registry.resolve("anthropic:claude-test")
        # The SDK clients are private; their base URLs are what a request would use.
        openai_url = str(openai_provider._client.base_url)  # type: ignore[attr-defined]
        anthropic_url = str(anthropic_provider._client.base_url)  # type: ignore[attr-defined]
    finally:
        await registry.aclose()
    assert openai_url.rstrip("/") == "https://api.openai.com/v1"
    assert anthropic_url.rstrip("/") == ANTHROPIC_URL


async def test_a_failed_call_does_not_reveal_the_key(fake_llm: FakeLLM) -> None:
    fake_llm.error(401, "Incorrect API key provided")
    config = keyed().replace(openai_base_url=fake_llm.openai_base_url, max_retries=0)
    events: list[str] = []

    async def emit(event: object) -> None:
        events.append(repr(event))

    engine = Engine(settings=config)
    try:
        result = await engine.run_turn(
            Conversation(id="c"), Message.user("hi"), system="s", emit=emit
        )
    finally:
        await engine.providers.aclose()
    assert result.error is not None and result.error_kind == "auth"
    assert shows_no_key(repr(result)) and all(shows_no_key(e) for e in events)
