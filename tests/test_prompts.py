"""System prompts: golden files for fixed inputs, and the builder's rules.

Set ``UPDATE_GOLDEN=1`` to rewrite the files in ``tests/golden/`` after a
deliberate change to a template or a persona, then review the diff.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from personas import (
    SKIP_TOKEN,
    Persona,
    build_system_prompt,
    estimate_tokens,
    final_answer_prompt,
    load_personas,
    load_template,
    parse_persona,
)
from personas.prompts import TEMPLATE_NAMES, TRUNCATED_MARKER, Language, Mode, fill

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
NOW = datetime(2026, 1, 15, 9, 30, tzinfo=UTC)
PLACEHOLDER = re.compile(r"\{\{[a-z_]+\}\}")
LIBRARY = load_personas(None, strict=True)
LANGUAGES: tuple[Language, ...] = ("en", "zh")
MODES: tuple[Mode, ...] = ("chat", "group", "dream")


def vp(persona_id: str) -> Persona:
    persona = LIBRARY.get(persona_id)
    assert persona is not None
    return persona


def check_golden(name: str, text: str) -> None:
    path = GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN_DIR.mkdir(exist_ok=True)
        # The trailing newline keeps editors from "fixing" the file into a mismatch.
        path.write_text(text + "\n", encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing; run with UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert text + "\n" == expected, f"prompt differs from {path}; UPDATE_GOLDEN=1 rewrites it"


PROJECT_DOC = "\n".join(
    f"{n}. Convention {n}: modules stay small, names say what things are, "
    "and every public function has a docstring."
    for n in range(1, 41)
)


def golden_cases() -> dict[str, str]:
    return {
        "steve_group_en": build_system_prompt(
            persona=vp("steve"),
            mode="group",
            roster=[vp("steve"), vp("linus"), vp("martin")],
            memory=[
                "The user is launching a note-taking app for students in March.",
                "The user rejected a subscription model last week.",
            ],
            tools=["route_forward", "recall", "remember"],
            now=NOW,
        ),
        "linus_chat_zh": build_system_prompt(
            persona=vp("linus"),
            mode="chat",
            language="zh",
            memory=["用户的服务部署在两台 4 核机器上，数据库是 PostgreSQL 15。"],
            now=NOW,
        ),
        "omni_dream_en": build_system_prompt(
            persona=vp("omni"), mode="dream", tools=["recall", "remember"], now=NOW
        ),
        "kent_group_budget_trimmed": build_system_prompt(
            persona=vp("kent"),
            mode="group",
            roster=[vp("kent"), vp("ken"), vp("grace")],
            memory=["The test suite takes 40 seconds.", "The user writes Python 3.11."],
            project_doc=PROJECT_DOC,
            budget_tokens=1600,
            now=NOW,
        ),
    }


@pytest.mark.parametrize("name", sorted(golden_cases()))
def test_golden(name: str) -> None:
    check_golden(name, golden_cases()[name])


def test_budget_case_really_is_trimmed() -> None:
    prompt = golden_cases()["kent_group_budget_trimmed"]
    assert prompt.endswith(TRUNCATED_MARKER)
    assert "The user writes Python 3.11." in prompt
    assert estimate_tokens(prompt) <= 1600


# --- budget -----------------------------------------------------------------

MEMORIES = [f"Memory {n}: the user said something worth keeping, number {n}." for n in range(8)]


def build(budget: int, *, memory: list[str] | None = None, doc: str | None = PROJECT_DOC) -> str:
    return build_system_prompt(
        persona=vp("martin"),
        mode="chat",
        memory=MEMORIES if memory is None else memory,
        project_doc=doc,
        budget_tokens=budget,
        now=NOW,
    )


def test_within_budget_nothing_is_cut() -> None:
    prompt = build(100_000)
    assert PROJECT_DOC in prompt
    assert all(item in prompt for item in MEMORIES)
    assert TRUNCATED_MARKER not in prompt


def test_project_document_is_trimmed_before_any_memory() -> None:
    full = estimate_tokens(build(100_000))
    doc_tokens = estimate_tokens(PROJECT_DOC)
    prompt = build(full - doc_tokens // 2)
    assert all(item in prompt for item in MEMORIES)
    assert prompt.endswith(TRUNCATED_MARKER)
    kept = prompt.split("# Project document", 1)[1]
    assert "1. Convention 1:" in kept and "40. Convention 40:" not in kept
    # The cut falls on a line boundary: the marker follows a complete line.
    assert prompt.removesuffix(TRUNCATED_MARKER).rstrip().endswith("docstring.")
    assert estimate_tokens(prompt) <= full - doc_tokens // 2


def test_memory_goes_from_the_least_relevant_end_after_the_document() -> None:
    without_doc = estimate_tokens(build(100_000, doc=None))
    budget = without_doc - 40
    prompt = build(budget)
    assert "# Project document" not in prompt
    kept = [item for item in MEMORIES if item in prompt]
    assert kept == MEMORIES[: len(kept)]
    assert 0 < len(kept) < len(MEMORIES)
    assert estimate_tokens(prompt) <= budget


def test_core_sections_are_never_cut() -> None:
    core = build(100_000, memory=[], doc=None)
    prompt = build(10)
    assert prompt == core
    assert "# Rules that always apply" in prompt
    assert vp("martin").body in prompt


def test_estimate_counts_chinese_per_character() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("记忆") == 2


# --- group mode -------------------------------------------------------------


def group_prompt(
    language: Language = "en",
    tools: list[str] | None = None,
    roster: list[Persona] | None = None,
) -> str:
    return build_system_prompt(
        persona=vp("dieter"),
        mode="group",
        language=language,
        roster=[vp("linus"), vp("dieter")] if roster is None else roster,
        tools=tools,
        now=NOW,
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_skip_token_only_in_group_mode(language: Language) -> None:
    assert SKIP_TOKEN == "[[SKIP]]"
    assert f"`{SKIP_TOKEN}`" in group_prompt(language)
    for mode in MODES:
        if mode == "group":
            continue
        prompt = build_system_prompt(persona=vp("dieter"), mode=mode, language=language)
        assert SKIP_TOKEN not in prompt


@pytest.mark.parametrize("language", LANGUAGES)
def test_roster_marks_self_and_lists_roles(language: Language) -> None:
    prompt = group_prompt(language)
    you = "（你）" if language == "zh" else " (you)"
    dieter = vp("dieter").display_role(language)
    assert f"- @dieter — {dieter}{you}" in prompt
    assert f"- @linus — {vp('linus').display_role(language)}\n" in prompt


def test_roster_adds_self_when_missing_and_keeps_order() -> None:
    prompt = group_prompt(roster=[vp("linus"), vp("ada")])
    block = re.findall(r"^- @(\w+) — ", prompt, flags=re.MULTILINE)
    assert block[:3] == ["dieter", "linus", "ada"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_route_forward_guidance_only_with_the_tool(language: Language) -> None:
    heading = load_template("route_forward", language).splitlines()[0]
    with_tool = group_prompt(language, tools=["route_forward", "recall"])
    assert heading in with_tool
    assert "`to`" in with_tool and "`reason`" in with_tool
    without = group_prompt(language, tools=["recall"])
    assert heading not in without
    assert "route_forward" not in without
    assert "route_forward" not in group_prompt(language)


@pytest.mark.parametrize("language", LANGUAGES)
def test_solo_group_says_no_one_to_forward_to(language: Language) -> None:
    solo = group_prompt(language, roster=[vp("dieter")])
    assert load_template("group_solo", language) in solo
    assert load_template("group_solo", language) not in group_prompt(language)


def test_tool_sections_only_with_tools() -> None:
    assert "# Using tools" not in group_prompt()
    assert "# When tools fail" not in group_prompt()
    prompt = group_prompt(tools=["recall"])
    assert "Tools available to you in this turn: `recall`." in prompt
    assert "# When tools fail" in prompt


@pytest.mark.parametrize("language", ["en", "zh"])
def test_workspace_and_web_sections_only_with_those_tools(language: Language) -> None:
    workspace = load_template("workspace_tools", language)
    web = load_template("web_fetch", language)
    plain = group_prompt(language, tools=["recall"])
    assert workspace not in plain and web not in plain
    files = group_prompt(language, tools=["read_file", "list_files"])
    assert workspace in files and web not in files
    fetching = group_prompt(language, tools=["web_fetch"])
    assert web in fetching and workspace not in fetching
    # The rule against claiming look-ups that did not happen stays.
    assert load_template("common_rules", language) in fetching


def test_chinese_prompt_uses_chinese_names() -> None:
    prompt = build_system_prompt(persona=vp("linus"), mode="chat", language="zh", now=NOW)
    assert f"你是{vp('linus').name_zh}（@linus）" in prompt
    assert "2026-01-15 09:30 UTC" in prompt


# --- templates and placeholders ---------------------------------------------


@pytest.mark.parametrize("name", sorted(TEMPLATE_NAMES))
def test_every_template_exists_in_both_languages_with_the_same_placeholders(name: str) -> None:
    english, chinese = (load_template(name, language) for language in LANGUAGES)
    assert english and chinese and english != chinese
    assert set(PLACEHOLDER.findall(english)) == set(PLACEHOLDER.findall(chinese))


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tools", [None, ["route_forward", "recall", "remember"]])
def test_no_placeholder_is_left_unreplaced(
    language: Language, mode: Mode, tools: list[str] | None
) -> None:
    for persona in LIBRARY.all():
        prompt = build_system_prompt(
            persona=persona,
            mode=mode,
            language=language,
            roster=LIBRARY.all(),
            memory=["a memory"],
            project_doc="a document",
            tools=tools,
            now=NOW,
        )
        assert not PLACEHOLDER.search(prompt), persona.id


def test_user_text_with_braces_is_inserted_verbatim(tmp_path: Path) -> None:
    tricky = "{roster} {{roster}} {0} {} {{document}} {{items}} {!r} %s"
    persona = parse_persona(
        f"---\nid: brace\nname: '{{{{name}}}} {{x}}'\nrole: '{{0}}'\n---\n{tricky}\n",
        tmp_path / "brace.md",
        expected_id="brace",
    )
    prompt = build_system_prompt(
        persona=persona,
        mode="group",
        roster=[persona, vp("linus")],
        memory=[tricky],
        project_doc=tricky,
        tools=["route_forward"],
        now=NOW,
    )
    assert prompt.count(tricky) == 3
    assert "You are {{name}} {x} (@brace), the {0}," in prompt
    assert "- @brace — {0} (you)" in prompt


def test_fill_is_single_pass_and_strict() -> None:
    assert fill("{{a}}-{{b}}", {"a": "{{b}}", "b": "x"}) == "{{b}}-x"
    with pytest.raises(KeyError):
        fill("{{missing}}", {})


@pytest.mark.parametrize("bad", ["nope", "../base", "base.md", ""])
def test_load_template_rejects_unknown_names(bad: str) -> None:
    with pytest.raises(ValueError):
        load_template(bad, "en")


def test_unknown_language_and_mode_are_rejected() -> None:
    with pytest.raises(ValueError):
        load_template("base", "fr")
    with pytest.raises(ValueError):
        build_system_prompt(persona=vp("kent"), mode="solo")  # type: ignore[arg-type]


@pytest.mark.parametrize("language", LANGUAGES)
def test_final_answer_prompt(language: Language) -> None:
    text = final_answer_prompt(language)
    assert text == load_template("final_answer", language)
    assert not PLACEHOLDER.search(text)
    assert ("tool" in text) if language == "en" else ("工具" in text)


def test_dream_mode_names_only_memory_tools() -> None:
    prompt = golden_cases()["omni_dream_en"]
    assert "`recall`" in prompt and "`remember`" in prompt
    assert "@omni" in prompt
    assert "# The group you are in" not in prompt


def test_memory_items_keep_order_and_multiline_items_stay_one_bullet() -> None:
    prompt = build_system_prompt(
        persona=vp("ada"), mode="chat", memory=["first", "second\nline two", "  "], now=NOW
    )
    assert prompt.endswith("- first\n- second\n  line two")


def test_default_now_is_used_when_not_given() -> None:
    prompt = build_system_prompt(persona=vp("ada"), mode="chat")
    assert re.search(r"Current time: \d{4}-\d\d-\d\d \d\d:\d\d UTC\.", prompt)
