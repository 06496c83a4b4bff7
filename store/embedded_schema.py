"""The embedded store's SQLite schema, and bringing older databases up to it.

Every table, index and migration lives here; ``store.embedded`` runs
:func:`setup_schema` once on each new connection of its store thread.
"""

from __future__ import annotations

import sqlite3

from store import (
    embedded_audit,
    embedded_budgets,
    embedded_chat,
    embedded_disabled,
    embedded_invites,
    embedded_logins,
    embedded_mentions,
    embedded_quotas,
    embedded_reactions,
    embedded_sessions,
    embedded_tasks,
    embedded_threads,
)
from store.sqlite import write_txn

SCHEMA = """
CREATE TABLE IF NOT EXISTS groups (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    pos INTEGER PRIMARY KEY,
    group_id TEXT NOT NULL,
    id TEXT NOT NULL,
    client_id TEXT,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_id ON messages (group_id, id);
CREATE UNIQUE INDEX IF NOT EXISTS messages_by_client_id
    ON messages (group_id, client_id) WHERE client_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_by_pos ON messages (group_id, pos);
-- A VP's transcript (store.base.TranscriptStore): its head in transcripts,
-- its messages in transcript_rows, numbered from 0.
CREATE TABLE IF NOT EXISTS transcripts (
    group_id TEXT NOT NULL,
    vp_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, vp_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS transcript_rows (
    group_id TEXT NOT NULL,
    vp_id TEXT NOT NULL,
    n INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, vp_id, n)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event_heads (
    group_id TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL
) WITHOUT ROWID;
-- AUTOINCREMENT (not a plain rowid) because the poller needs a counter that
-- never goes back, even when the newest rows are deleted with their group.
CREATE TABLE IF NOT EXISTS events (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    type TEXT,
    vp_id TEXT,
    data_type TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS events_by_seq ON events (group_id, seq);
-- Durable turn records (store.turns): the record's fixed fields as JSON in
-- data; phase and end_kind apart, because they change.
CREATE TABLE IF NOT EXISTS turns (
    group_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    trigger_id TEXT NOT NULL,
    phase TEXT NOT NULL,
    end_kind TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (group_id, turn_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS turns_by_trigger ON turns (group_id, trigger_id);
CREATE INDEX IF NOT EXISTS turns_open ON turns (phase) WHERE phase != 'finished';
CREATE TABLE IF NOT EXISTS users (
    username TEXT PRIMARY KEY,
    data TEXT NOT NULL
) WITHOUT ROWID;
-- People who sign in with an identity provider: the account each
-- (issuer, subject) is linked to (UserStore.link_identity).
CREATE TABLE IF NOT EXISTS identities (
    identity TEXT PRIMARY KEY,
    username TEXT NOT NULL
) WITHOUT ROWID;
-- Who each gateway process serves, until expires_at (store.members).
CREATE TABLE IF NOT EXISTS presence (
    username TEXT NOT NULL,
    node TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (username, node)
) WITHOUT ROWID;
-- The pooled VP host each VP runs in (store.placement).
CREATE TABLE IF NOT EXISTS vp_placement (
    vp_id TEXT PRIMARY KEY,
    host INTEGER NOT NULL
) WITHOUT ROWID;
"""

# The event header columns (see store.events.EventHeader), added to databases
# made before they existed and filled from each row's JSON, once.
_HEADER_COLUMNS = ("type", "vp_id", "data_type")
_BACKFILL_HEADERS = """
UPDATE events SET
    type = coalesce(json_extract(data, '$.type'), ''),
    vp_id = CASE WHEN json_type(data, '$.vpId') = 'text'
        THEN json_extract(data, '$.vpId') END,
    data_type = CASE WHEN json_extract(data, '$.type') = 'yeaft_output'
        AND json_type(data, '$.data.type') = 'text'
        THEN json_extract(data, '$.data.type') END
WHERE type IS NULL
"""


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a database made by an earlier version up to the current schema."""
    with write_txn(conn):
        have = {row[1] for row in conn.execute("PRAGMA table_info(events)")}
        missing = [column for column in _HEADER_COLUMNS if column not in have]
        for column in missing:
            conn.execute(f"ALTER TABLE events ADD COLUMN {column} TEXT")
        if missing:
            conn.execute(_BACKFILL_HEADERS)


def event_counter(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return int(row[0]) if row else 0


def setup_schema(conn: sqlite3.Connection) -> None:
    """Make the schema on a new connection and migrate what an older version made."""
    conn.executescript(f"BEGIN IMMEDIATE;{SCHEMA}COMMIT;")
    migrate(conn)
    embedded_chat.setup(conn)
    embedded_budgets.setup(conn)
    embedded_quotas.setup(conn)
    embedded_tasks.setup(conn)
    embedded_logins.setup(conn)
    embedded_sessions.setup(conn)
    embedded_reactions.setup(conn)
    embedded_mentions.setup(conn)
    embedded_audit.setup(conn)
    embedded_invites.setup(conn)
    embedded_disabled.setup(conn)
    embedded_threads.setup(conn)
