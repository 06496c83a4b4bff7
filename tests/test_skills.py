"""Skills: files and the library, retrieval, and the text helpers they use.

The model selectors and ephemeral guidance are in ``tests/test_skills_selection.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from protocol.tasks import SkillSource
from team.skills import (
    BM25Retriever,
    EmbeddingRetriever,
    SkillFileError,
    SkillLibrary,
    parse_skill,
    render_skill,
    slugify,
    strip_front_matter,
    tokenize,
)
from team.text import TRUNCATED, cut_at_line, excerpt, is_chinese, language_name, one_line
from tests.skill_helpers import skill

GOOD_FILE = """---
name: weekly-report
description: Write a weekly status report.
tools: [read_file, web_fetch]
---

# Weekly report

1. Gather what changed.
"""


# --- files ------------------------------------------------------------------


def test_parse_skill_reads_front_matter_and_body() -> None:
    parsed = parse_skill(GOOD_FILE, SkillSource.DATA, version="7")
    assert parsed.name == "weekly-report"
    assert parsed.description == "Write a weekly status report."
    assert parsed.tools == ["read_file", "web_fetch"]
    assert parsed.content == "# Weekly report\n\n1. Gather what changed."
    assert (parsed.source, parsed.version) == (SkillSource.DATA, "7")


def test_render_and_parse_round_trip() -> None:
    original = skill(
        "risk-check",
        "Check risks: list them, rate them.",
        "## Steps\n\n- one\n- two: with a colon\n\n---\n\nafter a rule",
        tools=["web_fetch"],
        source=SkillSource.LEARNED,
        version="3",
    )
    text = render_skill(original)
    assert text.startswith("---\nname: risk-check\n")
    assert parse_skill(text, SkillSource.LEARNED, version="3") == original
    assert strip_front_matter(text) == original.content


def test_optional_tools_and_unknown_fields() -> None:
    text = "---\nname: a1\ndescription: d\nlicense: MIT\n---\nbody\n"
    parsed = parse_skill(text, SkillSource.BUILTIN)
    assert parsed.tools == []
    assert parsed.version == "1"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("no front matter", "missing front matter"),
        ("---\nname: [unclosed\n---\nbody", "not valid YAML"),
        ("---\n- a\n- b\n---\nbody", "mapping"),
        ("---\ndescription: d\n---\nbody", "'name' is required"),
        ("---\nname: Bad Name\ndescription: d\n---\nbody", "lowercase"),
        (f"---\nname: {'a' * 65}\ndescription: d\n---\nbody", "at most 64"),
        ("---\nname: ok\n---\nbody", "'description' is required"),
        ("---\nname: ok\ndescription: d\ntools: web_fetch\n---\nbody", "'tools' must be a list"),
        ("---\nname: ok\ndescription: d\ntools: [1]\n---\nbody", "'tools' must be a list"),
        ("---\nname: ok\ndescription: d\n---\n\n  \n", "no text after"),
    ],
)
def test_bad_files_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(SkillFileError, match=words):
        parse_skill(text, SkillSource.DATA)


def test_strip_front_matter_leaves_plain_text() -> None:
    assert strip_front_matter("  just text \n") == "just text"


def test_slugify() -> None:
    assert slugify("  Launch Plan: Q3 (EU)! ") == "launch-plan-q3-eu"
    assert slugify("周报") == ""
    assert len(slugify("word " * 40)) <= 64


# --- library ----------------------------------------------------------------


def test_builtins_load_and_are_valid() -> None:
    library = SkillLibrary.load(None)
    assert library.errors == []
    assert {"launch-plan", "risk-review", "synthesis"} <= set(library.names())
    assert 5 <= len(library) <= 6
    for item in library.all():
        assert item.source == SkillSource.BUILTIN
        assert 15 <= len(item.content.splitlines()) <= 40
        assert len(item.version) == 8  # a hash of the file: an edit changes it


def test_library_precedence_and_bad_files_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    folder.mkdir()
    (folder / "risk-review.md").write_text(
        "---\nname: risk-review\ndescription: Our own review.\n---\nOur steps.\n"
    )
    (folder / "weekly.md").write_text(GOOD_FILE)
    (folder / "broken.md").write_text("no front matter here")
    (folder / "notes.txt").write_text("ignored: not markdown")
    learned = skill("weekly-report", "Learned version.", source=SkillSource.LEARNED)

    library = SkillLibrary.load(tmp_path, learned=[learned])

    review = library.get("risk-review")
    assert review is not None and review.source == SkillSource.DATA
    assert review.description == "Our own review."
    assert library.get("weekly-report") == learned
    assert library.get("launch-plan") is not None  # built-ins still there
    assert len(library.errors) == 1 and "broken.md" in library.errors[0]
    assert library.names() == sorted(library.names())
    assert [s.name for s in library.all()] == library.names()
    assert "synthesis" in library and "nope" not in library
    assert library.get("nope") is None


def test_library_without_a_skills_folder(tmp_path: Path) -> None:
    assert SkillLibrary.load(tmp_path).names() == SkillLibrary.load(None).names()


# --- retrieval --------------------------------------------------------------

CHINESE = [
    skill("weekly-report-zh", "撰写周报和工作总结", "汇总本周完成的工作、问题和下周计划。"),
    skill("competitor-zh", "竞品分析与定价对比", "列出主要竞争对手的产品、价格和优劣势。"),
]


def test_tokenize_words_and_cjk() -> None:
    assert tokenize("The Launch-Plan, v2!") == ["launch", "plan", "v2"]
    assert tokenize("发布计划") == ["发", "发布", "布", "布计", "计", "计划", "划"]
    assert "的" not in tokenize("我的计划")


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("plan the product launch timeline and channels", "launch-plan"),
        ("what could go wrong with this proposal? rate the risks", "risk-review"),
        ("estimate the market size and competitors", "market-analysis"),
        ("combine the team members' outputs into one answer", "synthesis"),
        ("write headlines and landing page copy", "messaging-copy"),
        ("compare architecture options for the new service", "technical-design"),
        ("帮我写一份本周的周报", "weekly-report-zh"),
        ("做一个竞品定价分析", "competitor-zh"),
    ],
)
def test_bm25_ranks_the_right_skill_first(query: str, best: str) -> None:
    skills = [*SkillLibrary.load(None).all(), *CHINESE]
    ranked = BM25Retriever().ranked(query, skills, 3)
    assert ranked and ranked[0].name == best
    assert len(ranked) <= 3


@pytest.mark.parametrize("query", ["what is the weather like tomorrow", "天气", "", "the of and"])
def test_bm25_returns_nothing_for_unrelated_queries(query: str) -> None:
    skills = [*SkillLibrary.load(None).all(), *CHINESE]
    assert BM25Retriever().ranked(query, skills, 8) == []


def test_bm25_name_and_description_outweigh_body_and_ties_go_by_name() -> None:
    in_body = skill("aaa", "Something else.", "budget budget")
    in_name = skill("zzz-budget", "Plan a budget.", "Steps.")
    assert [s.name for s in BM25Retriever().ranked("budget", [in_body, in_name], 5)] == [
        "zzz-budget",
        "aaa",
    ]
    twins = [skill("b-twin", "Same words."), skill("a-twin", "Same words.")]
    assert [s.name for s in BM25Retriever().ranked("words", twins, 5)] == ["a-twin", "b-twin"]
    assert BM25Retriever().ranked("words", twins, 0) == []


class ToyEmbedder:
    """Counts three keywords: a vector per text, and how many texts it embedded."""

    AXES = ("launch", "risk", "market")

    def __init__(self) -> None:
        self.embedded = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return [[float(text.lower().count(axis)) for axis in self.AXES] for text in texts]


async def test_embedding_retriever_ranks_by_cosine_and_caches_documents() -> None:
    embedder = ToyEmbedder()
    retriever = EmbeddingRetriever(embedder)
    skills = [
        skill("launching", "launch launch"),
        skill("risky", "risk"),
        skill("mixed", "launch and risk"),
        skill("unrelated", "nothing here"),
    ]
    ranked = await retriever.rank("launch", skills, 5)
    assert [s.name for s in ranked] == ["launching", "mixed"]  # zero similarity is left out
    assert [s.name for s in await retriever.rank("risk", skills, 1)] == ["risky"]
    assert embedder.embedded == 2 + len(skills)  # two queries; each document once
    assert await retriever.rank("", skills, 3) == []


# --- text helpers ---------------------------------------------------------------


def test_excerpt_and_one_line() -> None:
    assert excerpt("  short  ", 10) == "short"
    assert excerpt("abcdefghij", 5) == "abcd…" and len(excerpt("x" * 99, 7)) == 7
    assert one_line("a\n  b\tc  ", 10) == "a b c"
    assert one_line("word " * 100, 12) == "word word w…"


def test_cut_at_line() -> None:
    text = "first line\nsecond line\nthird line"
    assert cut_at_line(text, len(text)) == text
    assert cut_at_line(text, 40) == text
    cut = cut_at_line(text, 30)
    assert cut == f"first line\n{TRUNCATED}" and len(cut) <= 30
    assert cut_at_line("x" * 100, 20) == "x" * 7 + "\n" + TRUNCATED
    assert cut_at_line("x" * 100, 5) == TRUNCATED[:5]


@pytest.mark.parametrize(
    ("code", "name", "chinese"),
    [
        ("en", "English", False),
        ("zh", "Chinese", True),
        ("zh-CN", "Chinese", True),
        ("ZH_tw", "Chinese", True),
        ("fr", "fr", False),
        ("", "English", False),
    ],
)
def test_language_name(code: str, name: str, chinese: bool) -> None:
    assert language_name(code) == name and is_chinese(code) is chinese
