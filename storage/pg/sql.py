"""Every SQL statement of the PostgreSQL backend, and nothing else (docs/BACKENDS.md describes the tables).

The schema is versioned: SCHEMA_VERSION names what SCHEMA creates, and `mre_meta` records it; a
database holding a newer version is refused rather than written to. Statements use psycopg's
%(name)s / %s placeholders; no value is ever formatted into SQL text.
"""

from __future__ import annotations

# 2: the tables added while 1 was current (imports, consent, settings, bundle imports, ledger cuts) are part of it; from
# 2 on a start whose database records this version runs no DDL (a role that cannot make tables can use it)
# 3: supersession_suggestions (issue 28: model proposals the rules did not confirm, left to a person) and
# erasures_pending (issue 28: an erasure stopped half way, seen by every replica)
# 4: search_vectors (issue 35: the semantic extra's vectors, tied to their search_events rows)
SCHEMA_VERSION = 4
SCHEMA_LOCK = 0x6D72655F736368  # pg_advisory_xact_lock key held while the schema is created ("mre_sch")

META_TABLE = """
CREATE TABLE IF NOT EXISTS mre_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
)
"""
HAS_META_TABLE = "SELECT to_regclass('mre_meta')"
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
    # A small append in one statement (one round trip, on an autocommit connection: one transaction):
    # lock the session's row, and only if its tail is the one the rows were chained from, insert them
    # and move the tail on. Either way it returns the tail after it and whether it appended.
    """
    CREATE OR REPLACE FUNCTION mre_append(
        p_session text, p_size bigint, p_head text, p_new_head text,
        p_seqs bigint[], p_lines bytea[], p_roles text[], p_digests text[], p_chains text[]
    ) RETURNS TABLE (r_size bigint, r_head text, r_appended boolean)
    LANGUAGE plpgsql AS $$
    DECLARE
        cur_size bigint;
        cur_head text;
    BEGIN
        SELECT s.size, s.head INTO cur_size, cur_head FROM sessions s WHERE s.session = p_session FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO sessions (session, size, head) VALUES (p_session, 0, repeat('0', 64)) ON CONFLICT (session) DO NOTHING;
            SELECT s.size, s.head INTO cur_size, cur_head FROM sessions s WHERE s.session = p_session FOR UPDATE;
        END IF;
        IF cur_size <> p_size OR cur_head <> p_head THEN
            RETURN QUERY SELECT cur_size, cur_head, false;
            RETURN;
        END IF;
        INSERT INTO events (session, seq, line, role, digest, chain)
            SELECT p_session, u.seq, u.line, u.role, u.digest, u.chain
            FROM unnest(p_seqs, p_lines, p_roles, p_digests, p_chains) AS u (seq, line, role, digest, chain);
        UPDATE sessions SET size = p_size + cardinality(p_seqs), head = p_new_head, updated_at = now() WHERE session = p_session;
        RETURN QUERY SELECT p_size + cardinality(p_seqs), p_new_head, true;
    END
    $$
    """,
    # when the session was last written, by the server's clock (retention's idle check: an event's own `ts` may be
    # an imported file's, years old, or in the future); added to databases made before it
    "ALTER TABLE sessions ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now()",
]
# What `python -m ledger import` remembers of the files it imported (ledger/imports.py's records): outside
# the chain, a guard against importing a file twice. An erasure deletes the records whose range it reaches.
LEDGER_IMPORTS_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS ledger_imports (
        session     text   NOT NULL REFERENCES sessions (session),
        sha256      text   NOT NULL,
        messages    bigint NOT NULL,
        first_seq   bigint NOT NULL,
        last_seq    bigint NOT NULL,
        last_chain  text   NOT NULL,
        file        text   NOT NULL,
        imported_at text   NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS ledger_imports_by_session ON ledger_imports (session, sha256)",
]
# the earliest record of this content whose last event the ledger still holds, unchanged
IMPORTS_PREVIOUS = """
SELECT i.sha256, i.messages, i.first_seq, i.last_seq, i.last_chain, i.file, i.imported_at
FROM ledger_imports i JOIN events e ON e.session = i.session AND e.seq = i.last_seq AND e.chain = i.last_chain
WHERE i.session = %s AND i.sha256 = %s ORDER BY i.last_seq LIMIT 1
"""
IMPORTS_ADD = """
INSERT INTO ledger_imports (session, sha256, messages, first_seq, last_seq, last_chain, file, imported_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
"""
IMPORTS_FORGET = """
DELETE FROM ledger_imports WHERE session = %s
AND EXISTS (SELECT 1 FROM unnest(%s::bigint[]) AS s (seq) WHERE s.seq BETWEEN first_seq AND last_seq)
"""
LEDGER_SYSTEM_LINES_AFTER = (  # by the line's own bytes, not the role column (outside the chain: see CONTROL_SYSTEM_LINES)
    "SELECT line FROM events WHERE session = %s AND seq > %s AND position('\"role\":\"system\"'::bytea in line) > 0 ORDER BY seq"
)
LEDGER_APPEND = (
    "SELECT r_size, r_head, r_appended FROM mre_append(%s::text, %s::bigint, %s::text, %s::text,"
    " %s::bigint[], %s::bytea[], %s::text[], %s::text[], %s::text[])"
)
LEDGER_NEW_SESSION = "INSERT INTO sessions (session, size, head) VALUES (%s, 0, %s) ON CONFLICT (session) DO NOTHING"
# the writer's lock: held until the transaction ends, so one writer at a time appends to a session
LEDGER_LOCK_SESSION = "SELECT size, head FROM sessions WHERE session = %s FOR UPDATE"
LEDGER_TAIL = "SELECT size, head FROM sessions WHERE session = %s"
LEDGER_LOCK_SESSION_WRITTEN = "SELECT size, head, extract(epoch FROM updated_at)::float8 FROM sessions WHERE session = %s FOR UPDATE"
LEDGER_ADVANCE = "UPDATE sessions SET size = %s, head = %s, updated_at = now() WHERE session = %s"
LEDGER_WRITTEN = "SELECT extract(epoch FROM updated_at)::float8 FROM sessions WHERE session = %s"
LEDGER_COPY_EVENTS = "COPY events (session, seq, line, role, digest, chain) FROM STDIN (FORMAT BINARY)"
LEDGER_COPY_TYPES = ("text", "int8", "bytea", "text", "text", "text")
LEDGER_SESSIONS = 'SELECT session FROM sessions ORDER BY session COLLATE "C"'
LEDGER_LINES_FROM = "SELECT seq, line FROM events WHERE session = %s AND seq >= %s AND seq < %s ORDER BY seq LIMIT %s"
# (session, from seq, to seq exclusive, a member's canonical bytes): the lines that may have that member (issue 30:
# the stand-in's replies by `"provider":"offline"`); by the line's own bytes, as SYSTEM_ROLE_IN_LINE, the caller parses
LEDGER_LINES_WITH_BYTES = (
    "SELECT seq, line FROM events WHERE session = %s AND seq >= %s AND seq < %s AND position(%s::bytea in line) > 0"
    " ORDER BY seq"
)
LEDGER_LINES_AT = "SELECT seq, line FROM events WHERE session = %s AND seq = ANY(%s)"
# (seqs, session): the session's size on every row, with each asked seq's line (one row of NULLs when none is held;
# no row when there is no such session)
LEDGER_SIZE_AND_LINES_AT = (
    "SELECT s.size, e.seq, e.line FROM sessions s"
    " LEFT JOIN events e ON e.session = s.session AND e.seq = ANY(%s::bigint[]) WHERE s.session = %s"
)
LEDGER_BYTES = "SELECT coalesce(sum(octet_length(line) + 1), 0) FROM events WHERE session = %s"
LEDGER_LAST_LINE = "SELECT line FROM events WHERE session = %s ORDER BY seq DESC LIMIT 1"
LEDGER_ALL_LINES = "SELECT line FROM events WHERE session = %s ORDER BY seq"
LEDGER_REWRITE_LINE = "UPDATE events SET line = %s WHERE session = %s AND seq = %s"
LEDGER_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
# VACUUM cannot run in a transaction block: on an autocommit connection, after an erasure's commit
LEDGER_VACUUM = "VACUUM events"
# a deleted session (chat.engine.Engine.forget): its rows, its import records, then the session row itself
LEDGER_DELETE_SESSION = (
    "DELETE FROM events WHERE session = %s",
    "DELETE FROM ledger_imports WHERE session = %s",
    "DELETE FROM sessions WHERE session = %s",
)

