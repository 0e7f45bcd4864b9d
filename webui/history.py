"""What a check of the visitor's kept checkpoint against today's history concluded (pure; no I/O, no Gradio).

webui/service.py (Service.history_check) reads the kept checkpoint and runs
receipts.checkpoints.prove_since; this module turns its SinceReport into one
outcome the UI can show, and says which checkpoint the browser keeps next:

- the history provably extends the kept checkpoint → keep the current one;
- it does not (rewritten, truncated, gone) → warn, and keep the OLD one: it is
  the visitor's evidence, and replacing it would let one page view launder a
  rewrite (the warning shows again on every visit until the visitor accepts
  the current history, or starts another session);
- the kept value is unusable (unparseable, another session's, a bad signature
  under this app's key) → a note, and proceed as if nothing were kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.jsonnames import json_type
from receipts.checkpoints import HISTORY_ROWS, MalformedCheckpoint, SinceReport, parse_checkpoint
from receipts.verify import FAIL

EMPTY = "empty"  # the session has no events and nothing was kept: nothing to check
FIRST = "first"  # nothing (usable) was kept: the current checkpoint, checked against the ledger, is kept from now on
EXTENDS = "extends"  # today's history provably extends the kept checkpoint
CHANGED = "changed"  # it does not: rewritten, truncated or deleted since the visitor last saw it
UNSOUND = "unsound"  # the server's current signed checkpoint does not match its own ledger (or cannot be read)
KEY_CHANGED = "key_changed"  # the kept checkpoint was signed by another key: the app's signing key changed
UNCHECKED = "unchecked"  # the check itself could not run (an I/O error on the server)
WARNINGS = frozenset({CHANGED, UNSOUND, KEY_CHANGED})


@dataclass(frozen=True, slots=True)
class HistoryCheck:
    """One check of the kept checkpoint. No truth value: read `.outcome` or `.warning`."""

    session: str
    outcome: str
    message: str  # one plain sentence for the visitor ("" when there is nothing to say)
    kept: dict[str, Any] | None = None  # the kept checkpoint, as parsed (None: none, or unusable)
    current: dict[str, Any] | None = None  # the server's current signed checkpoint, when it could be read
    keep: dict[str, Any] | None = None  # what the browser should keep from now on (None: leave what it holds)
    note: str | None = None  # why the browser's kept value was ignored
    report: SinceReport | None = None

    def __bool__(self) -> bool:
        raise TypeError("HistoryCheck has no truth value; read .outcome or .warning")

    @property
    def warning(self) -> bool:
        return self.outcome in WARNINGS

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "outcome": self.outcome,
            "warning": self.warning,
            "message": self.message,
            "note": self.note,
            "kept": self.kept,
            "current": self.current,
            "report": None if self.report is None else self.report.to_dict(),
        }


def parse_kept(text: object, session: str) -> tuple[dict[str, Any] | None, str | None]:
    """The kept checkpoint of `session` from the browser's text, strictly parsed; else (None, why it was ignored)."""
    if text is None:
        return None, None
    if not isinstance(text, str):
        return None, f"the checkpoint kept in this browser is JSON {json_type(text)}, not a checkpoint's text: ignored"
    try:
        cp = parse_checkpoint(text.encode("utf-8", "surrogatepass"), source="kept in this browser")
    except MalformedCheckpoint as exc:
        return None, f"{exc}: ignored"
    if cp["body"]["session"] != session:
        return (
            None,
            f"the checkpoint kept in this browser names session {cp['body']['session']}, not {session}: ignored",
        )
    return cp, None


def _status(report: SinceReport, name: str) -> str | None:
    return next((c.status for c in report.checks if c.name == name), None)


def bad_kept_signature(report: SinceReport) -> bool:
    """The kept checkpoint names this app's key but its signature does not verify: not evidence of anything."""
    return _status(report, "kept.signature") == FAIL


def from_report(session: str, kept: Mapping[str, Any], report: SinceReport, note: str | None = None) -> HistoryCheck:
    """The outcome of proving a (well-signed) kept checkpoint against today's history."""
    common: dict[str, Any] = {"kept": dict(kept), "current": report.current, "note": note, "report": report}
    if any(_status(report, name) == FAIL for name in HISTORY_ROWS):
        chain = next((c for c in report.checks if c.name == "ledger.chain"), None)
        if chain is not None and chain.status == FAIL and chain.message.startswith("chain broken"):
            # an edited line stops the walk there: say so, rather than "the ledger holds fewer events"
            return HistoryCheck(session, CHANGED, _changed(chain.message), **common)
        return HistoryCheck(session, CHANGED, _changed(report.message), **common)
    if report.failed:
        return HistoryCheck(session, UNSOUND, report.message, **common)
    keep = report.current if report.current is not None and report.ok else None
    return HistoryCheck(session, EXTENDS, report.message, keep=keep, **common)


def first_look(session: str, current: Mapping[str, Any], report: SinceReport, note: str | None = None) -> HistoryCheck:
    """Nothing usable was kept: `report` proves the server's current checkpoint against its own ledger."""
    common: dict[str, Any] = {"current": dict(current), "note": note, "report": report}
    if report.ok and not report.failed:
        keep = report.current if report.current is not None else dict(current)
        n = keep["body"]["tree_size"]
        message = f"this browser now keeps the signed checkpoint of {n} event{'s' if n != 1 else ''}, checked against the ledger"
        return HistoryCheck(session, FIRST, message, keep=keep, **common)
    failed = "; ".join(c.message for c in report.failed[:3]) or report.message
    return HistoryCheck(
        session, UNSOUND, f"the server's signed checkpoint does not match its own ledger: {failed}", **common
    )


def _changed(message: str) -> str:
    """report.message already leads with the plain warning when history rows failed; make sure it always does."""
    lead = "this history changed since you last saw it"
    return message if message.startswith(lead) else f"{lead}: {message}"


__all__ = [
    "CHANGED",
    "EMPTY",
    "EXTENDS",
    "FIRST",
    "KEY_CHANGED",
    "UNCHECKED",
    "UNSOUND",
    "WARNINGS",
    "HistoryCheck",
    "bad_kept_signature",
    "first_look",
    "from_report",
    "parse_kept",
]
