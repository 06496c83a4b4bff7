"""The memory data model, the scope grammar and the backend contract.

This module sits in ``store/`` and imports nothing from ``engine/``: the
engine's recall policy (``engine/memory.py``) is built on top of it, never the
other way round.

Scopes are plain strings so both backends can key on them directly:

- ``user:<userId>``: what a person told any VP, visible in every group;
- ``group:<groupId>``: shared by every VP of one group;
- ``group:<groupId>/vp:<vpId>``: one VP's private notes for one group.
"""

from __future__ import annotations

import asyncio
import builtins
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

# "fact" is what a VP writes with ``remember``; "resident" is a summary the
# dream job writes and recall always considers.
Kind = Literal["fact", "resident"]
KINDS: tuple[str, ...] = ("fact", "resident")


def new_memory_id() -> str:
    """A time-ordered unique id, so ids sort roughly by creation."""
    return f"mem_{time.time_ns():x}{uuid.uuid4().hex[:8]}"


class MemoryItem(BaseModel):
    """One remembered piece of text in one scope."""

    id: str = Field(default_factory=new_memory_id)
    scope: str
    text: str
    tags: list[str] = Field(default_factory=list)
    kind: Kind = "fact"
    # 0..1, how much the writer cares; kept for the dream job, which decides
    # what to fold into resident summaries. Recall does not rank on it.
    importance: float = 0.5
    # Who wrote it: "vp:<id>", "user:<id>", "dream", ...
    source: str | None = None
    created_at: float = Field(default_factory=time.time)
    updated_at: float = 0.0

    def model_post_init(self, __context: object) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at


# -- scopes ---------------------------------------------------------------


def _check_id(what: str, value: str) -> str:
    # "/" and ":" are the scope grammar's separators; an id carrying them
    # could forge another scope (a user named "x/vp:linus", say).
    if not value or "/" in value or ":" in value:
        raise ValueError(f"invalid {what} id for a memory scope: {value!r}")
    return value


def user_scope(user_id: str) -> str:
    return f"user:{_check_id('user', user_id)}"


def group_scope(group_id: str) -> str:
    return f"group:{_check_id('group', group_id)}"


def vp_scope(group_id: str, vp_id: str) -> str:
    return f"{group_scope(group_id)}/vp:{_check_id('vp', vp_id)}"


def vp_notes_scope(vp_id: str) -> str:
    """A VP's own notes that follow it into every group it is in."""
    return f"vp:{_check_id('vp', vp_id)}"


def scope_vp(scope: str) -> str | None:
    """The VP a private scope belongs to, or ``None`` for a shared scope."""
    for part in scope.split("/"):
        if part.startswith("vp:"):
            return part[3:]
    return None


def scope_label(scope: str) -> str:
    """A short human label: ``user``, ``group``, ``private`` or ``vp`` (notes across groups)."""
    if scope.startswith("vp:"):
        return "vp"
    if scope_vp(scope) is not None:
        return "private"
    return scope.split(":", 1)[0]


# -- backend contract -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallSources:
    """What recall ranks, read together (``MemoryBackend.recall_sources``)."""

    hits: builtins.list[tuple[MemoryItem, float]]
    # Per scope, in the order asked: its resident summaries, and (only when
    # nothing matched) its newest items.
    residents: builtins.list[builtins.list[MemoryItem]]
    recent: builtins.list[builtins.list[MemoryItem]]


class MemoryBackend(ABC):
    """Storage and full-text search for memory items.

    Both backends implement every method; one parametrised test suite runs
    against both. ``search`` must never raise on user-typed text.
    """

    @abstractmethod
    async def add(self, item: MemoryItem) -> MemoryItem:
        """Store a new item; raises ``ValueError`` if its id is taken."""

    @abstractmethod
    async def update(
        self, item_id: str, text: str | None = None, tags: builtins.list[str] | None = None
    ) -> MemoryItem | None:
        """Change text and/or tags; ``None`` if there is no such item."""

    @abstractmethod
    async def delete(self, item_id: str) -> bool:
        """Remove an item; ``False`` if there was none."""

    @abstractmethod
    async def get(self, item_id: str) -> MemoryItem | None: ...

    @abstractmethod
    async def list(
        self, scope: str, kind: str | None = None, limit: int = 50
    ) -> builtins.list[MemoryItem]:
        """Items of one scope, newest first."""

    async def recall_sources(
        self, scopes: builtins.list[str], query: str, pool: int, residents: int, recent: int
    ) -> RecallSources:
        """Up to ``pool`` search hits for ``query``, each scope's ``residents`` newest
        resident items and, when nothing matched, each scope's ``recent`` newest items.

        Backends that can read them in one round trip override this.
        """
        hits = await self.search(scopes, query, pool) if query.strip() else []
        kept = await asyncio.gather(
            *(self.list(s, kind="resident", limit=residents) for s in scopes)
        )
        newest = [] if hits else await asyncio.gather(*(self.list(s, limit=recent) for s in scopes))
        return RecallSources(hits, builtins.list(kept), builtins.list(newest))

    @abstractmethod
    async def search(
        self, scopes: builtins.list[str], query: str, limit: int = 50
    ) -> builtins.list[tuple[MemoryItem, float]]:
        """Full-text hits in any of ``scopes``, best first, with a BM25 score
        (higher is better; only comparable within one result list)."""

    @abstractmethod
    async def close(self) -> None: ...