# -- the search index (storage/pg/index.py) -------------------------------------------------------------
# Derived data, rebuilt from the ledger at will. One row per indexed event (erased events, erasure and
# control records get none, as in the SQLite index). `lex` holds the event's distinct terms (its text's
# and its context's), each prefixed with the session's number ("17_dog"), so the GIN index keeps one
# posting list per session and term: a search reads its own session's postings only. `tf` holds each
# term's count in the text and in the context, for FTS5's bm25 (storage/pg/terms.py).
SEARCH_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS search_sessions (
        num        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session    text NOT NULL UNIQUE,
        last_seq   bigint NOT NULL DEFAULT -1,   -- last indexed seq (-1: none)
        last_chain text NOT NULL,                -- its chain hash (GENESIS hex when none)
        n_rows     bigint NOT NULL DEFAULT 0,    -- rows of the session: bm25's N
        n_tokens   bigint NOT NULL DEFAULT 0,    -- their tokens, text and context: bm25's avgdl = n_tokens / n_rows
        forgets    bigint NOT NULL DEFAULT 0     -- how many forgets changed its rows
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS search_events (
        num       bigint NOT NULL REFERENCES search_sessions (num) ON DELETE CASCADE,
        seq       bigint NOT NULL,
        event_id  text NOT NULL,
        role      text NOT NULL,
        ts        text NOT NULL,
        text      bytea NOT NULL,     -- UTF-8; bytea because an event's text may hold NUL, which text refuses
        meta      bytea NOT NULL,     -- JSON (bytea for the same reason)
        digest    text NOT NULL,
        chain     text NOT NULL,
        novelty   double precision NOT NULL,
        collapse  double precision NOT NULL,
        n_text    integer NOT NULL,   -- tokens in the text
        n_context integer NOT NULL,   -- tokens in the context (the neighbouring turns)
        tf        jsonb NOT NULL,     -- term -> (count in the text << 32) | count in the context
        lex       tsvector NOT NULL,
        PRIMARY KEY (num, seq)
    ) WITH (toast_tuple_target = 8160)  -- rows stay uncompressed: a search reads tf of thousands of rows
    """,
    "CREATE INDEX IF NOT EXISTS search_events_lex ON search_events USING gin (lex)",
    """
    CREATE TABLE IF NOT EXISTS search_terms (
        num  bigint NOT NULL REFERENCES search_sessions (num) ON DELETE CASCADE,
        term text NOT NULL,             -- retrieval.text.content_terms() form, as in the SQLite index
        df   integer NOT NULL,          -- events of the session holding it
        PRIMARY KEY (num, term)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS search_df (
        num  bigint NOT NULL REFERENCES search_sessions (num) ON DELETE CASCADE,
        term text NOT NULL,             -- an FTS5 term (storage/pg/terms.py)
        n    integer NOT NULL,          -- rows of the session holding it in their text or context: bm25's n(q)
        PRIMARY KEY (num, term)
    )
    """,
]
SEARCH_SESSIONS = "SELECT session, num FROM search_sessions"
SEARCH_SESSION = "SELECT num, last_seq, last_chain FROM search_sessions WHERE session = %s"
# the indexed events after a seq that are not the person's own: every role but 'user' (chat.withheld; params:
# session, after_seq)
SEARCH_NON_USER_SEQS = """
SELECT e.seq FROM search_events AS e JOIN search_sessions AS s ON s.num = e.num
WHERE s.session = %s AND e.seq > %s AND e.role <> 'user' ORDER BY e.seq
"""
SEARCH_NEW_SESSION = (
    "INSERT INTO search_sessions (session, last_chain) VALUES (%s, %s) ON CONFLICT (session) DO NOTHING"
)
SEARCH_LOCK_SESSION = "SELECT last_seq, last_chain, forgets FROM search_sessions WHERE num = %s FOR UPDATE"
SEARCH_FORGETS = "SELECT forgets FROM search_sessions WHERE num = %s"
SEARCH_ADVANCE = (
    "UPDATE search_sessions SET last_seq = %s, last_chain = %s, n_rows = n_rows + %s, n_tokens = n_tokens + %s"
    " WHERE num = %s"
)
SEARCH_COPY_EVENTS = (
    "COPY search_events (num, seq, event_id, role, ts, text, meta, digest, chain, novelty, collapse,"
    " n_text, n_context, tf, lex) FROM STDIN"
)
SEARCH_ROW_TF = "SELECT seq, tf, n_context FROM search_events WHERE num = %s AND seq = ANY(%s)"
SEARCH_SET_CONTEXT = (
    "UPDATE search_events SET n_context = %s, tf = %s, lex = %s::tsvector WHERE num = %s AND seq = %s"
)
SEARCH_UPSERT_TERMS = (  # params (num, terms text[], dfs int[])
    "INSERT INTO search_terms (num, term, df) SELECT %s, t, n FROM unnest(%s::text[], %s::int[]) AS u (t, n)"
    " ON CONFLICT (num, term) DO UPDATE SET df = search_terms.df + EXCLUDED.df"
)
SEARCH_TERMS_DF = "SELECT term, df FROM search_terms WHERE num = %s AND term = ANY(%s)"
SEARCH_ROWS_BEFORE = (
    "SELECT seq, text FROM search_events WHERE num = %s AND seq < %s ORDER BY seq DESC LIMIT %s"
)
SEARCH_ROWS_AFTER = "SELECT seq, text FROM search_events WHERE num = %s AND seq > %s ORDER BY seq LIMIT %s"
SEARCH_STATS = "SELECT n_rows, n_tokens FROM search_sessions WHERE num = %s"
SEARCH_OPEN = (  # params (terms text[], session): a search's first (and usually only other) statement
    "SELECT s.num, s.last_seq, s.n_rows, s.n_tokens, d.terms, d.ns FROM search_sessions AS s"
    " LEFT JOIN LATERAL (SELECT array_agg(term) AS terms, array_agg(n) AS ns FROM search_df"
    " WHERE num = s.num AND term = ANY(%s::text[])) AS d ON true WHERE s.session = %s"
)
SEARCH_HITS = (
    "SELECT seq, event_id, role, ts, text, meta, digest, chain, collapse, novelty"
    " FROM search_events WHERE num = %s AND seq = ANY(%s)"
)
SEARCH_FORGET_ROWS = (
    "DELETE FROM search_events WHERE num = %s AND seq = ANY(%s) RETURNING seq, text, n_text, n_context, tf"
)
SEARCH_TERMS_LESS = (  # params (terms text[], dfs int[], num)
    "UPDATE search_terms AS s SET df = s.df - u.n FROM unnest(%s::text[], %s::int[]) AS u (t, n)"
    " WHERE s.num = %s AND s.term = u.t"
)
SEARCH_TERMS_GONE = "DELETE FROM search_terms WHERE num = %s AND df <= 0"
SEARCH_FORGOT = (
    "UPDATE search_sessions SET n_rows = n_rows - %s, n_tokens = n_tokens - %s, forgets = forgets + 1 WHERE num = %s"
)
SEARCH_TOKENS_DELTA = "UPDATE search_sessions SET n_tokens = n_tokens + %s WHERE num = %s"
SEARCH_ROW_NOVELTY = "SELECT text, novelty, role, meta FROM search_events WHERE num = %s AND seq = %s"
SEARCH_SET_NOVELTY = "UPDATE search_events SET novelty = %s, collapse = %s WHERE num = %s AND seq = %s"
SEARCH_DROP_ROWS = "DELETE FROM search_events WHERE num = %s"
SEARCH_DROP_TERMS = "DELETE FROM search_terms WHERE num = %s"
SEARCH_RESET = (
    "UPDATE search_sessions SET last_seq = -1, last_chain = %s, n_rows = 0, n_tokens = 0, forgets = forgets + 1"
    " WHERE num = %s"
)
SEARCH_DROP_SESSION = "DELETE FROM search_sessions WHERE num = %s"
SEARCH_TRUNCATE = "TRUNCATE search_vectors, search_events, search_terms, search_df, search_sessions"
# VACUUM cannot run in a transaction block: on an autocommit connection, after rows were deleted
SEARCH_VACUUM = (
    "VACUUM search_vectors", "VACUUM search_events", "VACUUM search_terms", "VACUUM search_df", "VACUUM search_sessions"
)
SEARCH_DF_ADD = (  # params (num, terms text[], deltas int[]); then SEARCH_DF_GONE
    "INSERT INTO search_df (num, term, n) SELECT %s, t, d FROM unnest(%s::text[], %s::int[]) AS u (t, d)"
    " ON CONFLICT (num, term) DO UPDATE SET n = search_df.n + EXCLUDED.n"
)
SEARCH_DF_GONE = "DELETE FROM search_df WHERE num = %s AND n <= 0"
SEARCH_DF = "SELECT term, n FROM search_df WHERE num = %s AND term = ANY(%s)"
SEARCH_DROP_DF = "DELETE FROM search_df WHERE num = %s"


SEARCH_RANK_DETAILS = ("event_id", "role", "ts", "text", "meta", "digest", "chain", "collapse", "novelty")


def search_rank_sql(n_lexemes: int, phrases: list[int], *, exclude: bool = True, seen: bool = False) -> str:
    """The best rows of one session for an OR of terms, ranked by FTS5's bm25 computed in the statement.

    Lexeme j is parameter %(tJ)s; `phrases` lists each query phrase's lexeme index, in the query's
    order; phrase i's idf is %(wI)s. Other params: %(num)s the session, %(q)s the tsquery (which rows
    to score), %(tw)s / %(cw)s the column weights, %(avgdl)s, %(limit)s; with `exclude`, %(exclude)s
    (seqs, bigint[]: left out when there are none, so no row pays for an empty `<> ALL`); with `seen`,
    %(seen)s a tsquery whose rows an earlier statement scored already (left out here).
    Columns: seq, n_text + n_context, each lexeme's packed count (NULL when absent), then
    SEARCH_RANK_DETAILS (what the hit shows: read here for the kept rows only, no second statement).
    The rows come in no particular order. The score repeats fts5Bm25Function's arithmetic, except that
    a phrase's frequency is count * weight rather than weight added count times: the kept rows' bm25 is
    computed again exactly by the caller (storage/pg/terms.py), which is why it asks for a few rows more.
    `num = %(num)s` is applied above the GIN scan (not ANDed with the primary key's bitmap, which would
    read every row id of the session): the session-prefixed lexemes already scope the rows; it makes
    sure of it.
    """
    if isinstance(n_lexemes, bool) or not isinstance(n_lexemes, int) or n_lexemes < 1:
        raise ValueError(f"n_lexemes {n_lexemes!r}: must be a positive integer")
    if not phrases or any(isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n_lexemes for j in phrases):
        raise ValueError(f"phrases {phrases!r}: lexeme indexes below {n_lexemes}")
    counts = ", ".join(f"(tf ->> %(t{j})s)::int8 AS c{j}" for j in range(n_lexemes))
    cs = ", ".join(f"c{j}" for j in range(n_lexemes))
    freqs = ", ".join(
        f"coalesce((c{j} >> 32) * %(tw)s::float8 + (c{j} & 4294967295) * %(cw)s::float8, 0) AS f{j}"
        for j in range(n_lexemes)
    )
    score = " + ".join(f"%(w{i})s::float8 * ((f{j} * 2.2::float8) / (f{j} + k))" for i, j in enumerate(phrases))
    where = "lex @@ %(q)s::tsquery"
    if seen:
        where += " AND NOT lex @@ %(seen)s::tsquery"
    if exclude:
        where += " AND seq <> ALL(%(exclude)s::bigint[])"
    rcs = ", ".join(f"r.c{j}" for j in range(n_lexemes))
    details = ", ".join(f"e.{c}" for c in SEARCH_RANK_DETAILS)
    return (
        f"SELECT r.seq, r.d, {rcs}, {details} FROM ("
        f"SELECT seq, d, {cs} FROM ("
        f"SELECT seq, d, {cs}, {freqs},"
        " 1.2::float8 * (1 - 0.75::float8 + 0.75::float8 * d / %(avgdl)s::float8) AS k FROM ("
        f"SELECT num, seq, n_text + n_context AS d, {counts} FROM search_events"
        f" WHERE {where} OFFSET 0) AS m WHERE num = %(num)s OFFSET 0) AS f"
        f" ORDER BY {score} DESC, seq LIMIT %(limit)s) AS r"
        " JOIN search_events AS e ON e.num = %(num)s AND e.seq = r.seq"
    )


def search_scan_sql(n_terms: int) -> str:
    """Every row of one session matching a tsquery, with its token count and the counts of n terms.

    Params: (term1, ..., termN, tsquery text, num). Columns: seq, n_text + n_context, then for each
    term its jsonb [count in text, count in context] or NULL.
    """
    if isinstance(n_terms, bool) or not isinstance(n_terms, int) or n_terms < 1:
        raise ValueError(f"n_terms {n_terms!r}: must be a positive integer")
    counts = ", ".join(["tf -> %s"] * n_terms)
    return (
        f"SELECT seq, n_text + n_context, {counts} FROM search_events"
        " WHERE lex @@ %s::tsquery AND num = %s"
    )


# -- receipts, the producer's Merkle tree, checkpoints (storage/pg/receipts.py, storage/pg/merkle.py) ---------
# `receipts.envelope` is the exact bytes of the receipt file the file backend writes (receipts.body.dump_file),
# so a visitor's download and `receipts verify` cannot tell the backends apart; the other columns are derived
# from its body (the file backend's index.sqlite `receipts` row). `n` keeps the write order (files: mtime).
# `receipt_pending_cites` is the `.cites` record a turn writes before its answer is appended.
# `merkle_nodes` holds complete subtrees only (node (level, idx) covers leaves [idx * 2^level, (idx+1) * 2^level)),
# written once and never changed; `merkle_trees.size` is the leaf count, and its row is what an appender locks
# (FOR UPDATE) so two appenders anywhere are serialised even without the turn lock.
# `checkpoints.data` is the exact bytes of checkpoint.json (JCS + newline); the upsert only ever raises tree_size.
RECEIPTS_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS receipts (
        receipt_id    text PRIMARY KEY,
        session       text NOT NULL,
        n             bigint GENERATED ALWAYS AS IDENTITY,
        envelope      bytea NOT NULL,
        issued_at     text,
        user_seq      bigint,
        assistant_seq bigint,
        tree_size     bigint,
        root          text,
        memories      integer,
        provider      text,
        model         text
    )
    """,
    "CREATE INDEX IF NOT EXISTS receipts_by_session ON receipts (session, n)",
    """
    CREATE TABLE IF NOT EXISTS receipt_cites (
        session    text   NOT NULL,
        cited_seq  bigint NOT NULL,
        answer_seq bigint NOT NULL,
        receipt_id text   NOT NULL,
        PRIMARY KEY (session, cited_seq, answer_seq)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS receipt_pending_cites (
        session      text     NOT NULL,
        receipt_id   text     NOT NULL,
        question_seq bigint   NOT NULL,
        memory_seqs  bigint[] NOT NULL,
        PRIMARY KEY (session, receipt_id)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS merkle_trees (
        session text   PRIMARY KEY,
        size    bigint NOT NULL CHECK (size >= 0)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS merkle_nodes (
        session text     NOT NULL,
        level   smallint NOT NULL,
        idx     bigint   NOT NULL,
        hash    bytea    NOT NULL CHECK (octet_length(hash) = 32),
        PRIMARY KEY (session, level, idx)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS checkpoints (
        session    text   PRIMARY KEY,
        tree_size  bigint NOT NULL CHECK (tree_size >= 1),
        data       bytea  NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
]
# the turn lock: a transaction-scoped advisory lock, released by commit, rollback or a lost connection; its
# key space ('mre-turn:' || session) is not the ledger's (a row lock on sessions), so a turn's own append on
# another connection never waits for it
TURN_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('mre-turn:' || %s, 0))"
# the lock's transaction idles through the model call: an operator's idle_in_transaction_session_timeout must not
# end it (and with it the lock) in the middle of a turn
TURN_LOCK_NO_IDLE_TIMEOUT = "SET LOCAL idle_in_transaction_session_timeout = 0"
RECEIPT_INSERT = """
INSERT INTO receipts (receipt_id, session, envelope) VALUES (%s, %s, %s)
ON CONFLICT (receipt_id) DO UPDATE SET envelope = EXCLUDED.envelope WHERE receipts.session = EXCLUDED.session
"""
RECEIPT_REPLACE = "UPDATE receipts SET envelope = %s WHERE session = %s AND receipt_id = %s"
# a migration's look before it copies a receipt file: whose it is, and whether the bytes are the same (params: data, id)
RECEIPT_COMPARE = "SELECT session, envelope = %s FROM receipts WHERE receipt_id = %s"
RECEIPT_SET_ROW = """
UPDATE receipts SET issued_at = %(issued_at)s, user_seq = %(user_seq)s, assistant_seq = %(assistant_seq)s,
    tree_size = %(tree_size)s, root = %(root)s, memories = %(memories)s, provider = %(provider)s, model = %(model)s
WHERE session = %(session)s AND receipt_id = %(receipt_id)s
"""
# the size first, the bytes only when under the cap (params: cap, session, receipt_id)
RECEIPT_READ = """
SELECT octet_length(envelope), CASE WHEN octet_length(envelope) <= %s THEN envelope END
FROM receipts WHERE session = %s AND receipt_id = %s
"""
RECEIPT_IDS = "SELECT receipt_id FROM receipts WHERE session = %s ORDER BY n"
# a replica's receipt copies checked against the rows (storage.pg.receipts.PgReceipts.sweep_copies)
RECEIPT_DIGESTS = "SELECT receipt_id, sha256(envelope) FROM receipts WHERE session = %s AND receipt_id = ANY(%s)"
RECEIPT_DELETE = "DELETE FROM receipts WHERE session = %s AND receipt_id = %s"
RECEIPT_DELETE_SOME = "DELETE FROM receipts WHERE session = %s AND receipt_id = ANY(%s)"
RECEIPT_DELETE_SESSION = "DELETE FROM receipts WHERE session = %s"
CITES_RECORD = """
INSERT INTO receipt_cites (session, cited_seq, answer_seq, receipt_id)
SELECT %s, cited, %s, %s FROM unnest(%s::bigint[]) AS cited
ON CONFLICT DO NOTHING
"""
CITES_ANSWERS = "SELECT cited_seq, answer_seq FROM receipt_cites WHERE session = %s AND cited_seq = ANY(%s)"
# the answers after a seq that a turn's cites account for (params: session, after_seq)
CITES_ANSWERED = "SELECT DISTINCT answer_seq FROM receipt_cites WHERE session = %s AND answer_seq > %s"
CITES_DELETE_SESSION = "DELETE FROM receipt_cites WHERE session = %s"
CITES_DELETE_SOME = "DELETE FROM receipt_cites WHERE session = %s AND receipt_id = ANY(%s)"
PENDING_WRITE = """
INSERT INTO receipt_pending_cites (session, receipt_id, question_seq, memory_seqs) VALUES (%s, %s, %s, %s)
ON CONFLICT (session, receipt_id) DO UPDATE SET question_seq = EXCLUDED.question_seq, memory_seqs = EXCLUDED.memory_seqs
"""
# a commit that does not wait for its WAL flush (a later synchronous commit flushes it: the WAL is one ordered log)
COMMIT_WITHOUT_FLUSH = "SET LOCAL synchronous_commit = off"
PENDING_DROP = "DELETE FROM receipt_pending_cites WHERE session = %s AND receipt_id = %s"
PENDING_LIST = "SELECT receipt_id, question_seq, memory_seqs FROM receipt_pending_cites WHERE session = %s ORDER BY receipt_id"
PENDING_DELETE_SESSION = "DELETE FROM receipt_pending_cites WHERE session = %s"
MERKLE_NEW_TREE = "INSERT INTO merkle_trees (session, size) VALUES (%s, 0) ON CONFLICT (session) DO NOTHING"
MERKLE_LOCK_TREE = "SELECT size FROM merkle_trees WHERE session = %s FOR UPDATE"
MERKLE_SIZE = "SELECT size FROM merkle_trees WHERE session = %s"
MERKLE_SET_SIZE = "UPDATE merkle_trees SET size = %s WHERE session = %s"
# the nodes at (level, idx) pairs, in one round trip (params: session, levels smallint[], idxs bigint[])
MERKLE_NODES = """
SELECT n.level, n.idx, n.hash FROM merkle_nodes n
JOIN unnest(%s::smallint[], %s::bigint[]) AS w (level, idx) ON n.level = w.level AND n.idx = w.idx
WHERE n.session = %s
"""
MERKLE_COPY_NODES = "COPY merkle_nodes (session, level, idx, hash) FROM STDIN (FORMAT BINARY)"
MERKLE_COPY_TYPES = ("text", "int2", "int8", "bytea")
# every node no longer complete in a tree of %s leaves (params: size, session)
MERKLE_TRUNCATE = "DELETE FROM merkle_nodes WHERE idx >= (%s::bigint >> level) AND session = %s"
MERKLE_DELETE_NODES = "DELETE FROM merkle_nodes WHERE session = %s"
MERKLE_DELETE_TREE = "DELETE FROM merkle_trees WHERE session = %s"
# replaces the kept checkpoint unless a larger tree's is there: a slower replica never moves it back
# (params: session, tree_size, data); returns a row when it was written
CHECKPOINT_KEEP = """
INSERT INTO checkpoints AS c (session, tree_size, data) VALUES (%s, %s, %s)
ON CONFLICT (session) DO UPDATE SET tree_size = EXCLUDED.tree_size, data = EXCLUDED.data, updated_at = now()
WHERE c.tree_size <= EXCLUDED.tree_size
RETURNING tree_size
"""
CHECKPOINT_REPLACE = """
INSERT INTO checkpoints AS c (session, tree_size, data) VALUES (%s, %s, %s)
ON CONFLICT (session) DO UPDATE SET tree_size = EXCLUDED.tree_size, data = EXCLUDED.data, updated_at = now()
RETURNING tree_size
"""
CHECKPOINT_READ = "SELECT octet_length(data), CASE WHEN octet_length(data) <= %s THEN data END FROM checkpoints WHERE session = %s"
CHECKPOINT_DELETE = "DELETE FROM checkpoints WHERE session = %s"
# VACUUM cannot run in a transaction block: on an autocommit connection, after a session's receipts were deleted
RECEIPTS_VACUUM = ("VACUUM receipts", "VACUUM receipt_cites", "VACUUM receipt_pending_cites", "VACUUM checkpoints")


SCHEMA: list[str] = [META_TABLE, *LEDGER_SCHEMA, *LEDGER_IMPORTS_SCHEMA, *SEARCH_SCHEMA, *RECEIPTS_SCHEMA]


# -- consent proposals and per-session settings (storage/pg/consent.py; chat/consent.py, control/settings.py) --------
# What DATA_DIR/proposals/ and sessions/<s>/settings.json hold on files, shared by every replica. Additive
# (CREATE … IF NOT EXISTS): a database made before them gains them at the start that records a newer SCHEMA_VERSION
# (tests/storage/test_pg_schema_roles.py pins SCHEMA's digest, so a change without a bump fails).
# `consent_secret`: one row (id 1), created once by whichever replica gets there first; every replica MACs with it.
# `consent_proposals`: one row per proposal; `pending` is the JSON the file backend writes, dropped (NULL) when
# the token is spent — the question leaves the database with it, the row stays as the tombstone.
CONSENT_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS consent_secret (
        id         smallint PRIMARY KEY CHECK (id = 1),
        secret     bytea NOT NULL CHECK (octet_length(secret) = 32),
        created_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS consent_proposals (
        nonce      text PRIMARY KEY CHECK (nonce ~ '^[0-9a-f]{32}$'),
        session    text NOT NULL,
        expires    bigint NOT NULL,
        state      text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'used', 'cancelled', 'expired')),
        pending    text CHECK ((state = 'waiting') = (pending IS NOT NULL)),
        created_at timestamptz NOT NULL DEFAULT now(),
        spent_at   timestamptz
    )
    """,
    "CREATE INDEX IF NOT EXISTS consent_proposals_session ON consent_proposals (session)",
    "CREATE INDEX IF NOT EXISTS consent_proposals_expires ON consent_proposals (expires)",
    """
    CREATE TABLE IF NOT EXISTS session_settings (
        session    text PRIMARY KEY,
        consent    boolean NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    )
    """,
    # control.suggestions: seqs, ids, the model's id and when; never a text
    """
    CREATE TABLE IF NOT EXISTS supersession_suggestions (
        session      text NOT NULL,
        new_seq      bigint NOT NULL,
        older_seq    bigint NOT NULL,
        new_id       text NOT NULL,
        older_id     text NOT NULL,
        suggested_by text NOT NULL,
        at           text NOT NULL,
        PRIMARY KEY (session, new_seq, older_seq)
    )
    """,
]
SCHEMA.extend(CONSENT_SCHEMA)
# created once: every replica inserts its own random candidate, then all read the one that won (params: secret)
CONSENT_SECRET_CREATE = "INSERT INTO consent_secret (id, secret) VALUES (1, %s) ON CONFLICT (id) DO NOTHING"
CONSENT_SECRET_READ = "SELECT secret FROM consent_secret WHERE id = 1"
# params: nonce, session, expires, pending
PROPOSAL_SAVE = "INSERT INTO consent_proposals (nonce, session, expires, pending) VALUES (%s, %s, %s, %s)"
PROPOSAL_LOAD = "SELECT pending FROM consent_proposals WHERE nonce = %s AND state = 'waiting'"
# the claim: of two spends on any replicas, exactly one finds the row waiting (params: how, nonce)
PROPOSAL_SPEND = """
UPDATE consent_proposals SET state = %s, pending = NULL, spent_at = now()
WHERE nonce = %s AND state = 'waiting'
RETURNING session
"""
PROPOSAL_SPENT = "SELECT state FROM consent_proposals WHERE nonce = %s AND state <> 'waiting'"
# a waiting proposal goes a minute after its expiry (as the file's mtime rule); a tombstone, which holds no
# question, a token lifetime later still, so a spent token is called used rather than expired meanwhile
# (params: now - 60, now - ttl - 60)
PROPOSAL_SWEEP = """
DELETE FROM consent_proposals
WHERE (state = 'waiting' AND expires < %s) OR (state <> 'waiting' AND expires < %s)
"""
PROPOSAL_DELETE_SESSION = "DELETE FROM consent_proposals WHERE session = %s"
SETTINGS_GET = "SELECT consent FROM session_settings WHERE session = %(session)s"
# a session is known when the ledger holds it or it has settings already (the folder test of the file backend);
# `create` sets it for a session with no event yet. No row returned: an unknown session.
SETTINGS_SET = """
INSERT INTO session_settings AS s (session, consent)
SELECT %(session)s, %(consent)s
WHERE %(create)s
   OR EXISTS (SELECT 1 FROM sessions WHERE session = %(session)s)
   OR EXISTS (SELECT 1 FROM session_settings WHERE session = %(session)s)
ON CONFLICT (session) DO UPDATE SET consent = EXCLUDED.consent, updated_at = now()
RETURNING s.consent
"""
SETTINGS_DELETE_SESSION = "DELETE FROM session_settings WHERE session = %(session)s"
SUGGESTION_ADD = """
INSERT INTO supersession_suggestions (session, new_seq, older_seq, new_id, older_id, suggested_by, at)
VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session, new_seq, older_seq) DO NOTHING
"""
SUGGESTION_ALL = """
SELECT new_seq, new_id, older_seq, older_id, suggested_by, at FROM supersession_suggestions
WHERE session = %s ORDER BY new_seq, older_seq
"""
SUGGESTION_DROP = "DELETE FROM supersession_suggestions WHERE session = %s AND new_seq = %s AND older_seq = %s"
SUGGESTION_DELETE_SESSION = "DELETE FROM supersession_suggestions WHERE session = %s"

