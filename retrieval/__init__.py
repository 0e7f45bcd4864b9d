"""Retrieval: the SQLite FTS5 index over the ledgers and fixed-K search with the collapse score."""

from .config import IndexConfig
from .db import INDEX_FILE, Index
from .model import (
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
from .text import STOP_WORDS, Query, build_query

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
