"""The model registry: bare names inferred, unknown ones refused, windows and thinking per model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from engine.engine import Engine
from engine.messages import Conversation, Message
from engine.models import ModelRegistry, UnknownModel, read_models, window_for
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig, EngineSettings
from tests.engine_helpers import Recorder, scripted_engine
from tests.test_cli import yeaft


def test_bare_names_are_inferred_to_their_provider() -> None:
    registry = ModelRegistry()
    assert registry.qualify("gpt-4o") == "openai:gpt-4o"
    assert registry.qualify("chatgpt-4o-latest") == "openai:chatgpt-4o-latest"
    for name in ("o1", "o1-mini", "o3-mini", "o4-mini"):
        assert registry.qualify(name) == f"openai:{name}"
    assert registry.qualify("claude-sonnet-4-5") == "anthropic:claude-sonnet-4-5"
    assert registry.qualify("offline:default") == "offline:default"
    for unknown in ("nonsense", "omega", "llama3"):
        with pytest.raises(UnknownModel, match=f"unknown model '{unknown}'"):
            registry.qualify(unknown)
    with pytest.raises(UnknownModel, match="unknown provider 'mistral'"):
        registry.qualify("mistral:large", strict=True)


def test_registry_entries_carry_window_output_capabilities_and_price() -> None:
    registry = ModelRegistry()
    mini = registry.info("gpt-4o-mini")
    assert (mini.context_window, mini.max_output, mini.tools, mini.vision) == (
        128_000,
        16_384,
        True,
        True,
    )
    assert mini.price.input == 0.15 and not mini.thinking
    assert registry.info("o3-mini").thinking and registry.info("claude-opus-4-1").thinking
    assert registry.window_for("openai:gpt-4.1") == 1_047_576
    assert window_for("claude-haiku-4-5") == 200_000
    # The prices the engine charges come from the same entries.
    assert Engine().prices.price("openai:gpt-4o") == registry.info("gpt-4o").price


def test_yeaft_model_gpt_4o_runs_on_openai(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.text("From OpenAI.")
    out = yeaft(
        "ask",
        "which model?",
        tmp=tmp_path,
        YEAFT_MODEL="gpt-4o",
        OPENAI_BASE_URL=fake_llm.openai_base_url,
        OPENAI_API_KEY="sk-test",
    )
    assert out.returncode == 0, out.stderr
    assert "From OpenAI." in out.stdout and "openai:gpt-4o" in out.stderr
    assert fake_llm.requests[-1].body["model"] == "gpt-4o"


def test_an_unknown_bare_model_stops_ask_and_serve_with_a_clear_message(tmp_path: Path) -> None:
    for command in (("ask", "hi"), ("serve", "--port", "1")):
        out = yeaft(*command, tmp=tmp_path, YEAFT_MODEL="nonsense", YEAFT_OFFLINE_TPS="0")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "unknown model 'nonsense'" in out.stderr
        assert "offline" not in out.stdout
    for model, says in (("nonsense", "unknown model 'nonsense'"), ("mistral:x", "'mistral'")):
        out = yeaft("ask", "hi", "--model", model, tmp=tmp_path)
        assert out.returncode == 2 and says in out.stderr, out.stdout + out.stderr


def test_a_user_models_file_extends_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models.json").write_text(
        json.dumps(
            {
                "models": {
                    "openai:house-model": {"context_window": 32_000, "input": 1.0, "output": 3.0},
                    "anthropic:claude-*sonnet*": {"input": 9.0},
                }
            }
        )
    )
    monkeypatch.setenv("YEAFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("YEAFT_MODEL", "house-model")
    config = EngineSettings().to_config()
    # A bare name the user file spells out is that entry's provider.
    assert config.default_model() == "openai:house-model"
    assert config.window_for("house-model") == 32_000
    sonnet = config.registry().info("claude-sonnet-4-5")
    # Fields the entry leaves out keep the built-in values.
    assert sonnet.price.input == 9.0 and sonnet.price.output == 15.0
    assert sonnet.context_window == 200_000
    engine = Engine(settings=config)
    assert engine.window_for() == 32_000
    assert engine.prices.price("openai:house-model").output == 3.0  # type: ignore[union-attr]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"openai:x": {"windw": 1}}))
    with pytest.raises(ValueError, match="unknown model fields: windw"):
        read_models(bad)


def _long_conversation(turns: int, words: int) -> Conversation:
    conv = Conversation(id="c")
    for i in range(turns):
        conv.messages.append(Message.user(f"question {i} " + "word " * words))
        conv.messages.append(Message.assistant(f"answer {i} " + "word " * words))
    return conv


async def test_compaction_follows_the_chosen_models_window(tmp_path: Path) -> None:
    small = read_models(_write(tmp_path, {"offline:small*": {"context_window": 3000}}))
    # The same conversation (~4k tokens) fits the default window and not the small one.
    for model, compacts in (("offline:small", True), ("offline:test", False)):
        steps = ["summary of before", "the answer"] if compacts else ["the answer"]
        engine, provider, _ = scripted_engine(
            *steps, model=model, models=small, max_output_tokens=500
        )
        rec = Recorder()
        conv = _long_conversation(8, 200)
        await engine.run_turn(conv, Message.user("now?"), system="s", emit=rec)
        compacted = [n for n in rec.of("notice") if n.kind == "compact"]
        assert bool(compacted) == compacts, model
        assert (conv.summary == "summary of before") == compacts
        provider.assert_complete()
    assert scripted_engine(model="offline:small", models=small)[0].tool_result_max_chars == 3600


def _write(tmp_path: Path, entries: dict[str, Any]) -> Path:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(entries))
    return path


async def test_thinking_setting_reaches_both_providers_requests(fake_llm: Any) -> None:
    config = EngineConfig(
        thinking="high",
        openai_api_key=SecretStr("sk-o"),
        openai_base_url=fake_llm.openai_base_url,
        anthropic_api_key=SecretStr("sk-a"),
        anthropic_base_url=fake_llm.anthropic_base_url,
    )
    cases = [
        ("o3-mini", lambda b: b.get("reasoning_effort") == "high"),
        (
            "claude-sonnet-4-5",
            lambda b: b["thinking"] == {"type": "enabled", "budget_tokens": 24576},
        ),
        # A model the registry says cannot think gets no thinking parameter.
        ("gpt-4o", lambda b: "reasoning_effort" not in b and "thinking" not in b),
    ]
    for model, check in cases:
        fake_llm.text("ok")
        engine = Engine(ProviderRegistry(config), model=model, settings=config)
        result = await engine.run_turn(Conversation(id="t"), Message.user("hi"), system="s")
        assert result.error is None, result.error
        assert check(fake_llm.requests[-1].body), (model, fake_llm.requests[-1].body)
        await engine.providers.aclose()


async def test_persona_and_group_models_may_be_bare_names_and_unknown_ones_fail_turns() -> None:
    engine = Engine(model="claude-haiku-4-5")
    assert engine.model == "anthropic:claude-haiku-4-5"
    assert engine.caller("gpt-4o").chain[0] == "openai:gpt-4o"
    # A persona naming a model nobody knows: its turns end in a clear error.
    unknown = Engine(model="nonsense")
    result = await unknown.run_turn(Conversation(id="c"), Message.user("hi"), system="s")
    assert result.error_kind == "model_not_found" and "unknown model 'nonsense'" in (
        result.error or ""
    )
