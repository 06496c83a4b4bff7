"""Long-term memory for VPs: which scopes a VP may read, automatic recall
before a turn, and the ``remember`` / ``recall`` tools.

Storage and full-text search are ``store/memory``'s; this module is the
policy on top:

- Scope rule: a VP reads the user's scope, the group's scope, its own
  private scope in that group and its own notes that carry across groups
  (``vp:<id>``), never another VP's, whatever a caller passes in.
- Ranking: a full-text hit's BM25 score, normalised so the best hit scores
  ``relevance_weight``, plus a recency bonus (at most 0.5, halving every two
  weeks) and a tag bonus (at most 2, for item tags the query names). Resident
  summaries written by the dream job are always candidates, matched or not.
- Budget: at most 8 items whose rendered lines fit in 1200 tokens.
- Fallback: when the search finds nothing, the two newest items of each scope
  (and the residents), so a VP still starts with some context.

The numbers follow Yeaft's pre-flow recall (tag bonus 2, recency bonus 0.5,
pick 8, fallback 2 per scope within 1200 tokens).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from engine.messages import estimate_tokens
from engine.tools.registry import MEMORY_MODES, Tool, ToolContext, ToolOutcome
from store.memory import (
    Kind,
    MemoryBackend,
    MemoryItem,
    group_scope,
    scope_label,
    scope_vp,
    user_scope,
    vp_notes_scope,
    vp_scope,
)
from store.memory.text import index_terms, normalise, query_terms

DAY = 86_400.0
MAX_TAGS = 8
MAX_TAG_CHARS = 40
MAX_TEXT_CHARS = 4_000


def scopes_for(user_id: str | None, group_id: str | None, vp_id: str | None) -> list[str]:
    """The scopes a VP reads: ``[user:<u>, group:<g>, group:<g>/vp:<vp>, vp:<vp>]``.

    A missing id leaves its scopes out (no user in a system turn, say); with
    all three given the result is exactly those four scopes. The last is the
    VP's own notes, recalled in every group it is in.
    """
    scopes: list[str] = []
    if user_id:
        scopes.append(user_scope(user_id))
    if group_id:
        scopes.append(group_scope(group_id))
        if vp_id:
            scopes.append(vp_scope(group_id, vp_id))
    if vp_id:
        scopes.append(vp_notes_scope(vp_id))
    return scopes


def allowed_scopes(scopes: Iterable[str], vp_id: str | None = None) -> list[str]:
    """``scopes`` without any VP-private scope the caller may not read.

    With ``vp_id`` only that VP's private scopes pass. Without it the owner
    is read off the list itself: if it names one VP's private scopes they
    pass, but a list naming several VPs cannot say whose turn this is, so
    none of their private scopes pass.
    """
    unique = list(dict.fromkeys(scopes))
    owners = {v for v in (scope_vp(s) for s in unique) if v is not None}
    if vp_id is None:
        vp_id = next(iter(owners)) if len(owners) == 1 else None
    return [s for s in unique if scope_vp(s) in (None, vp_id)]


@dataclass(slots=True)
class _Candidate:
    item: MemoryItem
    relevance: float = 0.0
    score: float = 0.0


def _recency_bonus(item: MemoryItem, now: float, most: float, half_life_s: float) -> float:
    age = max(0.0, now - item.updated_at)
    return most * 0.5 ** (age / half_life_s)


def _tag_bonus(item: MemoryItem, wanted: set[str], terms: set[str], most: float) -> float:
    """``most / 2`` per item tag that the query names, at most ``most``.

    A tag matches when it is one of the given tags, or when every term of
    it occurs among the query's terms ("release date" matches "when is the
    release date?").
    """
    matches = 0
    for tag in item.tags:
        tag_terms = set(index_terms(tag))
        if normalise(tag).strip() in wanted or (tag_terms and tag_terms <= terms):
            matches += 1
    return min(most, matches * most / 2)


async def _candidates(
    backend: MemoryBackend, scopes: list[str], query: str, pool: int
) -> list[_Candidate]:
    """Search hits with normalised relevance, plus residents; or the fallback."""
    found = await backend.recall_sources(scopes, query, pool, residents=8, recent=2)
    allowed = set(scopes)
    hits = [(item, score) for item, score in found.hits if item.scope in allowed]
    out: dict[str, _Candidate] = {}
    if hits:
        top = max(score for _, score in hits)
        for item, score in hits:
            out[item.id] = _Candidate(item, score / top if top > 0 else 1.0)
    else:
        for item in (i for batch in found.recent for i in batch):
            out[item.id] = _Candidate(item)
    for item in (i for batch in found.residents for i in batch):
        out.setdefault(item.id, _Candidate(item))
    return list(out.values())


async def recall(
    backend: MemoryBackend,
    scopes: list[str],
    query: str,
    *,
    now: float,
    vp_id: str | None = None,
    limit: int = 8,
    budget_tokens: int = 1200,
    recency_bonus_max: float = 0.5,
    tag_bonus_max: float = 2.0,
    query_tags: Iterable[str] | None = None,
    relevance_weight: float = 1.0,
    recency_half_life_s: float = 14 * DAY,
    pool: int = 50,
) -> list[MemoryItem]:
    """The memories worth putting in front of a VP for ``query``, best first.

    ``scopes`` pass through ``allowed_scopes(scopes, vp_id)`` first, so a
    foreign VP's private scope is never read. The result has at most
    ``limit`` items whose ``render_memory`` lines together fit in
    ``budget_tokens``; an item too large for what is left is skipped, not cut.
    """
    readable = allowed_scopes(scopes, vp_id)
    if not readable or limit <= 0 or budget_tokens <= 0:
        return []
    candidates = await _candidates(backend, readable, query, pool)
    wanted = {normalise(t).strip() for t in query_tags or ()}
    terms = set(query_terms(query))
    for c in candidates:
        c.score = (
            relevance_weight * c.relevance
            + _recency_bonus(c.item, now, recency_bonus_max, recency_half_life_s)
            + _tag_bonus(c.item, wanted, terms, tag_bonus_max)
        )
    candidates.sort(key=lambda c: (-c.score, -c.item.updated_at, c.item.id))
    picked: list[MemoryItem] = []
    left = budget_tokens
    for c in candidates:
        cost = estimate_tokens(render_line(c.item))
        if cost <= left:
            picked.append(c.item)
            left -= cost
            if len(picked) >= limit:
                break
    return picked


def render_line(item: MemoryItem) -> str:
    """One memory as one prompt line: ``- [group, 2026-05-01] text #tag``."""
    label = scope_label(item.scope) + (" summary" if item.kind == "resident" else "")
    day = datetime.fromtimestamp(item.updated_at, UTC).strftime("%Y-%m-%d")
    text = " ".join(item.text.split())
    tags = "".join(f" #{t.replace(' ', '-')}" for t in item.tags)
    return f"- [{label}, {day}] {text}{tags}"


