"""Every SQL statement of the PostgreSQL backend, and nothing else (docs/BACKENDS.md describes the tables).

The schema is versioned: SCHEMA_VERSION names what SCHEMA creates, and `mre_meta` records it; a
database holding a newer version is refused rather than written to. Statements use psycopg's
%(name)s / %s placeholders; no value is ever formatted into SQL text.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
SCHEMA_LOCK = 0x6D72655F736368  # pg_advisory_xact_lock key held while the schema is created ("mre_sch")

META_TABLE = """
CREATE TABLE IF NOT EXISTS mre_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
)
"""
GET_SCHEMA_VERSION = "SELECT value FROM mre_meta WHERE key = 'schema_version'"
SET_SCHEMA_VERSION = """
INSERT INTO mre_meta (key, value) VALUES ('schema_version', %s)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
"""
TAKE_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(%s)"

# -- the ledger ------------------------------------------------------------------------------------
# `sessions` holds each session's tail (how many events, the chain head): an append locks this row
# (SELECT … FOR UPDATE) inside its transaction, so two writers anywhere can never fork a chain.
# `events.line` is the exact JSONL line the file backend would write (without its newline): the
# bytes that are hashed. The other columns are read from it, for queries.
LEDGER_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS sessions (
        session    text PRIMARY KEY,
        size       bigint NOT NULL DEFAULT 0,
        head       text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS events (
        session text   NOT NULL REFERENCES sessions (session),
        seq     bigint NOT NULL,
        line    bytea  NOT NULL,
        role    text   NOT NULL,
        digest  text   NOT NULL,
        chain   text   NOT NULL,
        PRIMARY KEY (session, seq)
    )
    """,
]

SCHEMA: list[str] = [META_TABLE, *LEDGER_SCHEMA]
