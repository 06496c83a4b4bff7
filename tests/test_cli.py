"""The ``yeaft`` command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROVIDER_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "YEAFT_MODEL",
    "YEAFT_OPENAI_API_KEY",
    "YEAFT_ANTHROPIC_API_KEY",
)


def yeaft(*args: str, tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    # The offline model's demo pace is for people; the tests read it at full speed.
    clean.update({"YEAFT_DATA_DIR": str(tmp), "NO_COLOR": "1", "YEAFT_OFFLINE_TPS": "0", **env})
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_help_lists_commands(tmp_path: Path) -> None:
    out = yeaft("--help", tmp=tmp_path)
    assert out.returncode == 0
    for command in ("ask", "schema", "personas"):
        assert command in out.stdout


def test_ask_streams_from_the_offline_model_with_nothing_configured(tmp_path: Path) -> None:
    out = yeaft("ask", "how", "should", "we", "cache?", "--vp", "linus", tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "cache?" in out.stdout and "Linus" in out.stdout
    assert "end_turn" in out.stderr and "offline:default" in out.stderr and "$0.0" in out.stderr


def test_ask_unknown_vp(tmp_path: Path) -> None:
    out = yeaft("ask", "hi", "--vp", "nobody", tmp=tmp_path)
    assert out.returncode == 2 and "unknown VP" in out.stderr


def test_ask_through_an_openai_compatible_endpoint(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.text("Cache at the edge, invalidate by key.", chunks=4)
    out = yeaft(
        "ask",
        "cache?",
        "--model",
        "openai:test-model",
        tmp=tmp_path,
        OPENAI_BASE_URL=fake_llm.openai_base_url,
        OPENAI_API_KEY="sk-test",
    )
    assert out.returncode == 0, out.stderr
    assert "Cache at the edge, invalidate by key." in out.stdout
    assert "openai:test-model" in out.stderr
    body = fake_llm.requests[-1].body
    assert body["model"] == "test-model" and body["stream"] is True


def test_ask_through_anthropic(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.text("Measure first.", chunks=2)
    out = yeaft(
        "ask",
        "perf?",
        tmp=tmp_path,
        ANTHROPIC_BASE_URL=fake_llm.anthropic_base_url,
        ANTHROPIC_API_KEY="sk-ant-test",
        YEAFT_ANTHROPIC_MODEL="claude-test",
    )
    assert out.returncode == 0, out.stderr
    assert "Measure first." in out.stdout and "anthropic:claude-test" in out.stderr
    assert fake_llm.requests[-1].path.endswith("/v1/messages")


def test_ask_reports_a_failing_provider_clearly(tmp_path: Path, fake_llm: Any) -> None:
    fake_llm.error(401, "invalid api key")
    out = yeaft(
        "ask",
        "hi",
        "--model",
        "openai:m",
        tmp=tmp_path,
        OPENAI_BASE_URL=fake_llm.openai_base_url,
        OPENAI_API_KEY="bad",
    )
    assert out.returncode == 1
    assert "All models failed (1)" in out.stderr and "auth 401" in out.stderr


def test_schema_is_json_with_every_frame(tmp_path: Path) -> None:
    out = yeaft("schema", tmp=tmp_path)
    schema = json.loads(out.stdout)
    text = json.dumps(schema)
    for name in ("yeaft_output", "yeaft_session_chat", "ask_user_answer", "result"):
        assert name in text
    # The bounds of the group settings a client may send are part of it.
    fanout = schema["$defs"]["GroupSettingsPatch"]["properties"]["fanoutCap"]["anyOf"][0]
    assert (fanout["minimum"], fanout["maximum"]) == (1, 16)


def test_personas_list_show_and_new(tmp_path: Path) -> None:
    listed = yeaft("personas", "list", tmp=tmp_path).stdout
    for pid in ("steve", "linus", "martin", "dieter", "kent", "omni"):
        assert pid in listed
    shown = yeaft("personas", "show", "torvalds", tmp=tmp_path)
    assert shown.returncode == 0 and '"id": "linus"' in shown.stdout
    created = yeaft("personas", "new", "grace2", "--name", "Grace Two", tmp=tmp_path)
    assert created.returncode == 0 and (tmp_path / "personas" / "grace2.md").exists()
    assert "grace2" in yeaft("personas", "list", tmp=tmp_path).stdout
    again = yeaft("personas", "new", "grace2", tmp=tmp_path)
    assert again.returncode == 2
