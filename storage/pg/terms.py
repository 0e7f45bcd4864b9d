"""The terms PostgreSQL's search index stores, and FTS5's bm25 over them (no PostgreSQL here).

Both backends must see the same terms: PostgreSQL's own parsers and snowball stemmers split and stem
differently from FTS5's `porter unicode61 remove_diacritics 1`. So the terms are made by that very
tokenizer, run by the stdlib sqlite3 on an in-memory FTS5 table (its `fts5vocab` instance table
lists each token's term), and stored in PostgreSQL as they are: a tsvector of the distinct terms
(array_to_tsvector: no parsing, no stemming, no stop words there) for the GIN index, and each
term's count in the event's text and in its context for the scoring.

`bm25` is FTS5's formula (fts5_aux.c, fts5Bm25Function) over those counts and the session's
statistics, so a PostgreSQL search ranks with the same numbers as the SQLite one.
"""

from __future__ import annotations

import functools
import hashlib
import math
import sqlite3
from collections import Counter
from collections.abc import Sequence

from retrieval.sql import TOKENIZER

K1 = 1.2  # fts5_aux.c
B = 0.75
IDF_FLOOR = 1e-6  # a term in half the rows or more: FTS5 clamps its idf to this
# PostgreSQL refuses a lexeme of 2,048 bytes or more and a btree key of about 2,700: a longer term (a
# pasted blob without spaces is one token) is stored as its first 64 bytes and a digest of the whole
MAX_TERM_BYTES = 256


COUNT_BITS = 32  # a term's counts are packed in one integer: (count in the text << 32) | count in the context
COUNT_MASK = (1 << COUNT_BITS) - 1


def pack(in_text: int, in_context: int) -> int:
    return (in_text << COUNT_BITS) | in_context


def unpack(packed: int) -> tuple[int, int]:
    return packed >> COUNT_BITS, packed & COUNT_MASK


def packed_counts(text: Counter[str], context: Counter[str]) -> dict[str, int]:
    """One row's `tf`: each term of its text or context with its packed counts."""
    return {t: pack(text.get(t, 0), context.get(t, 0)) for t in text.keys() | context.keys()}


def term_counts(texts: Sequence[str]) -> list[Counter[str]]:
    """Each text's terms (FTS5's tokens, stemmed by its porter tokenizer, as `key` stores them) with their counts."""
    out: list[Counter[str]] = [Counter() for _ in texts]
    if not texts:
        return out
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", ((i + 1, s) for i, s in enumerate(texts)))
        for doc, term, n in conn.execute("SELECT doc, term, count(*) FROM v GROUP BY doc, term"):
            out[doc - 1][key(term)] = n
    finally:
        conn.close()
    return out


@functools.lru_cache(maxsize=1 << 14)
def phrase_terms(token: str) -> tuple[str, ...]:
    """The terms FTS5 makes of one quoted query token (`"dogs"` -> ("dog",)); usually exactly one."""
    return tuple(term_counts([token])[0])


def key(term: str) -> str:
    """How a term is stored (in tf, search_df, search_terms, the tsvector): itself, or when too long for
    PostgreSQL's indexes its first 64 bytes, '#' and its SHA-256 (a term never holds '#')."""
    if len(term) * 4 <= MAX_TERM_BYTES:
        return term
    raw = term.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_TERM_BYTES:
        return term
    return raw[:64].decode("utf-8", "ignore") + "#" + hashlib.sha256(raw).hexdigest()


def lexeme(num: int, term: str) -> str:
    """The tsvector lexeme of a stored term (`key`) in session `num`: one GIN posting list per session and term."""
    return f"{num}_{term}"


def _quoted(lex: str) -> str:
    return "'" + lex.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector_literal(num: int, terms: Sequence[str]) -> str:
    """The text form of a tsvector holding `terms` (no positions)."""
    return " ".join(_quoted(lexeme(num, t)) for t in sorted(set(terms)))


def tsquery_literal(num: int, terms: Sequence[str]) -> str:
    """The text form of a tsquery matching any of `terms`."""
    return " | ".join(_quoted(lexeme(num, t)) for t in sorted(set(terms)))


def tsquery_of_sets(num: int, sets: Sequence[Sequence[str]]) -> str:
    """The text form of a tsquery matching the rows that hold every term of at least one of `sets`."""
    return " | ".join("(" + " & ".join(_quoted(lexeme(num, t)) for t in sorted(set(ts))) + ")" for ts in sets)


def idf(n_rows: int, n_matching: int) -> float:
    """FTS5's: log((N - n + 0.5) / (n + 0.5)), never below IDF_FLOOR."""
    value = math.log((n_rows - n_matching + 0.5) / (n_matching + 0.5))
    return value if value > 0.0 else IDF_FLOOR


def phrase_freq(in_text: int, in_context: int, text_weight: float, context_weight: float) -> float:
    """FTS5 adds each instance's column weight one by one, text first (rounding included)."""
    f = 0.0
    for _ in range(in_text):
        f += text_weight
    for _ in range(in_context):
        f += context_weight
    return f


def bm25(freqs: Sequence[float], idfs: Sequence[float], n_tokens: int, avgdl: float) -> float:
    """FTS5's bm25() of one row: negative, lower is better. `n_tokens`: the row's tokens in every column."""
    score = 0.0
    d = float(n_tokens)
    for f, w in zip(freqs, idfs, strict=True):
        score += w * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl)))
    return -1.0 * score
