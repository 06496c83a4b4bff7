"""The embedded memory backend: one SQLite file with an FTS5 index.

Why these choices:

- The connection is the store's own: ``store.sqlite.SQLiteThread`` (WAL, a
  busy timeout, retry of lock conflicts, one dedicated thread, sqlite3
  errors as ``StoreError``), so several processes (gateway, actors) share
  one file. Every write is one ``BEGIN IMMEDIATE`` transaction so the item
  row and its index row change together.
- English goes through FTS5's ``porter unicode61`` tokenizer. unicode61 keeps
  a whole run of Chinese characters (and any Latin letters touching it) as
  one token, which would make a Chinese word findable only as the entire
  sentence. So the index is fed ``text.fts_document``: the words, and each
  CJK run as overlapping bigrams, separated by spaces; queries are split the
  same way. The alternative, FTS5's ``trigram`` tokenizer in a second table,
  cannot match a query shorter than three characters, and most Chinese words
  are two; it would also index every English word again and split the ranking
  over two tables. Item rows keep the original text; the index only matches.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from store.memory.model import MemoryBackend, MemoryItem, RecallSources
from store.memory.text import fts_document, fts_query
from store.sqlite import SQLiteThread, write_txn

T = TypeVar("T")

# bm25() column weights for (text, tags): a word the writer chose as a tag
# says more about the topic than a word of the text.
_WEIGHTS = (1.0, 2.0)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_items (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    importance REAL NOT NULL,
    source TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_items_scope
    ON memory_items (scope, kind, created_at);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts
    USING fts5(text, tags, tokenize = 'porter unicode61');
"""

_COLUMNS = "id, scope, kind, text, tags, importance, source, created_at, updated_at"


def _create_schema(conn: sqlite3.Connection) -> None:
    # One statement at a time: executescript() would commit the surrounding
    # transaction first, and two processes creating the schema at once must
    # be serialised by it.
    with write_txn(conn):
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)


def _row_to_item(row: tuple[Any, ...]) -> MemoryItem:
    id_, scope, kind, text, tags, importance, source, created, updated = row
    return MemoryItem(
        id=id_,
        scope=scope,
        kind=kind,
        text=text,
        tags=json.loads(tags),
        importance=importance,
        source=source,
        created_at=created,
        updated_at=updated,
    )


def _fts_row(text: str, tags: list[str]) -> tuple[str, str]:
    return fts_document(text), fts_document(" ".join(tags))


