"""Long-term memory: both backends, the recall policy and the memory tools.

Every test taking ``memory_backend`` runs once on the embedded SQLite backend
and once on the Redis backend (``tests/fixtures/memory.py``).
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from engine.memory import (
    allowed_scopes,
    memory_tools,
    recall,
    render_line,
    render_memory,
    scopes_for,
)
from engine.messages import ToolCall, estimate_tokens
from engine.tools.registry import ToolContext, ToolRegistry
from store import StoreConfig
from store.memory import (
    MemoryBackend,
    MemoryItem,
    scope_label,
    scope_vp,
    vp_notes_scope,
    vp_scope,
)
from store.memory.redis_backend import RedisMemory
from store.memory.text import fts_query, index_terms, query_terms, stem
from tests.fixtures.memory import CORPUS, QUERIES

NOW = 1_750_000_000.0  # a fixed, past "now" (June 2025): recency is reproducible
DAY = 86_400.0
USER, GROUP = "user:maya", "group:nimbus"
STEVE = scopes_for("maya", "nimbus", "steve")


def item(
    scope: str,
    text: str,
    *,
    tags: list[str] | None = None,
    age_days: float = 1.0,
    kind: str = "fact",
    id: str | None = None,
) -> MemoryItem:
    data: dict[str, Any] = {"scope": scope, "text": text, "tags": tags or [], "kind": kind}
    data["created_at"] = NOW - age_days * DAY
    if id is not None:
        data["id"] = id
    return MemoryItem.model_validate(data)


# -- backend contract -------------------------------------------------------


async def test_add_get_update_delete_list(memory_backend: MemoryBackend) -> None:
    a = await memory_backend.add(item(GROUP, "We deploy on Tuesdays", tags=["deploy"]))
    got = await memory_backend.get(a.id)
    assert got == a and got.updated_at == got.created_at

    changed = await memory_backend.update(a.id, text="We deploy on Thursdays", tags=["ops"])
    assert changed is not None and changed.text == "We deploy on Thursdays"
    assert changed.tags == ["ops"] and changed.updated_at > a.updated_at
    assert await memory_backend.get(a.id) == changed
    assert await memory_backend.update("mem_missing", text="x") is None

    b = await memory_backend.add(item(GROUP, "Second", age_days=0.5))
    r = await memory_backend.add(item(GROUP, "Summary", kind="resident", age_days=0.1))
    await memory_backend.add(item(USER, "Other scope"))
    assert [i.id for i in await memory_backend.list(GROUP)] == [r.id, b.id, a.id]
    assert [i.id for i in await memory_backend.list(GROUP, limit=2)] == [r.id, b.id]
    assert [i.id for i in await memory_backend.list(GROUP, kind="resident")] == [r.id]
    assert await memory_backend.list("group:empty") == []

    assert await memory_backend.delete(a.id) is True
    assert await memory_backend.delete(a.id) is False
    assert await memory_backend.get(a.id) is None
    assert [i.id for i in await memory_backend.list(GROUP)] == [r.id, b.id]


async def test_duplicate_id_is_refused(memory_backend: MemoryBackend) -> None:
    await memory_backend.add(item(GROUP, "one", id="mem_fixed"))
    with pytest.raises(ValueError, match="already exists"):
        await memory_backend.add(item(GROUP, "two", id="mem_fixed"))
    assert (await memory_backend.get("mem_fixed")).text == "one"  # type: ignore[union-attr]


async def test_index_follows_update_and_delete(memory_backend: MemoryBackend) -> None:
    a = await memory_backend.add(item(GROUP, "The cat sleeps on the keyboard"))
    await memory_backend.update(a.id, text="The dog guards the server room")
    assert await memory_backend.search([GROUP], "cat keyboard", 5) == []
    assert [i.id for i, _ in await memory_backend.search([GROUP], "dog", 5)] == [a.id]
    await memory_backend.update(a.id, tags=["kennel"])
    assert [i.id for i, _ in await memory_backend.search([GROUP], "kennel", 5)] == [a.id]
    await memory_backend.delete(a.id)
    assert await memory_backend.search([GROUP], "dog kennel", 5) == []


async def test_search_ranks_the_exact_topic_first(memory_backend: MemoryBackend) -> None:
    await memory_backend.add(item(GROUP, "Lunch is at noon on most days"))
    await memory_backend.add(item(GROUP, "The database migration tool is Alembic"))
    target = await memory_backend.add(
        item(
            GROUP,
            "Database backups run nightly and database restores are tested monthly",
            tags=["backups"],
        )
    )
    await memory_backend.add(item(GROUP, "Monthly reports go to finance"))
    hits = await memory_backend.search([GROUP], "How are database backups handled?", 10)
    assert hits[0][0].id == target.id
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(hits))
    assert await memory_backend.search([USER], "database backups", 10) == []


HOSTILE = [
    "",
    "   ",
    '"',
    '""',
    "'",
    "what's \"up",
    "AND",
    "OR NOT",
    "NEAR(a b, 3)",
    "a AND OR b",
    "(",
    ")))",
    "*",
    "data*",
    "^start",
    "col:value",
    "text:secret",
    "-minus",
    "+plus",
    "{text tags}: x",
    "a - b",
    "\\",
    "%_%",
    "'; DROP TABLE memory_items; --",
    "\x00",
    "🙂🔥",
    "x" * 5000,
    " ".join(["word"] * 500),
    '数据"库*',
    "NOT NOT NOT",
    "[brackets]",
]


async def test_hostile_queries_never_raise(memory_backend: MemoryBackend) -> None:
    await memory_backend.add(item(GROUP, "Table tennis at five; the data team plays"))
    for query in HOSTILE:
        hits = await memory_backend.search([GROUP, USER], query, 5)
        assert isinstance(hits, list), query
    hits = await memory_backend.search([GROUP], 'data" OR "table', 5)
    assert len(hits) == 1


async def test_chinese_text_is_findable(memory_backend: MemoryBackend) -> None:
    zh = await memory_backend.add(item(GROUP, "上海团队负责数据分析看板，负责人是王磊。"))
    mixed = await memory_backend.add(item(GROUP, "我们决定用PostgreSQL做主数据库"))
    await memory_backend.add(item(GROUP, "The dashboard colours are teal and grey"))
    assert (await memory_backend.search([GROUP], "谁负责看板？", 5))[0][0].id == zh.id
    assert (await memory_backend.search([GROUP], "王磊", 5))[0][0].id == zh.id
    assert (await memory_backend.search([GROUP], "数据库", 5))[0][0].id == mixed.id
    assert (await memory_backend.search([GROUP], "postgresql", 5))[0][0].id == mixed.id
    assert await memory_backend.search([GROUP], "东京", 5) == []


async def test_two_handles_share_one_store(memory_backend: MemoryBackend, tmp_path: Path) -> None:
    # Two handles stand in for two processes: writes from both interleave and
    # each sees the other's.
    if isinstance(memory_backend, RedisMemory):
        other: MemoryBackend = RedisMemory(memory_backend.url, prefix=memory_backend.prefix)
    else:
        other = StoreConfig("embedded", tmp_path).open_memory()
    try:
        await asyncio.gather(
            *(
                h.add(item(GROUP, f"note {n} about shared pencils"))
                for n in range(20)
                for h in (memory_backend, other)
            )
        )
        assert len(await other.list(GROUP, limit=100)) == 40
        assert len(await memory_backend.search([GROUP], "pencils", 100)) == 40
    finally:
        await other.close()


# -- scopes -----------------------------------------------------------------


def test_scopes_for_and_allowed_scopes() -> None:
    assert STEVE == ["user:maya", "group:nimbus", "group:nimbus/vp:steve", "vp:steve"]
    assert scopes_for(None, "g", "v") == ["group:g", "group:g/vp:v", "vp:v"]
    # A VP's own notes are read wherever it is, even outside any group.
    assert scopes_for("maya", None, "v") == ["user:maya", "vp:v"]
    linus = vp_scope("nimbus", "linus")
    assert scope_vp(linus) == "linus" and scope_vp(GROUP) is None
    assert scope_vp(vp_notes_scope("linus")) == "linus"
    assert scope_label(vp_notes_scope("linus")) == "vp" and scope_label(linus) == "private"
    assert allowed_scopes([*STEVE, linus, "vp:linus"], "steve") == STEVE
    assert allowed_scopes([*STEVE, linus]) == [USER, GROUP]  # whose turn? neither
    assert allowed_scopes(STEVE) == STEVE
    with pytest.raises(ValueError):
        scopes_for("maya/vp:linus", "g", "v")


async def test_a_vp_never_recalls_another_vps_private_scope(
    memory_backend: MemoryBackend,
) -> None:
    for scope, who in [
        (USER, "user"),
        (GROUP, "group"),
        (vp_scope("nimbus", "steve"), "steve"),
        (vp_scope("nimbus", "linus"), "linus"),
        (vp_notes_scope("linus"), "linus notes"),
        ("user:bob", "bob"),
    ]:
        await memory_backend.add(item(scope, f"The launch codename is Falcon ({who} note)"))
    foreign = [*STEVE, vp_scope("nimbus", "linus"), "group:nimbus/vp:linus", "vp:linus"]
    got = await recall(memory_backend, foreign, "launch codename", now=NOW, vp_id="steve")
    assert sorted(i.text.split("(")[1] for i in got) == ["group note)", "steve note)", "user note)"]
    got = await recall(memory_backend, foreign, "launch codename", now=NOW)
    assert sorted(i.scope for i in got) == [GROUP, USER]


# -- recall policy ----------------------------------------------------------


async def test_recall_picks_at_most_eight(memory_backend: MemoryBackend) -> None:
    for n in range(12):
        await memory_backend.add(item(GROUP, f"Rocket fact number {n}"))
    got = await recall(memory_backend, STEVE, "rocket facts", now=NOW)
    assert len(got) == 8
    assert len(await recall(memory_backend, STEVE, "rocket", now=NOW, limit=3)) == 3


async def test_recall_respects_the_token_budget(memory_backend: MemoryBackend) -> None:
    long = "The comet report says " + "orbit data and telemetry " * 40
    for _ in range(5):
        await memory_backend.add(item(GROUP, long))
    short = await memory_backend.add(item(GROUP, "comet is small", age_days=30))
    got = await recall(memory_backend, STEVE, "comet", now=NOW, budget_tokens=400)
    cost = sum(estimate_tokens(line) for line in render_memory(got))
    assert cost <= 400 and 1 <= len(got) < 6
    # An item that does not fit is skipped, and a smaller one still gets in.
    assert short.id in {i.id for i in got}


async def test_recency_orders_equally_relevant_items(memory_backend: MemoryBackend) -> None:
    old = await memory_backend.add(item(GROUP, "The office plant needs water", age_days=20))
    new = await memory_backend.add(item(GROUP, "The office plant needs water", age_days=1))
    got = await recall(memory_backend, STEVE, "office plant", now=NOW)
    assert [i.id for i in got] == [new.id, old.id]


async def test_tag_bonus(memory_backend: MemoryBackend) -> None:
    plain = await memory_backend.add(item(GROUP, "Kiosk firmware notes", age_days=1))
    tagged = await memory_backend.add(
        item(GROUP, "Kiosk firmware notes", tags=["hardware"], age_days=9)
    )
    got = await recall(memory_backend, STEVE, "kiosk firmware", now=NOW)
    assert got[0].id == plain.id  # equal text, so recency decides
    got = await recall(memory_backend, STEVE, "kiosk firmware", now=NOW, query_tags=["Hardware"])
    assert got[0].id == tagged.id
    got = await recall(memory_backend, STEVE, "kiosk hardware", now=NOW)
    assert got[0].id == tagged.id


async def test_empty_search_falls_back_to_recent(memory_backend: MemoryBackend) -> None:
    for n in range(4):
        await memory_backend.add(item(GROUP, f"group thing {n}", age_days=n + 1))
        await memory_backend.add(item(USER, f"user thing {n}", age_days=n + 1.5))
    got = await recall(memory_backend, STEVE, "zeppelin", now=NOW)
    assert [i.text for i in got] == [
        "group thing 0",
        "user thing 0",
        "group thing 1",
        "user thing 1",
    ]
    assert len(await recall(memory_backend, STEVE, "", now=NOW)) == 4
    assert await recall(memory_backend, STEVE, "zeppelin", now=NOW, budget_tokens=3) == []


async def test_resident_summaries_are_always_eligible(memory_backend: MemoryBackend) -> None:
    summary = await memory_backend.add(
        item(vp_scope("nimbus", "steve"), "Summary: the team ships weekly", kind="resident")
    )
    await memory_backend.add(item(GROUP, "Kayak trip in August"))
    got = await recall(memory_backend, STEVE, "kayak", now=NOW)
    assert [i.id for i in got][1:] == [summary.id]
    assert render_line(summary).startswith("- [private summary, 2025-06-")


async def test_recall_sources_match_the_reads_they_stand_for(
    memory_backend: MemoryBackend,
) -> None:
    """A backend's one-trip ``recall_sources`` returns what search and list return."""
    summary = await memory_backend.add(
        item(vp_scope("nimbus", "steve"), "Summary: the team ships weekly", kind="resident")
    )
    for n in range(3):
        await memory_backend.add(item(GROUP, f"kayak trip {n}", age_days=n + 1))
    found = await memory_backend.recall_sources(STEVE, "kayak", 50, residents=8, recent=2)
    assert found.hits == await memory_backend.search(STEVE, "kayak", 50)
    assert found.residents == [
        await memory_backend.list(s, kind="resident", limit=8) for s in STEVE
    ]
    assert [i.id for batch in found.residents for i in batch] == [summary.id]
    assert found.recent == []
    nothing = await memory_backend.recall_sources(STEVE, "zeppelin", 50, residents=8, recent=2)
    assert nothing.hits == []
    assert nothing.recent == [await memory_backend.list(s, limit=2) for s in STEVE]
    # The user's scope is empty, the group's gives its two newest, the VP's its
    # summary; its notes across groups are empty.
    assert [len(batch) for batch in nothing.recent] == [0, 2, 1, 0]


