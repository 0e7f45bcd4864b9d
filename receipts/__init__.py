"""Signed receipts: DSSE envelopes over assistant answers, verifiable offline with a public key."""

from receipts.disclose import RedactError, cited_seqs, receipt_format, redact, withheld_seqs

__all__ = ["RedactError", "cited_seqs", "receipt_format", "redact", "withheld_seqs"]
