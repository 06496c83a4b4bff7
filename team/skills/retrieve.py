"""Recall: which skills of a library are worth showing a selector for a query.

A :class:`Retriever` only narrows a library down to the ``k`` most related
skills; the model-backed selectors (:mod:`team.skills.select`) make the
choice among them. Two retrievers:

- :class:`BM25Retriever`, Okapi BM25 with no model: a skill's name counts
  three times, its description twice, its tools and body once. Text is
  lowercased and split into ASCII words, and CJK text into single characters
  and pairs of neighbouring characters, so a Chinese query finds a Chinese
  skill without a word segmenter. Common words of either language are not
  counted, so a query that shares only "the" or "的" with a skill finds
  nothing. Only skills with a positive score come back, best first, equal
  scores by name.
- :class:`EmbeddingRetriever`, cosine similarity over vectors from an
  :class:`Embedder` (an embedding model the deployment configures:
  ``embedding_model``, an OpenAI-compatible ``/embeddings`` endpoint, see
  :mod:`engine.embeddings`). It remembers each document's vector by the
  text's hash, so a library is embedded once, not once per query. When the
  embedding model fails, it ranks with its fallback (BM25) instead.

Both are deterministic for a given library and query. Ranking is async,
since an embedder calls a model over the network.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from protocol.tasks import Skill
from team.skills.common import describe_error as describe

log = logging.getLogger(__name__)

__all__ = [
    "BM25Retriever",
    "Embedder",
    "EmbeddingRetriever",
    "Retriever",
    "cosine",
    "skill_document",
    "tokenize",
]


class Retriever(Protocol):
    async def rank(self, query: str, skills: Sequence[Skill], k: int) -> list[Skill]:
        """At most ``k`` of ``skills`` related to ``query``, most related first."""
        ...


class Embedder(Protocol):
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, all of the same length."""
        ...


# CJK ideographs (with extension A and compatibility forms) and the kana.
_TOKEN = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)|([a-z0-9]+)")

# Words that say nothing about what a skill is for. Kept short on purpose:
# BM25's weighting handles the rest, these are the ones every text has.
_STOP_WORDS = frozenset(
    """
    a an and are as at be been but by can do does for from has have how i if in into is it
    its me my no not of on or our so that the their them then there these this those to
    us was we were what when where which who why will with you your
    """.split()
)
_CJK_STOP_CHARS = frozenset(
    "的了是在和与及或我你他她它们这那请吗呢吧啊把被也都就要会能对为从给让用等个一"
)


def _cjk_tokens(run: str) -> Iterable[str]:
    for index, char in enumerate(run):
        if char not in _CJK_STOP_CHARS:
            yield char
        if index + 1 < len(run):
            yield run[index : index + 2]


def tokenize(text: str) -> list[str]:
    """Search terms of ``text``: lowercased ASCII words, CJK characters and character pairs."""
    tokens: list[str] = []
    for cjk, word in _TOKEN.findall(text.lower()):
        if cjk:
            tokens.extend(_cjk_tokens(cjk))
        elif word not in _STOP_WORDS:
            tokens.append(word)
    return tokens


def _weighted_terms(skill: Skill) -> Counter[str]:
    """A skill's term frequencies, the name and description counting more than the body."""
    terms: Counter[str] = Counter()
    for text, weight in (
        (skill.name, 3),
        (skill.description, 2),
        (" ".join(skill.tools), 1),
        (skill.content, 1),
    ):
        for token in tokenize(text):
            terms[token] += weight
    return terms


class BM25Retriever:
    """Okapi BM25 over each skill's name, description, tools and body."""

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b

    def scores(self, query: str, skills: Sequence[Skill]) -> list[float]:
        """The BM25 score of each skill for ``query``, in the order of ``skills``."""
        terms = set(tokenize(query))
        if not terms or not skills:
            return [0.0] * len(skills)
        docs = [_weighted_terms(skill) for skill in skills]
        lengths = [sum(doc.values()) for doc in docs]
        average = (sum(lengths) / len(docs)) or 1.0
        idf = {term: self._idf(term, docs) for term in terms}
        return [
            sum(self._term_score(doc[t], length, average, idf[t]) for t in terms if t in doc)
            for doc, length in zip(docs, lengths, strict=True)
        ]

    @staticmethod
    def _idf(term: str, docs: Sequence[Counter[str]]) -> float:
        # The "+1" form of the IDF stays positive when a term is in most
        # documents, so a small library still ranks by its common terms.
        having = sum(1 for doc in docs if term in doc)
        return math.log(1.0 + (len(docs) - having + 0.5) / (having + 0.5))

    def _term_score(self, tf: int, length: int, average: float, idf: float) -> float:
        norm = self.k1 * (1.0 - self.b + self.b * length / average)
        return idf * tf * (self.k1 + 1.0) / (tf + norm)

    async def rank(self, query: str, skills: Sequence[Skill], k: int) -> list[Skill]:
        """At most ``k`` skills with a positive score, best first, equal scores by name."""
        return self.ranked(query, skills, k)

    def ranked(self, query: str, skills: Sequence[Skill], k: int) -> list[Skill]:
        """:meth:`rank` without the await, for callers outside a loop."""
        if k <= 0:
            return []
        scored = [
            (score, skill)
            for score, skill in zip(self.scores(query, skills), skills, strict=True)
            if score > 0.0
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1].name))
        return [skill for _, skill in scored[:k]]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of the angle between two vectors; 0.0 when either is all zeros."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def skill_document(skill: Skill, body_chars: int = 2_000) -> str:
    """The text of a skill an embedder sees: name, description, tools, start of the body."""
    tools = f"Tools: {', '.join(skill.tools)}\n" if skill.tools else ""
    return f"{skill.name}\n{skill.description}\n{tools}{skill.content[:body_chars]}"


class EmbeddingRetriever:
    """Ranks skills by the cosine similarity of their embedding to the query's.

    Only skills more similar than ``min_score`` come back, best first, equal
    scores by name. A failing embedder (the model is down, say) is logged and
    ``fallback`` ranks instead, so a run still gets its candidates.
    """

    def __init__(
        self,
        embedder: Embedder,
        min_score: float = 0.0,
        fallback: Retriever | None = None,
    ) -> None:
        self.embedder = embedder
        self.min_score = min_score
        self.fallback: Retriever = fallback or BM25Retriever()
        self._vectors: dict[str, list[float]] = {}

    async def _embed_documents(self, documents: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.sha256(doc.encode("utf-8")).hexdigest() for doc in documents]
        missing: dict[str, str] = {}
        for key, doc in zip(keys, documents, strict=True):
            if key not in self._vectors:
                missing.setdefault(key, doc)
        if missing:
            vectors = await self.embedder.embed(list(missing.values()))
            self._vectors.update(zip(missing, vectors, strict=True))
        return [self._vectors[key] for key in keys]

    async def rank(self, query: str, skills: Sequence[Skill], k: int) -> list[Skill]:
        """At most ``k`` skills closest to ``query`` (the fallback's when embedding fails)."""
        if k <= 0 or not skills or not query.strip():
            return []
        try:
            [query_vector] = await self.embedder.embed([query])
            vectors = await self._embed_documents([skill_document(s) for s in skills])
        except Exception as exc:
            log.warning("skill embeddings failed (%s); ranking with BM25", describe(exc))
            return await self.fallback.rank(query, skills, k)
        scored = [
            (score, skill)
            for skill, vector in zip(skills, vectors, strict=True)
            if (score := cosine(query_vector, vector)) > self.min_score
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1].name))
        return [skill for _, skill in scored[:k]]
