"""What a search returns, and the errors it raises (plain values, no I/O)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from retrieval.scoring import tier as _tier

MIN_K = 1
MAX_K = 50
DEFAULT_K = 8


class RetrievalError(Exception):
    """Base of this package's errors."""


class SearchError(RetrievalError, ValueError):
    """A search request is unusable (bad K, bad session id, bad query type); nothing was searched."""


class IndexUnavailable(RetrievalError):
    """The index could not be opened or rebuilt (e.g. an unwritable data directory)."""


class ForgetError(RetrievalError, ValueError):
    """A forget request is unusable (unknown session or seq, an event the ledger still holds); nothing changed."""


class PurgeIncomplete(RetrievalError):
    """The rows are gone but SQLite could not empty its WAL (a reader kept an old snapshot): call again."""


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What forgetting changed in one session's index (all lists are seqs, ascending)."""

    session: str
    removed: list[int]  # events whose rows were deleted
    recontexted: list[int]  # neighbours whose context column no longer holds the removed words
    rescored: list[int]  # later events whose novelty (and collapse score) changed


def check_k(k: object) -> int:
    """Fail closed: K is an int in [MIN_K, MAX_K], never coerced."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise SearchError(f"k {k!r}: must be an integer from {MIN_K} to {MAX_K}")
    if not MIN_K <= k <= MAX_K:
        raise SearchError(f"k {k}: must be from {MIN_K} to {MAX_K}")
    return k


@dataclass(frozen=True, slots=True)
class Candidate:
    """One BM25 match as read from the index, before ranking."""

    seq: int
    event_id: str
    role: str
    ts: str
    text: str
    meta: dict[str, Any]
    digest: str
    chain: str
    bm25: float
    collapse: float
    own_bm25: float = 0.0  # bm25 over the event's own text alone: 0 when it matched only through its context
    echo: bool = False  # retrieval.scoring.is_echo
    novelty: float = 0.0
    boost: float = 1.0  # what the query rules multiply its score by (scoring.query_boost)
    date_match: str | None = None  # the query's date the event's time falls on ("16 June 2023"), if any
    speaker_named: bool = False  # the query names the event's speaker

    @property
    def context_only(self) -> bool:
        return self.own_bm25 == 0.0

    @property
    def tier(self) -> int:
        return _tier(echo=self.echo, own_match=self.own_bm25 != 0.0)

    def hit(
        self, session: str, *, score: float, rank: int, relative: float, context_only: bool, explain: dict[str, Any] | None = None
    ) -> Hit:
        """This match as the `rank`-th result of a search, ranked by `score` (`relative`: its share of the best)."""
        return Hit(
            session=session, event_id=self.event_id, seq=self.seq, role=self.role, text=self.text, meta=self.meta,
            digest=self.digest, chain=self.chain, ts=self.ts, bm25=self.bm25, collapse=self.collapse, score=score,
            rank=rank, context_only=context_only, echo=self.echo, relative=relative, explain=explain,
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result, carrying what a receipt needs to cite the event."""

    session: str
    event_id: str
    seq: int
    role: str
    text: str
    meta: dict[str, Any]
    digest: str
    chain: str
    ts: str
    bm25: float
    collapse: float
    score: float  # the raw ranking score (higher is better; see `relative` for one a person can compare)
    rank: int  # 1-based
    # True when no query term is in the event's own text: it matched through its neighbours' context
    context_only: bool = False
    echo: bool = False  # an assistant reply that only repeats memories (ranked below every non-echo)
    relative: float = 1.0  # score as a share of the best hit's score in this result list (1.0 for the best)
    explain: dict[str, Any] | None = None  # search(..., explain=True): why it ranked where it did
    # a turn's slot for the newest statement of what the question asks about (chat.supersede.with_newest)
    newest: bool = False

    @property
    def match(self) -> str:
        """How the hit matched, in words: "own text", "context only", "echo" or "newest statement"."""
        if self.newest:
            return "newest statement"
        if self.echo:
            return "echo"
        return "context only" if self.context_only else "own text"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SearchResponse:
    """The results of one search, best first; `reason` says why `results` is empty."""

    session: str
    query: str
    k: int
    results: list[Hit] = field(default_factory=list)
    reason: str | None = None
    match: str | None = None  # the FTS5 expression that ran, if any
    # query terms the search did not use (a long query keeps its rarest MAX_QUERY_TERMS terms)
    unused_terms: list[str] = field(default_factory=list)
    # "lexical" (FTS5 alone, as without the semantic extra) or "hybrid" (retrieval.semantic: lexical and dense, fused)
    mode: str = "lexical"

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "mode": self.mode,
            "query": self.query,
            "k": self.k,
            "match": self.match,
            "unused_terms": self.unused_terms,
            "reason": self.reason,
            "results": [h.to_dict() for h in self.results],
        }
