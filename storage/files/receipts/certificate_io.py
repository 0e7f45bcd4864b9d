"""Verifying an erasure certificate, offline or against a data directory (I/O around receipts.certificate).

The CLI (`python -m receipts verify CERT`), the app and MCP call `verify_certificate_bytes`.
The ledger is read through the auditor (storage.files.receipts.audit), never through a tree the producer stored. On PostgreSQL
the caller passes the database's ledger (`source`: its rows audited from a private copy, storage.files.receipts.ledger_copy) and
receipts (`receipts`: the rows a deleted or erased session's words could remain in); DATA_DIR then gives the key
and an interrupted erasure's journal.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol

from receipts.body import MalformedReceipt, cited_events, parse_receipt
from receipts.certificate import parse_certificate
from receipts.certificate_check import CertificateReport, LedgerView, verify_certificate
from receipts.keys import KeyConfigError, PublicKey
from receipts.merkle import ProofError, verify_consistency
from receipts.verify import LedgerFacts, describe_audit
from storage.files.receipts import files
from storage.files.receipts.api import data_dir_key
from storage.files.receipts.audit import Auditor
from storage.files.receipts.ledger_copy import LineSource, ledger_dir


def _view(facts: LedgerFacts) -> LedgerView:
    brk = facts.first_break
    words = None if brk is None else f"line {brk.line}, {'unreadable seq' if brk.seq is None else f'seq {brk.seq}'}, {brk.kind}"

    def consistent(m: int, n: int) -> str:
        try:
            verify_consistency(m, n, facts.consistency(m, n), facts.root_at(m), facts.root_at(n))
        except ProofError as exc:
            return str(exc)
        return ""

    how = "; ".join(facts.notes) if facts.notes else (describe_audit(facts) if facts.exists and facts.problem is None else "")
    return LedgerView(facts.session, facts.exists, facts.problem, facts.verified, words, facts.event_at, facts.root_at, consistent, how)


def _foreign(data_dir: str | os.PathLike[str], signer: str) -> str | None:
    """Why `data_dir` cannot be shown to be the directory whose key signed the certificate (key id `signer`), or None."""
    try:
        own = data_dir_key(data_dir)
    except (KeyConfigError, OSError, UnicodeDecodeError):
        return f"{data_dir}: its signing key cannot be read, so it cannot be shown to be the data directory that signed this certificate ({signer})"
    if own is None:
        return f"{data_dir}: it has no signing key, so it cannot be shown to be the data directory that signed this certificate ({signer})"
    if own.key_id != signer:
        return f"{data_dir}: it signs with {own.key_id}, not {signer}: it is not the data directory that signed this certificate"
    return None


def _leftovers(data_dir: str | os.PathLike[str], session: str) -> str | None:
    """What of `session` the data directory still holds besides its ledger: its folder (receipts), its Merkle
    tree, or the journal of an erasure a crash interrupted (`python -m control forget` finishes it); or None."""
    data = Path(data_dir)
    held = [f"{name}/{session}" for name in ("sessions", "merkle") if (data / name / session).exists()]
    if (data / "erasures" / f".pending-{session}.json").exists():
        held.append(f"erasures/.pending-{session}.json (an interrupted erasure: `python -m control forget` finishes it)")
    return ", ".join(held) or None


class ReceiptReader(Protocol):
    """Where a deployment keeps its receipts other than in files (storage.pg.receipts.PgReceipts)."""

    def receipt_ids(self, session: str) -> list[str]: ...

    def read_receipt(self, session: str, receipt_id: str) -> bytes: ...


def _rows_left(receipts: ReceiptReader, session: str) -> str | None:
    """What of a deleted session a receipt store still holds (its receipt rows), or None."""
    n = len(receipts.receipt_ids(session))
    return f"{n} receipt row{'' if n == 1 else 's'} of session {session}" if n else None


def _stored(data_dir: str | os.PathLike[str], session: str, receipts: ReceiptReader | None) -> Iterator[tuple[str, Callable[[], bytes]]]:
    """(name, read its bytes) for each receipt the session has stored: its files, or its rows in `receipts`."""
    if receipts is None:
        for path in files.list_receipts(Path(data_dir), session):
            yield path.name, partial(files.read_receipt_bytes, path)
        return
    for rid in receipts.receipt_ids(session):
        yield rid, partial(receipts.read_receipt, session, rid)


def _receipt_problems(
    data_dir: str | os.PathLike[str], session: str, receipts: ReceiptReader | None = None
) -> Callable[[set[int], set[str]], list[str]]:
    def problems(erased: set[int], withdrawn: set[str]) -> list[str]:
        out = []
        for name, read in _stored(data_dir, session, receipts):
            try:
                receipt = parse_receipt(read())
            except (MalformedReceipt, ValueError, OSError) as exc:
                why = (exc.strerror or "unreadable") if isinstance(exc, OSError) else "not a well-formed receipt"
                out.append(f"{name}: cannot be read ({why}), so it may still hold an erased text")
                continue
            rid = receipt.receipt_id
            cited = {ev["seq"] for _name, ev in cited_events(receipt.signed_body)}
            if rid in withdrawn:
                out.append(f"{rid}: listed as withdrawn, still stored")
            elif receipt.format == 1 and cited & erased:
                out.append(f"{rid}: format 1, signs the text of erased seq {min(cited & erased)} whole")
            elif shown := erased.intersection(receipt.disclosures):
                out.append(f"{rid}: still discloses erased seq {min(shown)}")
        return out

    return problems


def verify_certificate_bytes(
    raw: bytes,
    *,
    trusted: Sequence[PublicKey] = (),
    data_dir: str | os.PathLike[str] | None = None,
    full: bool = False,
    source: LineSource | None = None,
    receipts: ReceiptReader | None = None,
) -> CertificateReport:
    """Parse and verify a certificate. Raises MalformedCertificate for input that is not one.

    As for receipts (storage.files.receipts.api.verify_bytes): only `trusted` keys are trusted; with `data_dir` and no
    trusted key, the signatures are checked against the directory's own key for self-consistency only.
    `source` and `receipts`: the ledger and receipts are kept there (PostgreSQL), not in `data_dir`."""
    cert = parse_certificate(raw)
    keys = list(trusted)
    if data_dir is None:
        return verify_certificate(cert, keys)
    own = None
    if not keys:
        try:
            own = data_dir_key(data_dir)
        except (KeyConfigError, OSError, UnicodeDecodeError):
            own = None
    foreign = _foreign(data_dir, str(cert.body["checkpoint"]["key_id"]))
    held = [_leftovers(data_dir, cert.session), None if receipts is None else _rows_left(receipts, cert.session)]
    left = ", ".join(h for h in held if h) or None
    problems = _receipt_problems(data_dir, cert.session, receipts)
    with ledger_dir(data_dir, cert.session, source) as where, Auditor.of(where, full=full).facts(cert.session) as facts:
        view = dataclasses.replace(_view(facts), foreign=foreign, leftovers=left, receipt_problems=problems)
        return verify_certificate(cert, keys, view, untrusted=own)