class SQLiteMemory(MemoryBackend):
    """Memory in ``<path>``; safe to open from several processes at once."""

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self._sqlite = SQLiteThread(
            self.path, setup=_create_schema, busy_timeout=busy_timeout_s, label="memory"
        )

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read, on the reading connection (it never waits behind a write)."""
        return await self._sqlite.read(fn)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` as one write transaction."""

        def op(conn: sqlite3.Connection) -> T:
            with write_txn(conn):
                return fn(conn)

        return await self._sqlite.run(op)

    # -- MemoryBackend ----------------------------------------------------

    async def add(self, item: MemoryItem) -> MemoryItem:
        item = item.model_copy(deep=True)

        def op(conn: sqlite3.Connection) -> None:
            try:
                cur = conn.execute(
                    f"INSERT INTO memory_items ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        item.id,
                        item.scope,
                        item.kind,
                        item.text,
                        json.dumps(item.tags, ensure_ascii=False),
                        item.importance,
                        item.source,
                        item.created_at,
                        item.updated_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise ValueError(f"memory id {item.id!r} already exists") from exc
            conn.execute(
                "INSERT INTO memory_fts (rowid, text, tags) VALUES (?,?,?)",
                (cur.lastrowid, *_fts_row(item.text, item.tags)),
            )

        await self._write(op)
        return item

    async def update(
        self, item_id: str, text: str | None = None, tags: builtins.list[str] | None = None
    ) -> MemoryItem | None:
        def op(conn: sqlite3.Connection) -> MemoryItem | None:
            row = conn.execute(
                f"SELECT rowid, {_COLUMNS} FROM memory_items WHERE id = ?", (item_id,)
            ).fetchone()
            if row is None:
                return None
            item = _row_to_item(row[1:])
            if text is not None:
                item.text = text
            if tags is not None:
                item.tags = builtins.list(tags)
            item.updated_at = time.time()
            conn.execute(
                "UPDATE memory_items SET text = ?, tags = ?, updated_at = ? WHERE rowid = ?",
                (item.text, json.dumps(item.tags, ensure_ascii=False), item.updated_at, row[0]),
            )
            conn.execute(
                "UPDATE memory_fts SET text = ?, tags = ? WHERE rowid = ?",
                (*_fts_row(item.text, item.tags), row[0]),
            )
            return item

        return await self._write(op)

    async def delete(self, item_id: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT rowid FROM memory_items WHERE id = ?", (item_id,)).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (row[0],))
            conn.execute("DELETE FROM memory_items WHERE rowid = ?", (row[0],))
            return True

        return await self._write(op)

    async def get(self, item_id: str) -> MemoryItem | None:
        def op(conn: sqlite3.Connection) -> MemoryItem | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE id = ?", (item_id,)
            ).fetchone()
            return None if row is None else _row_to_item(row)

        return await self._run(op)

    async def list(
        self, scope: str, kind: str | None = None, limit: int = 50
    ) -> builtins.list[MemoryItem]:
        sql, args = _list_statement(scope, kind, limit)
        rows = await self._run(lambda conn: conn.execute(sql, args).fetchall())
        return [_row_to_item(r) for r in rows]

    async def search(
        self, scopes: builtins.list[str], query: str, limit: int = 50
    ) -> builtins.list[tuple[MemoryItem, float]]:
        statement = _search_statement(scopes, query, limit)
        if statement is None:
            return []
        rows = await self._run(lambda conn: conn.execute(*statement).fetchall())
        return _hits(rows)

    async def recall_sources(
        self, scopes: builtins.list[str], query: str, pool: int, residents: int, recent: int
    ) -> RecallSources:
        """The three reads of ``MemoryBackend.recall_sources`` in one trip to the thread."""
        search = _search_statement(scopes, query, pool)

        def op(conn: sqlite3.Connection) -> tuple[Any, Any, Any]:
            hits = conn.execute(*search).fetchall() if search is not None else []
            kept = [
                conn.execute(*_list_statement(s, "resident", residents)).fetchall() for s in scopes
            ]
            newest = (
                []
                if hits
                else [conn.execute(*_list_statement(s, None, recent)).fetchall() for s in scopes]
            )
            return hits, kept, newest

        hits, kept, newest = await self._run(op)
        return RecallSources(
            _hits(hits),
            [[_row_to_item(r) for r in rows] for rows in kept],
            [[_row_to_item(r) for r in rows] for rows in newest],
        )

    async def close(self) -> None:
        await self._sqlite.close()


def _hits(rows: list[Any]) -> list[tuple[MemoryItem, float]]:
    """Rows of ``_search_statement`` (an item's columns, then its score) as search hits."""
    return [(_row_to_item(r[:-1]), float(r[-1])) for r in rows]


def _list_statement(scope: str, kind: str | None, limit: int) -> tuple[str, list[Any]]:
    sql = f"SELECT {_COLUMNS} FROM memory_items WHERE scope = ?"
    args: list[Any] = [scope]
    if kind is not None:
        sql += " AND kind = ?"
        args.append(kind)
    sql += " ORDER BY created_at DESC, rowid DESC LIMIT ?"
    args.append(max(0, limit))
    return sql, args


def _search_statement(scopes: list[str], query: str, limit: int) -> tuple[str, list[Any]] | None:
    """The FTS query for ``search``; None when nothing can match."""
    match = fts_query(query)
    if match is None or not scopes or limit <= 0:
        return None
    cols = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))
    marks = ",".join("?" for _ in scopes)
    weights = ", ".join(str(w) for w in _WEIGHTS)
    # bm25() is lower-is-better and negative; flip it so higher is better.
    sql = (
        f"SELECT {cols}, -bm25(memory_fts, {weights}) AS score "
        "FROM memory_fts JOIN memory_items m ON m.rowid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND m.scope IN ({marks}) "
        "ORDER BY score DESC LIMIT ?"
    )
    return sql, [match, *scopes, limit]
