"""Tokenizing, term normalisation and FTS5 query building (pure functions).

The index's FTS5 tokenizer is `porter unicode61 remove_diacritics 1`
(docs/RETRIEVAL.md says why). The Python side splits text the way unicode61
does (runs of letters and digits), folds case and diacritics, and applies a
light suffix stripper: its terms feed the novelty estimate and the per-session
document frequencies, never the FTS index itself, so they only need to be
stable, not identical to porter's stems.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Letters and digits; `_`, punctuation, symbols, emoji, controls and NUL split.
_TOKEN_RE = re.compile(r"[^\W_]+")

# How many distinct terms one query may carry: a pasted page of text must not
# turn into a thousand-way OR (its cost grows with every doclist read). Which
# ones are kept is chosen by weight (choose_terms: the session's rarest first).
MAX_QUERY_TERMS = 32

# A classic English stop list (the SMART/NLTK core) plus conversational filler.
# Dropping these makes a query cheaper and sharper: "what did she say about the
# dog" searches for "dog", not for every turn holding "the".
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being below
    between both but by can cannot could couldn d did didn do does doesn doing don down during each few for
    from further had hadn has hasn have haven having he her here hers herself him himself his how i if in
    into is isn it its itself just ll m me more most mustn my myself no nor not now o of off on once only or
    other our ours ourselves out over own re s same shan she should shouldn so some such t than that the
    their theirs them themselves then there these they this those through to too under until up ve very
    was wasn we were weren what when where which while who whom why will with won would wouldn y you your
    yours yourself yourselves also ever every get got gets let lets like may might must oh ok okay yeah yes
    hey hi hello us
    """.split()
)


def fold(text: str) -> str:
    """Lower-case and strip diacritics (what `remove_diacritics 1` does to Latin script)."""
    if text.isascii():  # NFKD leaves ASCII as it is and it holds no combining marks: the same result, 10x faster
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def tokens(text: str) -> list[str]:
    """The folded word tokens of `text`, in order, repeats kept."""
    return _TOKEN_RE.findall(fold(text))


@functools.lru_cache(maxsize=1 << 16)
def stem(token: str) -> str:
    """A light, deterministic suffix stripper (plurals, -ing, -ed, -ly).

    Good enough to count "dogs" and "dog" as one term when judging novelty;
    the search itself relies on FTS5's porter stemmer.
    """
    if len(token) <= 3 or not token.isalpha():
        return token
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("ly", ""), ("es", ""), ("s", "")):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            if suffix == "s" and token.endswith(("ss", "us", "is")):
                return token
            if suffix == "es" and not token.endswith(("ches", "shes", "sses", "xes", "zes")):
                continue
            base = token[: len(token) - len(suffix)] + keep
            if suffix in ("ing", "ed") and len(base) >= 3 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # running -> run, stopped -> stop
            return base
    return token


@functools.lru_cache(maxsize=1 << 16)
def _content_term(tok: str) -> str | None:
    """The content term a token counts as, or None for a stop word or a 1-letter word (cached: indexing a
    session meets the same few thousand tokens millions of times)."""
    if tok in STOP_WORDS or (len(tok) == 1 and not tok.isdigit()):
        return None
    return stem(tok)


def content_terms(text: str) -> list[str]:
    """Distinct content terms of `text` in first-seen order: stemmed, no stop words, no 1-letter words."""
    return [t for t in dict.fromkeys(map(_content_term, tokens(text))) if t is not None]


def quote(token: str) -> str:
    """One FTS5 string: double quotes around it, inner quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Query:
    """A user string made safe for FTS5 MATCH.

    `fts` is None when nothing in the input is searchable; `reason` then says why.
    `terms` are the folded tokens that were kept (FTS5 stems them itself).
    """

    text: str
    terms: tuple[str, ...]
    fts: str | None
    reason: str | None = None


def query_tokens(text: str) -> list[str]:
    """Distinct searchable tokens of a user string: folded, stop words and 1-letter words dropped."""
    out: dict[str, None] = {}
    for tok in tokens(text):
        if tok in STOP_WORDS or (len(tok) == 1 and not tok.isdigit()):
            continue
        out.setdefault(tok, None)
    return list(out)


def build_query(text: str, *, max_terms: int | None = MAX_QUERY_TERMS) -> Query:
    """Turn any string into an FTS5 OR-query of quoted tokens, or say why there is none.

    Every FTS5 operator character (`"`, `*`, `^`, `:`, `-`, `+`, parentheses)
    is a separator here, and AND/OR/NOT/NEAR become quoted words, so no input
    can produce an FTS5 syntax error.
    """
    if not isinstance(text, str):
        raise TypeError(f"query: must be a string, not {type(text).__name__}")
    if not text.strip():
        return Query(text, (), None, "the query is empty")
    all_tokens = tokens(text)
    if not all_tokens:
        return Query(text, (), None, "the query holds no letters or digits")
    kept = query_tokens(text)
    if not kept:
        return Query(text, (), None, "the query holds only stop words and single letters")
    if max_terms is not None:  # by position; Index.search passes None and keeps the rarest (choose_terms)
        kept = kept[:max_terms]
    return Query(text, tuple(kept), or_query(kept))


def choose_terms(
    terms: Sequence[str], df: Mapping[str, int], max_terms: int = MAX_QUERY_TERMS
) -> tuple[list[str], list[str]]:
    """The `max_terms` terms worth most to a search, and the rest, each list in the order chosen.

    Rarest first: ascending document frequency in the session (`df`, keyed by
    the term itself; 0 or missing = no event holds it). Terms no event holds go
    last, since they can only match through a porter variant. Ties keep the
    query's order. So "32 filler words, then Mochi" keeps "mochi".
    """
    order = sorted(range(len(terms)), key=lambda i: (df.get(terms[i], 0) == 0, df.get(terms[i], 0), i))
    ranked = [terms[i] for i in order]
    return ranked[:max_terms], ranked[max_terms:]


def term_batches(
    terms: Sequence[str],
    df: Mapping[str, int],
    *,
    n_events: int,
    prune_share: float,
    prune_min_events: int,
    max_terms: int = MAX_QUERY_TERMS,
) -> list[list[str]]:
    """The OR-queries one search may run, in order: the first that matches anything is the answer.

    1. the `max_terms` rarest terms (choose_terms), in a large session without the
       terms held by more than `prune_share` of its events (IndexConfig; at least
       the rarest term stays);
    2. the terms pruning took out of (1), if any;
    3. the remaining terms, `max_terms` at a time.
    Every term of the query is in exactly one batch, so a query one of whose terms
    matches an event never ends with "no event matches".
    """
    if not terms:
        return []
    kept, rest = choose_terms(terms, df, max_terms)
    batches: list[list[str]] = []
    if n_events >= prune_min_events and len(kept) >= 2:
        limit = prune_share * n_events
        pruned = [t for t in kept if df.get(t, 0) <= limit] or kept[:1]
        batches.append(pruned)
        dropped = [t for t in kept if t not in pruned]
        if dropped:
            batches.append(dropped)
    else:
        batches.append(kept)
    batches.extend(list(rest[i : i + max_terms]) for i in range(0, len(rest), max_terms))
    return batches


def or_query(terms: list[str] | tuple[str, ...]) -> str:
    return " OR ".join(quote(t) for t in terms)
