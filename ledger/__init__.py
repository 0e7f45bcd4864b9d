"""The hash-chained session ledger: the source of truth for every memory."""

from ledger.canonical import CanonicalError, canonical_json
from ledger.event import (
    FORMAT_VERSION,
    GENESIS,
    MAX_TEXT_BYTES,
    ROLES,
    Event,
    EventError,
    make_event,
    validate_session_id,
)
from ledger.verify import Break, SessionReport, verify_stream

__all__ = [
    "FORMAT_VERSION",
    "GENESIS",
    "MAX_TEXT_BYTES",
    "ROLES",
    "Break",
    "CanonicalError",
    "EraseError",
    "Erasure",
    "Event",
    "EventError",
    "ImportError_",
    "Ledger",
    "LedgerCorrupted",
    "Message",
    "Quarantine",
    "SessionReport",
    "canonical_json",
    "make_event",
    "validate_session_id",
    "verify_stream",
]