# -- tools --------------------------------------------------------------------


def ctx_for(
    backend: MemoryBackend | None,
    vp: str,
    group: str,
    user: str | None = "maya",
) -> ToolContext:
    services: dict[str, object] = {}
    if backend is not None:
        services["memory"] = backend
    if user is not None:
        services["user_id"] = user
    return ToolContext(conversation_id=f"{group}:{vp}", vp_id=vp, group_id=group, services=services)


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[str, bool]:
    outcome = await ToolRegistry(memory_tools()).execute(
        ToolCall(id="c1", name=name, arguments=args), ctx
    )
    return outcome.content, outcome.is_error


async def test_remember_and_recall_tools(memory_backend: MemoryBackend) -> None:
    steve = ctx_for(memory_backend, "steve", "nimbus")
    linus = ctx_for(memory_backend, "linus", "nimbus")
    elsewhere = ctx_for(memory_backend, "linus", "orion")

    text, err = await call(
        steve, "remember", text="My hunch: the launch slips a week", tags=["Launch"]
    )
    assert not err and "private memory" in text
    text, err = await call(steve, "remember", text="Maya takes her coffee black", scope="user")
    assert not err
    text, err = await call(steve, "remember", text="The launch is on June 12", scope="group")
    assert not err
    text, err = await call(steve, "remember", text="The launch  is on June 12", scope="group")
    assert not err and text.startswith("already remembered")

    text, _ = await call(steve, "recall", query="launch")
    assert "hunch" in text and "June 12" in text and "#launch" in text
    text, _ = await call(linus, "recall", query="launch hunch")
    assert "June 12" in text and "hunch" not in text
    # The user's scope travels to another group; the group's does not.
    text, _ = await call(elsewhere, "recall", query="how does Maya take her coffee?")
    assert "black" in text and "June 12" not in text
    text, _ = await call(ctx_for(memory_backend, "kent", "orion"), "recall", query="zebra", limit=1)
    assert "coffee" in text  # nothing matches: the newest memory as a fallback