# -- control state (control.revocation.current on PostgreSQL) ---------------------------------------
# The lines that can change a session's control state: control events, supersession and erasure records are
# all role 'system' (receipts.decisions.control_of, ledger.supersessions.supersession_of, ledger erasure);
# any other line only moves size and head. Read server-side over the (session, seq) key, few rows returned.
# Chosen by the line's own bytes, never the `role` column: the column is outside the chain, so an edit to it would
# pass every verification; in a canonical line `"role":"system"` with bare quotes can only be the role member (a
# quote inside a string is escaped). (params: session, from seq, to seq exclusive)
SYSTEM_ROLE_IN_LINE = "position('\"role\":\"system\"'::bytea in line) > 0"
CONTROL_SYSTEM_LINES = f"""
SELECT seq, line FROM events
WHERE session = %s AND seq >= %s AND seq < %s AND {SYSTEM_ROLE_IN_LINE}
ORDER BY seq
"""

# -- sessions imported from bundles (storage/pg/imports.py; docs/FORMAT.md §21) ---------------------------------------
# Every event hashes its session id, so an imported ledger keeps its original id, which may be a session of this
# database (the visitor's own, exported and brought back) or of another import: each import lives in a schema of
# its own (`schema_name`: the tables of SCHEMA, created by storage.pg.connect.Database over a search_path naming only
# that schema), as each file-backed import lives in a data directory of its own. `bundle_imports`, in the main
# schema, is origin.json: an import exists once its row does (inserted last; a schema without a row is a crashed
# import, dropped by a later one). `bundle_members`, in the import's schema, holds the certificates and keys its
# bundle carried (the file backend's erasures/ and bundle-keys/).
BUNDLE_IMPORTS_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS bundle_imports (
        local text PRIMARY KEY,
        schema_name text NOT NULL UNIQUE,
        session text NOT NULL,
        signer text NOT NULL,
        events bigint NOT NULL,
        chain_head text NOT NULL,
        bundle_sha256 text NOT NULL,
        verdict text NOT NULL,
        imported_at text NOT NULL,
        UNIQUE (session, signer, events, chain_head)
    )
    """,
    "CREATE TABLE IF NOT EXISTS bundle_members (name text PRIMARY KEY, data bytea NOT NULL)",
]
SCHEMA.extend(BUNDLE_IMPORTS_SCHEMA)
_BUNDLE_IMPORT_COLUMNS = "local, session, signer, events, chain_head, bundle_sha256, verdict, imported_at, schema_name"
BUNDLE_IMPORTS = f'SELECT {_BUNDLE_IMPORT_COLUMNS} FROM bundle_imports ORDER BY local COLLATE "C"'
BUNDLE_IMPORT_GET = f"SELECT {_BUNDLE_IMPORT_COLUMNS} FROM bundle_imports WHERE local = %s"
BUNDLE_IMPORT_SAME = (
    f"SELECT {_BUNDLE_IMPORT_COLUMNS} FROM bundle_imports WHERE session = %s AND signer = %s AND events = %s AND chain_head = %s"
)
# the import's commit point; nothing returned when its local id or its ledger (session, signer, events, head) is taken
BUNDLE_IMPORT_ADD = f"""
INSERT INTO bundle_imports ({_BUNDLE_IMPORT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT DO NOTHING RETURNING local
"""
BUNDLE_SCHEMA_PREFIX = "mre_import_"
BUNDLE_SCHEMAS = r"SELECT nspname FROM pg_namespace WHERE nspname LIKE 'mre\_import\_%'"
BUNDLE_SCHEMAS_USED = "SELECT schema_name FROM bundle_imports"
BUNDLE_CREATE_SCHEMA = "CREATE SCHEMA {}"  # psycopg.sql.Identifier of the schema
BUNDLE_DROP_SCHEMA = "DROP SCHEMA IF EXISTS {} CASCADE"
BUNDLE_MEMBER_ADD = "INSERT INTO bundle_members (name, data) VALUES (%s, %s)"
BUNDLE_MEMBERS = "SELECT name, data FROM bundle_members WHERE starts_with(name, %s) ORDER BY name"

# -- the tails `python -m ledger repair` cut (storage/pg/repair.py; README "A corrupted line in the middle") ---------
# A repair deletes a broken session's rows from a seq on, in the transaction that keeps them here: `data` is those
# rows byte for byte as the JSONL file would hold them (each line and its newline, in seq order), `sha256` its digest
# (hex) and `name` the file name the repair's note event records (`events.jsonl.cut-<seq>-<utc>`, as on files). This
# row is the record; a copy under DATA_DIR/sessions/<session>/ is for a person to open. Kept until the session is
# deleted (ON DELETE CASCADE with its `sessions` row; PgLedger.vacuum then VACUUMs this table too).
LEDGER_CUTS_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS ledger_cuts (
        session      text   NOT NULL REFERENCES sessions (session) ON DELETE CASCADE,
        cut_from_seq bigint NOT NULL,
        made_at      text   NOT NULL,
        name         text   NOT NULL,
        data         bytea  NOT NULL,
        sha256       text   NOT NULL,
        PRIMARY KEY (session, name)
    )
    """,
]
SCHEMA.extend(LEDGER_CUTS_SCHEMA)
# (session, from seq): the rows a cut there moves aside, and their bytes as JSONL
LEDGER_CUT_SIZE = "SELECT count(*), coalesce(sum(octet_length(line) + 1), 0) FROM events WHERE session = %s AND seq >= %s"
LEDGER_LINES_BEFORE = "SELECT line FROM events WHERE session = %s AND seq < %s ORDER BY seq"
LEDGER_LINES_SINCE = "SELECT line FROM events WHERE session = %s AND seq >= %s ORDER BY seq"
# the cut rows kept in one statement, their bytes joined on the server (no round trip of the data); returns what it
# kept, which the caller compares with what it streamed into the note (and the copy)
LEDGER_CUT_KEEP = """
WITH cut AS (
    SELECT coalesce(string_agg(line || decode('0a', 'hex'), ''::bytea ORDER BY seq), ''::bytea) AS data
    FROM events WHERE session = %(session)s AND seq >= %(seq)s
)
INSERT INTO ledger_cuts (session, cut_from_seq, made_at, name, data, sha256)
SELECT %(session)s, %(seq)s, %(made_at)s, %(name)s, data, encode(sha256(data), 'hex') FROM cut
RETURNING octet_length(data), sha256
"""
LEDGER_CUT_DELETE = "DELETE FROM events WHERE session = %s AND seq >= %s"
LEDGER_CUTS = "SELECT cut_from_seq, made_at, name, data, sha256 FROM ledger_cuts WHERE session = %s ORDER BY made_at, name"
LEDGER_CUTS_VACUUM = "VACUUM ledger_cuts"

# -- erasures stopped half way (control.forget, control.settle; docs/BACKENDS.md) ----------------------------------------
# The journal of an erasure in progress (control.steps: seqs and receipt ids, never a text), so that every replica sees
# it pending, not only the one whose DATA_DIR would hold `erasures/.pending-<session>.json`: any replica's copy of the
# session (export, receipt download, search, turn) finishes it first (control.settle), and any replica's recover does.
# `token`: the erasure's own id. Inserted in PgLedger.erase's transaction (so it is there exactly when the ledger
# changed), or, for a whole session, before anything is deleted, with `certificate`: the certificate's file (hashes
# only), which a replica that finishes the deletion writes into its own DATA_DIR. Deleted when the steps have finished.
ERASURES_PENDING_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS erasures_pending (
        token       text PRIMARY KEY,
        session     text NOT NULL,
        journal     bytea NOT NULL,
        certificate bytea,
        made_at     timestamptz NOT NULL DEFAULT clock_timestamp()
    )
    """,
    "CREATE INDEX IF NOT EXISTS erasures_pending_by_session ON erasures_pending (session)",
]
SCHEMA.extend(ERASURES_PENDING_SCHEMA)
ERASURE_PENDING_ADD = "INSERT INTO erasures_pending (token, session, journal, certificate) VALUES (%s, %s, %s, %s)"
ERASURES_PENDING = "SELECT token, session FROM erasures_pending ORDER BY made_at, token"
ERASURES_PENDING_OF = "SELECT token, session FROM erasures_pending WHERE session = %s ORDER BY made_at, token"
ERASURE_PENDING_READ = "SELECT journal, certificate FROM erasures_pending WHERE token = %s"
ERASURE_PENDING_DONE = "DELETE FROM erasures_pending WHERE token = %s"
# -- the semantic extra's vectors (storage/pg/vectors.py; issue 35) --------------------------------------------------
# One row per embedded event: its float16 vector (retrieval.semantic.to_blob, 768 bytes). Derived like every search row,
# and tied to its event's row by the foreign key: forgetting an event, re-indexing a session, dropping it (the cascade
# from search_sessions) or a rebuild (the TRUNCATE) takes its vector too. Empty without the extra.
SEARCH_VECTORS_SCHEMA = [
    """
    CREATE TABLE IF NOT EXISTS search_vectors (
        num bigint NOT NULL,
        seq bigint NOT NULL,
        vec bytea NOT NULL,
        PRIMARY KEY (num, seq),
        FOREIGN KEY (num, seq) REFERENCES search_events (num, seq) ON DELETE CASCADE
    )
    """,
]
SCHEMA.extend(SEARCH_VECTORS_SCHEMA)
# the session's events with no vector yet, newest first (params: num, limit)
SEARCH_VECTORS_PENDING = (
    "SELECT e.seq, e.text FROM search_events AS e WHERE e.num = %s"
    " AND NOT EXISTS (SELECT 1 FROM search_vectors AS v WHERE v.num = e.num AND v.seq = e.seq)"
    " ORDER BY e.seq DESC LIMIT %s"
)
SEARCH_VECTORS_PENDING_OLDEST = SEARCH_VECTORS_PENDING.replace("ORDER BY e.seq DESC", "ORDER BY e.seq")  # a whole session
# vectors kept only for events whose row is still there (params: num, seqs bigint[], vecs bytea[], num)
SEARCH_VECTORS_PUT = (
    "INSERT INTO search_vectors (num, seq, vec) SELECT %s, u.s, u.v FROM unnest(%s::bigint[], %s::bytea[]) AS u (s, v)"
    " WHERE EXISTS (SELECT 1 FROM search_events AS e WHERE e.num = %s AND e.seq = u.s)"
    " ON CONFLICT (num, seq) DO UPDATE SET vec = EXCLUDED.vec"
)
# how many of the session's events have no vector yet (params: num, num)
SEARCH_VECTORS_MISSING = (
    "SELECT (SELECT count(*) FROM search_events WHERE num = %s) - (SELECT count(*) FROM search_vectors WHERE num = %s)"
)
SEARCH_VECTORS_STATE = "SELECT count(*), coalesce(sum(seq), 0) FROM search_vectors WHERE num = %s"
SEARCH_VECTORS_OF = "SELECT seq, vec FROM search_vectors WHERE num = %s ORDER BY seq"
SEARCH_VECTORS_AFTER = "SELECT seq, vec FROM search_vectors WHERE num = %s AND seq > %s ORDER BY seq"  # new ones
SEARCH_VECTOR_SEQS = (
    "SELECT v.seq FROM search_vectors AS v JOIN search_sessions AS s ON s.num = v.num WHERE s.session = %s ORDER BY v.seq"
)

ERASURE_PENDING_ANY = "SELECT EXISTS (SELECT 1 FROM erasures_pending WHERE session = %s)"