def render_memory(items: Iterable[MemoryItem]) -> list[str]:
    """Short lines for the prompt builder, in the order given."""
    return [render_line(item) for item in items]


# -- tools ------------------------------------------------------------------


class RememberParams(BaseModel):
    text: str = Field(description="The fact to remember, in one or two plain sentences.")
    tags: list[str] = Field(
        default_factory=list, description="A few short topic words that help find it later."
    )
    scope: Literal["user", "group", "private", "vp"] = Field(
        default="private",
        description=(
            "Who may read it: 'user' for what this person told you (every VP, every "
            "group), 'group' for everyone in this group, 'private' for your own notes "
            "here, 'vp' for your own notes that follow you into every group you are in."
        ),
    )


class RecallParams(BaseModel):
    query: str = Field(description="What you want to remember, in your own words.")
    limit: int = Field(default=5, ge=1, le=8, description="How many memories at most.")


def _backend(ctx: ToolContext) -> MemoryBackend | None:
    backend = ctx.services.get("memory")
    return backend if isinstance(backend, MemoryBackend) else None


def _user_id(ctx: ToolContext) -> str | None:
    user = ctx.services.get("user_id")
    return user if isinstance(user, str) and user else None


def _target_scope(scope: str, ctx: ToolContext) -> str | ToolOutcome:
    """The scope ``remember`` writes to, or an error saying why it cannot."""
    try:
        if scope == "user":
            user = _user_id(ctx)
            if user is None:
                return ToolOutcome("no user is known in this conversation", is_error=True)
            return user_scope(user)
        if scope == "vp":
            if ctx.vp_id is None:
                return ToolOutcome("your notes need a VP identity", is_error=True)
            return vp_notes_scope(ctx.vp_id)
        if ctx.group_id is None:
            return ToolOutcome(f"{scope} memory needs a group", is_error=True)
        if scope == "group":
            return group_scope(ctx.group_id)
        if ctx.vp_id is None:
            return ToolOutcome("private memory needs a VP identity", is_error=True)
        return vp_scope(ctx.group_id, ctx.vp_id)
    except ValueError as exc:
        return ToolOutcome(str(exc), is_error=True)


