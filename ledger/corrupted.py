"""LedgerCorrupted: the error every backend raises when a session's ledger does not verify (pure: it only
formats the verification report it carries)."""

from __future__ import annotations

from ledger.verify import SessionReport


class LedgerCorrupted(RuntimeError):
    """A session's ledger does not verify; appends are refused until a person repairs it."""

    def __init__(self, report: SessionReport) -> None:
        brk = report.brk
        where = f"line {brk.line}, seq {brk.seq}, {brk.kind}: {brk.message}" if brk else "unknown"
        super().__init__(f"session {report.session}: ledger is corrupted ({where}); appends are refused")
        self.report = report
