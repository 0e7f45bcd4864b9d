"""SQL text for the index, built by pure functions (tested as strings; connection.py, indexer.py, searcher.py and housekeeping.py run it).

Each session has its own FTS5 table, `events_fts_<num>`, over the shared
`events` table (external content). FTS5's bm25() counts, for every query
term, its hits in the *whole* FTS table to get the IDF; with one shared table
that scan grows with every session in the index (measured: 4x slower in one
session of a 1M-row, 100-session index). Per-session tables make a search
cost, and rank, exactly as if the session were alone, and keep one session's
words out of another's IDF.

Row ids: every event's rowid is (session number << 32) | seq, so one session's
rows are one contiguous rowid range of `events`.
"""

from __future__ import annotations

import math

INDEX_FILE = "index.sqlite"  # the file backend's index: DATA_DIR/index.sqlite (derived, rebuildable)

SCHEMA_VERSION = 3  # 3: control events (revoke/restore) get no row (indexing.skipped); an index of 2 is rebuilt
SEQ_BITS = 32
MAX_SEQ = (1 << SEQ_BITS) - 1
MAX_SESSION_NUM = (1 << 30) - 1
TOKENIZER = "porter unicode61 remove_diacritics 1"

# Tables this package owns (plus every events_fts_<num>); others (receipts, ...) share the file and are left alone.
OWN_TABLES = ("events", "terms", "watermarks", "retrieval_meta", "vectors")
FTS_PREFIX = "events_fts_"

DDL = f"""
CREATE TABLE IF NOT EXISTS retrieval_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS watermarks (
    num INTEGER PRIMARY KEY,            -- the high bits of the session's rowids
    session TEXT NOT NULL UNIQUE,
    last_seq INTEGER NOT NULL DEFAULT -1,   -- last indexed seq (-1: none)
    last_chain TEXT NOT NULL            -- chain hash of that event (GENESIS hex when none)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,             -- (num << {SEQ_BITS}) | seq
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL,
    role TEXT NOT NULL,
    ts TEXT NOT NULL,
    text TEXT NOT NULL,
    context TEXT NOT NULL DEFAULT '',   -- neighbouring turns, indexed with a lower weight
    meta TEXT NOT NULL,                 -- JSON object
    digest TEXT NOT NULL,
    chain TEXT NOT NULL,
    novelty REAL NOT NULL,
    collapse REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_event_id ON events(event_id);
CREATE TABLE IF NOT EXISTS vectors (
    id INTEGER PRIMARY KEY,             -- the event's row id in `events` (gone with it: forget, drop, rebuild)
    vec BLOB NOT NULL                   -- the semantic extra's embedding (retrieval.semantic.to_blob), none without it
);
-- the vectors' ids alone: a session's count and sum of ids (the hybrid search's check that its cached vectors are
-- current) read from this instead of every 800-byte row
CREATE INDEX IF NOT EXISTS vectors_ids ON vectors(id);
CREATE TABLE IF NOT EXISTS terms (
    num INTEGER NOT NULL,               -- session number
    term TEXT NOT NULL,                 -- retrieval.text.content_terms() form
    df INTEGER NOT NULL,                -- events of the session holding it
    PRIMARY KEY (num, term)
) WITHOUT ROWID;
"""

INSERT_EVENT = (
    "INSERT INTO events (id, session, seq, event_id, role, ts, text, context, meta, digest, chain, novelty, collapse)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


# -- the semantic extra's vectors (storage/common/retrieval/vectors.py); the table stays empty without the extra --
# the session's events with no vector yet, newest first (params: lo, hi, limit)
VECTORS_PENDING = (
    "SELECT e.id, e.seq, e.text FROM events AS e WHERE e.id BETWEEN ? AND ?"
    " AND NOT EXISTS (SELECT 1 FROM vectors AS v WHERE v.id = e.id) ORDER BY e.id DESC LIMIT ?"
)
# the same, oldest first: how a whole session is embedded (rows written in ascending id order fill the table's pages;
# batches written newest first left them 60% full, 1,370 bytes an event against 821)
VECTORS_PENDING_OLDEST = VECTORS_PENDING.replace("ORDER BY e.id DESC", "ORDER BY e.id")
# a vector kept only while its event's row is there with the text embedded (an erasure between embedding and writing
# leaves none; nor does a session deleted meanwhile, whose number the next new session takes: its rows, other texts)
VECTORS_PUT = (
    "INSERT OR REPLACE INTO vectors (id, vec) SELECT ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE id = ? AND text = ?)"
)
EVENTS_COUNT = "SELECT count(*) FROM events WHERE id BETWEEN ? AND ?"  # a session's rows (its embedding's bound)
VECTORS_STATE = "SELECT count(*), coalesce(sum(id - ?), 0) FROM vectors WHERE id BETWEEN ? AND ?"
VECTORS_OF = "SELECT id - ?, vec FROM vectors WHERE id BETWEEN ? AND ? ORDER BY id"
VECTORS_DROP = "DELETE FROM vectors WHERE id BETWEEN ? AND ?"
VECTORS_DROP_ONE = "DELETE FROM vectors WHERE id = ?"


def dense_rows_sql(n: int) -> str:
    """Events by row id in search_sql's columns, with no lexical score (the semantic extra's dense-only hits)."""
    marks = ", ".join("?" * n)
    return (
        "SELECT seq, event_id, role, ts, text, meta, digest, chain, 0.0, collapse, 0.0, novelty"
        f" FROM events WHERE id IN ({marks})"
    )


def fts_table(num: int) -> str:
    """The name of session `num`'s FTS5 table (an integer in a name: nothing to quote)."""
    if isinstance(num, bool) or not isinstance(num, int) or not 0 < num <= MAX_SESSION_NUM:
        raise ValueError(f"session number {num!r}: outside 1..{MAX_SESSION_NUM}")
    return f"{FTS_PREFIX}{num}"


def create_fts(num: int) -> str:
    t = fts_table(num)
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {t} USING fts5("
        f"text, context, content='events', content_rowid='id', tokenize='{TOKENIZER}')"
    )


def insert_fts(num: int) -> str:
    return f"INSERT INTO {fts_table(num)} (rowid, text, context) VALUES (?, ?, ?)"


def delete_fts_one(num: int) -> str:
    t = fts_table(num)
    return f"INSERT INTO {t} ({t}, rowid, text, context) VALUES ('delete', ?, ?, ?)"


def optimize_fts(num: int) -> str:
    """Merge every segment of session `num`'s FTS5 table into one: deleted rows' tokens are dropped, not kept as old segments."""
    t = fts_table(num)
    return f"INSERT INTO {t} ({t}) VALUES ('optimize')"


def fts_option(num: int, key: str) -> str:
    """Set one of session `num`'s FTS5 options (automerge, crisismerge): params (value,)."""
    if key not in ("automerge", "crisismerge"):
        raise ValueError(f"FTS5 option {key!r}: not one this index sets")
    t = fts_table(num)
    return f"INSERT INTO {t} ({t}, rank) VALUES ('{key}', ?)"


FTS_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    f" AND name GLOB '{FTS_PREFIX}[0-9]*'"
)
UPSERT_TERMS = (
    "INSERT INTO terms (num, term, df) VALUES (?, ?, ?) ON CONFLICT (num, term) DO UPDATE SET df = df + excluded.df"
)