def _clean_tags(tags: list[str]) -> list[str]:
    cleaned = (" ".join(normalise(t).split())[:MAX_TAG_CHARS] for t in tags)
    return list(dict.fromkeys(t for t in cleaned if t))[:MAX_TAGS]


async def _remember(params: RememberParams, ctx: ToolContext) -> ToolOutcome:
    backend = _backend(ctx)
    if backend is None:
        return ToolOutcome("memory is not available here", is_error=True)
    text = " ".join(params.text.split())
    if not text:
        return ToolOutcome("nothing to remember: the text is empty", is_error=True)
    if len(text) > MAX_TEXT_CHARS:
        return ToolOutcome(
            f"too long to remember ({len(text)} characters, at most {MAX_TEXT_CHARS}); "
            "keep the essential fact",
            is_error=True,
        )
    scope = _target_scope(params.scope, ctx)
    if isinstance(scope, ToolOutcome):
        return scope
    # A VP tends to repeat itself across turns; the same fact twice would
    # only crowd other memories out of the recall budget.
    for item, _ in await backend.search([scope], text, 5):
        if normalise(item.text) == normalise(text):
            return ToolOutcome(f"already remembered ({item.id}, {params.scope} memory)")
    source = f"vp:{ctx.vp_id}" if ctx.vp_id else None
    # The dream job writes resident summaries through this same tool.
    kind: Kind = "resident" if ctx.services.get("memory_kind") == "resident" else "fact"
    item = await backend.add(
        MemoryItem(scope=scope, text=text, tags=_clean_tags(params.tags), source=source, kind=kind)
    )
    return ToolOutcome(f"remembered ({item.id}, {params.scope} memory)")


async def _recall(params: RecallParams, ctx: ToolContext) -> ToolOutcome:
    backend = _backend(ctx)
    if backend is None:
        return ToolOutcome("memory is not available here", is_error=True)
    try:
        scopes = scopes_for(_user_id(ctx), ctx.group_id, ctx.vp_id)
    except ValueError as exc:
        return ToolOutcome(str(exc), is_error=True)
    items = await recall(
        backend, scopes, params.query, now=time.time(), vp_id=ctx.vp_id, limit=params.limit
    )
    if not items:
        return ToolOutcome("no memories found")
    return ToolOutcome("\n".join(render_memory(items)))


def memory_tools() -> list[Tool]:
    """The ``remember`` and ``recall`` tools; they need ``ctx.services["memory"]``."""
    return [
        Tool(
            "remember",
            "Save a fact, preference or decision for later conversations. Use it for "
            "what will still matter next week, not for small talk.",
            RememberParams,
            _remember,
            modes=MEMORY_MODES,
            timeout=15.0,
        ),
        Tool(
            "recall",
            "Search your long-term memory (this user, this group and your own notes).",
            RecallParams,
            _recall,
            modes=MEMORY_MODES,
            timeout=15.0,
        ),
    ]