async def test_a_vps_own_notes_follow_it_into_every_group(memory_backend: MemoryBackend) -> None:
    steve = ctx_for(memory_backend, "steve", "nimbus")
    text, err = await call(steve, "remember", text="I review designs with sketches", scope="vp")
    assert not err and "vp memory" in text
    (stored,) = await memory_backend.list(vp_notes_scope("steve"))
    assert stored.text == "I review designs with sketches"
    # Another group, another person: steve's notes come along, nobody else reads them.
    elsewhere = ctx_for(memory_backend, "steve", "orion", user="bob")
    text, _ = await call(elsewhere, "recall", query="how do I review designs?")
    assert "sketches" in text and "[vp," in text
    text, _ = await call(ctx_for(memory_backend, "linus", "nimbus"), "recall", query="sketches")
    assert "sketches" not in text


async def test_tool_errors_are_outcomes(memory_backend: MemoryBackend) -> None:
    ok = ctx_for(memory_backend, "steve", "nimbus")
    cases: list[tuple[ToolContext, str, dict[str, Any], str]] = [
        (ctx_for(None, "steve", "nimbus"), "remember", {"text": "x"}, "not available"),
        (ctx_for(None, "steve", "nimbus"), "recall", {"query": "x"}, "not available"),
        (ok, "remember", {"text": "  \n "}, "empty"),
        (ok, "remember", {"text": "x" * 5000}, "too long"),
        (ok, "remember", {"text": "x", "scope": "everyone"}, "invalid arguments"),
        (ok, "recall", {"query": "x", "limit": 50}, "invalid arguments"),
        (
            ctx_for(memory_backend, "steve", "nimbus", user=None),
            "remember",
            {"text": "x", "scope": "user"},
            "no user",
        ),
        (ctx_for(memory_backend, "st/eve", "nimbus"), "remember", {"text": "x"}, "invalid vp"),
    ]
    for ctx, name, args, expected in cases:
        text, err = await call(ctx, name, **args)
        assert err and expected in text, (name, args, text)
    assert await memory_backend.list(GROUP) == []


