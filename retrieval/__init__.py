"""Retrieval: the SQLite FTS5 index over the ledgers and fixed-K search with the collapse score."""

from retrieval.config import IndexConfig
from retrieval.model import (
    DEFAULT_K,
    MAX_K,
    MIN_K,
    ForgetError,
    Forgotten,
    Hit,
    IndexUnavailable,
    PurgeIncomplete,
    RetrievalError,
    SearchError,
    SearchResponse,
)
from retrieval.text import STOP_WORDS, Query, build_query

__all__ = [
    "DEFAULT_K",
    "INDEX_FILE",
    "MAX_K",
    "MIN_K",
    "STOP_WORDS",
    "ForgetError",
    "Forgotten",
    "Hit",
    "Index",
    "IndexConfig",
    "IndexUnavailable",
    "PurgeIncomplete",
    "Query",
    "RetrievalError",
    "SearchError",
    "SearchResponse",
    "build_query",
]