def row_id(num: int, seq: int) -> int:
    if not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"seq {seq}: outside 0..{MAX_SEQ}")
    return (num << SEQ_BITS) | seq


def session_range(num: int) -> tuple[int, int]:
    return num << SEQ_BITS, (num << SEQ_BITS) | MAX_SEQ


def _weight(value: float) -> str:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"bm25 weight {value!r}: must be finite and non-negative")
    return repr(float(value))


def search_sql(num: int, *, text_weight: float = 1.0, context_weight: float = 0.0, exclude: bool = False) -> str:
    """Top-:limit BM25 matches of :match in session `num`, joined to their events.

    Parameters: :match, :limit, and :exclude (a JSON array of rowids) when `exclude`.
    Columns: seq, event_id, role, ts, text, meta, digest, chain, bm25, collapse, own
    (bm25 over the text column alone: 0 when only the context matched), novelty.

    `own` is computed for every matching row, before the LIMIT: 7-9% of this statement's time. The two
    ways to compute it for the kept rows only (FTS5's `ORDER BY rank`, or a second query over the kept
    rowids) measured 19-90% slower (bench/search_own_bm25.py; bench/HISTORY.md, issue 16 latency).
    """
    t = fts_table(num)
    weights = f"{_weight(text_weight)}, {_weight(context_weight)}"
    excl = " AND rowid NOT IN (SELECT value FROM json_each(:exclude))" if exclude else ""
    return (
        "SELECT e.seq, e.event_id, e.role, e.ts, e.text, e.meta, e.digest, e.chain, c.bm25, e.collapse,"
        " c.own, e.novelty"
        " FROM ("
        f"SELECT rowid AS rid, bm25({t}, {weights}) AS bm25, bm25({t}, 1.0, 0.0) AS own"
        f" FROM {t}"
        f" WHERE {t} MATCH :match{excl}"
        " ORDER BY bm25 LIMIT :limit"
        ") AS c JOIN events AS e ON e.id = c.rid ORDER BY c.bm25, e.seq"
    )


def terms_df_sql(n: int) -> str:
    """Document frequencies of n terms in one session: params (num, term1, ..., termN)."""
    marks = ", ".join("?" * n)
    return f"SELECT term, df FROM terms WHERE num = ? AND term IN ({marks})"


def highlight_sql(num: int, n: int) -> str:
    """The matched tokens of n rows, marked with \x02 ... \x03 in both columns: params (:match, id1..idN).

    For `search(explain=True)` only: highlight() re-tokenizes each row's text.
    """
    t = fts_table(num)
    marks = ", ".join("?" * n)
    return (
        f"SELECT rowid, highlight({t}, 0, char(2), char(3)), highlight({t}, 1, char(2), char(3))"
        f" FROM {t} WHERE {t} MATCH ? AND rowid IN ({marks})"
    )


def count_sql(num: int) -> str:
    """How many rows of session `num` match one FTS5 expression (:match): a term's n in its idf."""
    t = fts_table(num)
    return f"SELECT count(*) FROM {t} WHERE {t} MATCH ?"


def match_in_rows_sql(num: int, n: int) -> str:
    """Which of n rows match one FTS5 expression (a column filter such as `text : "cat"`): params (:match, id1..idN)."""
    t = fts_table(num)
    marks = ", ".join("?" * n)
    return f"SELECT rowid FROM {t} WHERE {t} MATCH ? AND rowid IN ({marks})"