# -- tokeniser and factory --------------------------------------------------------


def test_text_helpers() -> None:
    assert {stem(w) for w in ["deadline", "deadlines"]} == {"deadlin"}
    assert {stem(w) for w in ["decide", "decided", "deciding"]} == {"decid"}
    assert {stem(w) for w in ["prefer", "preferred", "preference", "prefers"]} == {"prefer"}
    assert index_terms("上海团队 API") == ["上海", "海团", "团队", "api"]
    assert query_terms("what is the plan?") == ["plan"]
    assert query_terms("what is it") == ["what", "is", "it"]
    assert fts_query("?!") is None
    assert fts_query('say "NEAR" (x*)') == '"say" OR "near" OR "x"'


def test_open_memory_rejects_unknown_urls(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported store URL"):
        StoreConfig("postgres://x", tmp_path).open_memory()


# -- recall quality -----------------------------------------------------------


async def test_recall_quality_on_a_fixed_corpus(
    memory_backend: MemoryBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    """50 memories of a fictional team, 20 questions paraphrasing them: the
    answer must be in the top 3 for at least 18 (see ``tests/fixtures/memory.py``)."""
    for n, (id_, scope, text, tags) in enumerate(CORPUS):
        # Ages spread over two months so the recency bonus is in play.
        await memory_backend.add(item(scope, text, tags=tags, id=id_, age_days=(n * 7) % 60))
    misses = []
    for query, expected in QUERIES:
        got = [i.id for i in await recall(memory_backend, STEVE, query, now=NOW)]
        if expected not in got[:3]:
            misses.append(f"{query!r}: expected {expected}, got {got[:3]}")
    hits = len(QUERIES) - len(misses)
    with capsys.disabled():
        print(f"\nrecall@3 [{type(memory_backend).__name__}]: {hits}/{len(QUERIES)}")
        for miss in misses:
            print(f"  miss {miss}")
    assert hits >= 18, misses
