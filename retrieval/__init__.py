"""Retrieval: the SQLite FTS5 index over the ledgers and fixed-K search with the collapse score."""

from .config import IndexConfig
from .db import INDEX_FILE, Index
from .model import DEFAULT_K, MAX_K, MIN_K, Hit, IndexUnavailable, RetrievalError, SearchError, SearchResponse
from .text import STOP_WORDS, Query, build_query

__all__ = [
    "DEFAULT_K",
    "INDEX_FILE",
    "MAX_K",
    "MIN_K",
    "STOP_WORDS",
    "Hit",
    "Index",
    "IndexConfig",
    "IndexUnavailable",
    "Query",
    "RetrievalError",
    "SearchError",
    "SearchResponse",
    "build_query",
]
