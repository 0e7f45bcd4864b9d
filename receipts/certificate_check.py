"""Verifying an erasure certificate (pure): a parsed certificate in, a report with one row per check out.

The rows, their outcomes and the verdict are receipts.report's (Check; "pass", "fail", "not_verifiable"): the
verdict follows the same rule (docs/FORMAT.md §16). storage.files.receipts.certificate_io adds the data directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.event import EventError, chain_link, event_digest, recompute_digest
from receipts.body import checkpoint_bytes, decode_sig
from receipts.certificate import ERASURE_PAYLOAD_TYPE, RECORD_ENTRY_FIELDS, Certificate
from receipts.dsse import verify_envelope
from receipts.keys import PublicKey
from receipts.merkle import ProofError, leaf_hash, verify_inclusion
from receipts.report import FAIL, MARK, Check, Report, Rows

SIGNATURE_ROWS = ("envelope.signature", "checkpoint.signature")
LEDGER_ROWS_EVENTS = ("ledger.erased", "ledger.record", "ledger.chain", "ledger.root", "ledger.consistency", "ledger.receipts")
LEDGER_ROWS_SESSION = ("ledger.deleted",)


@dataclass(frozen=True, slots=True)
class CertificateReport(Report):
    """One row per check (receipts.report.Check). No truth value: read `.verdict`."""

    session: str
    scope: str
    mode: str  # "offline" or "ledger"
    checks: tuple[Check, ...]

    @property
    def required(self) -> tuple[str, ...]:
        """Both signatures under a trusted key and, with a ledger, every ledger row of the certificate's scope."""
        ledger_rows = LEDGER_ROWS_EVENTS if self.scope == "events" else LEDGER_ROWS_SESSION
        return SIGNATURE_ROWS + (ledger_rows if self.mode == "ledger" else ())

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "erasure-certificate",
            "session": self.session,
            "scope": self.scope,
            "mode": self.mode,
            "verdict": self.verdict,
            "failed": len(self.failed),
            "not_verifiable": len(self.not_verifiable),
            "checks": [c.to_dict() for c in self.checks],
        }


# -- verifying (pure) --------------------------------------------------------------
def _checkpoint_ok(cp: Mapping[str, Any], key: PublicKey) -> bool:
    sig = decode_sig(cp["sig"])
    return cp["key_id"] == key.key_id and sig is not None and key.verify(sig, checkpoint_bytes(cp["body"]))


def _signatures(r: Rows, cert: Certificate, trusted: Sequence[PublicKey], untrusted: PublicKey | None) -> None:
    env = cert.envelope
    r.add("envelope.payload_type", env.payload_type == ERASURE_PAYLOAD_TYPE, "the envelope names the erasure certificate format", ERASURE_PAYLOAD_TYPE, env.payload_type)
    cp = cert.body["checkpoint"]
    if not trusted:
        env_ok = None if untrusted is None else any(c.passed for c in verify_envelope(env, [untrusted], ERASURE_PAYLOAD_TYPE))
        r.untrusted("envelope.signature", None if untrusted is None else untrusted.key_id, env_ok)
        r.untrusted("checkpoint.signature", None if untrusted is None else untrusted.key_id, None if untrusted is None else _checkpoint_ok(cp, untrusted))
        return
    results = verify_envelope(env, trusted, ERASURE_PAYLOAD_TYPE)
    good = [c for c in results if c.passed]
    expected = "a valid signature by " + ", ".join(k.key_id for k in trusted)
    if good:
        r.add("envelope.signature", True, f"signed by trusted key {good[0].verified_by}")
    else:
        details = "; ".join(f"{c.keyid or '(no keyid)'}: {c.outcome}" for c in results) or "no signature"
        r.add("envelope.signature", False, f"no valid signature by a trusted key ({details})", expected, details)
    key = next((k for k in trusted if k.key_id == cp["key_id"]), None)
    if key is None:
        r.add("checkpoint.signature", False, "the checkpoint is signed by a key that is not trusted", ", ".join(k.key_id for k in trusted), cp["key_id"], "checkpoint.key_id")
    else:
        r.add("checkpoint.signature", _checkpoint_ok(cp, key), f"checkpoint signature by {key.key_id}", "a valid Ed25519 signature", "invalid signature", "checkpoint.sig")


def _inclusion(seq: int, tree_size: int, digest: str, proof: Sequence[str], root: bytes) -> str:
    """'' when the digest is leaf `seq` of the signed tree, else why not."""
    try:
        if seq >= tree_size:
            raise ProofError(f"leaf {seq} is outside the checkpoint's tree of size {tree_size}")
        verify_inclusion(seq, tree_size, leaf_hash(bytes.fromhex(digest)), [bytes.fromhex(h) for h in proof], root)
    except ProofError as exc:
        return str(exc)
    return ""


def _record_entries(meta: Any) -> list[dict[str, Any]] | str:
    """The erased entries an erasure record's meta lists, or why it is not an erasure record's meta."""
    erasure = meta.get("erasure") if isinstance(meta, dict) else None
    if not isinstance(erasure, dict) or erasure.get("v") != 1 or not isinstance(erasure.get("erased"), list):
        return 'its meta is not {"erasure": {"v": 1, "erased": [...], "reason": ...}}'
    entries = erasure["erased"]
    if not all(isinstance(e, dict) and sorted(e) == sorted(RECORD_ENTRY_FIELDS) for e in entries):
        return f"an entry of its meta does not have exactly the fields {', '.join(RECORD_ENTRY_FIELDS)}"
    return list(entries)


def _record_rows(r: Rows, records: Sequence[dict[str, Any]], tree_size: int, root: bytes) -> None:
    """record.digest, record.chain_link, record.inclusion: each erasure record, one row per check over all of them."""
    bad_digest, bad_link, bad_incl = [], [], []
    for i, item in enumerate(records):
        rec, where = item["event"], f"records[{i}] (seq {item['event']['seq']})"
        try:
            digest = recompute_digest(rec).hex()
        except EventError as exc:
            digest = f"error: {exc}"
        if digest != rec["digest"]:
            bad_digest.append(f"{where}: recomputed {digest[:16]}…, listed {rec['digest'][:16]}…")
        link = chain_link(bytes.fromhex(rec["prev"]), bytes.fromhex(rec["digest"])).hex()
        if link != rec["chain"]:
            bad_link.append(f"{where}: prev and digest link to {link[:16]}…, listed chain {rec['chain'][:16]}…")
        if i and rec["prev"] != records[i - 1]["event"]["chain"]:
            bad_link.append(f"{where}: its prev is not the chain hash of the record before it")
        why = _inclusion(rec["seq"], tree_size, rec["digest"], item["proof"], root)
        if why:
            bad_incl.append(f"{where}: {why}")
    n = len(records)
    r.add("record.digest", not bad_digest, f"each of the {n} erasure record(s)' digest recomputed from its fields", "all match", "; ".join(bad_digest), "records[].event.digest")
    r.add("record.chain_link", not bad_link, f"each of the {n} erasure record(s) links its prev and digest, each to the one before it", "all linked", "; ".join(bad_link), "records[].event.chain")
    r.add("record.inclusion", not bad_incl, f"each of the {n} erasure record(s) is its seq's leaf in the signed tree of size {tree_size}", root.hex(), "; ".join(bad_incl), "records[].proof")


def _record_lists(r: Rows, records: Sequence[dict[str, Any]], erased: Sequence[dict[str, Any]]) -> None:
    """record.lists: every erased entry is listed by exactly one record (same seq, id, digest, commit), and no record
    lists anything else."""
    ours = {e["seq"]: tuple(e[k] for k in RECORD_ENTRY_FIELDS) for e in erased}
    by: dict[int, list[int]] = {}
    problems = []
    for item in records:
        rec = item["event"]
        listed = _record_entries(rec["meta"])
        if isinstance(listed, str):
            problems.append(f"the record at seq {rec['seq']} is not an erasure record: {listed}")
            continue
        for e in listed:
            seq = e.get("seq")
            if type(seq) is not int or seq not in ours:
                problems.append(f"the record at seq {rec['seq']} lists seq {seq!r}, which the certificate does not say was erased")
            elif tuple(e.get(k) for k in RECORD_ENTRY_FIELDS) != ours[seq]:
                problems.append(f"the record at seq {rec['seq']} lists seq {seq} with another id, digest or commit")
            else:
                by.setdefault(seq, []).append(rec["seq"])
    for seq in ours:
        where = by.get(seq, [])
        if not where:
            problems.append(f"erased seq {seq} is listed by no erasure record in the certificate")
        elif len(where) > 1:
            problems.append(f"erased seq {seq} is listed by {len(where)} records (seqs {', '.join(map(str, where))})")
    r.add(
        "record.lists",
        not problems,
        f"the {len(records)} erasure record(s) list each of the {len(ours)} erased events exactly once (seq, id, digest, commit), and nothing else",
        "each erased event listed by exactly one record",
        "; ".join(problems)[:1200],
        "records[].event.meta.erasure.erased",
    )


def _check_events_scope(r: Rows, body: dict[str, Any]) -> None:
    session, cpb = body["session"], body["checkpoint"]["body"]
    records = body["records"]
    first, last = records[0]["event"], records[-1]["event"]
    tree_size, root = cpb["tree_size"], bytes.fromhex(cpb["root"])
    others = sorted({cpb["session"], *(item["event"]["session"] for item in records)} - {session})
    r.add("certificate.session", not others, "the erasure records and the checkpoint belong to the certificate's session", session, ", ".join(others))
    problems = []
    seqs = [e["seq"] for e in body["erased"]]
    if len(set(seqs)) != len(seqs) or seqs != sorted(seqs):
        problems.append("the erased seqs are not distinct and in order")
    if len({e["id"] for e in body["erased"]}) != len(seqs):
        problems.append("an erased id is listed twice")
    if any(s >= first["seq"] for s in seqs):
        problems.append("an erased event is not older than the first erasure record")
    for i, item in enumerate(records):
        rec = item["event"]
        if rec["seq"] != first["seq"] + i:
            problems.append(f"the erasure records are not consecutive: records[{i}] is seq {rec['seq']}, expected {first['seq'] + i}")
            break
    for item in records:
        rec = item["event"]
        if rec["role"] != "system":
            problems.append(f"the erasure record at seq {rec['seq']} has role {rec['role']!r}, expected 'system'")
        listed = _record_entries(rec["meta"])
        expected_text = f"[erasure record: {len(listed)} event(s) erased]" if not isinstance(listed, str) else None
        if expected_text is not None and rec["text"] != expected_text:
            problems.append(f"the erasure record at seq {rec['seq']} has the text {rec['text'][:80]!r}, expected {expected_text!r}")
    if last["seq"] != tree_size - 1:
        problems.append(f"the last erasure record (seq {last['seq']}) is not the last leaf of the checkpoint (tree size {tree_size})")
    if cpb["chain_head"] != last["chain"]:
        problems.append("the checkpoint's chain head is not the last erasure record's chain hash")
    r.add("certificate.structure", not problems, "seqs, the erasure records and the checkpoint agree", "consistent", "; ".join(problems)[:1200])
    _record_rows(r, records, tree_size, root)
    _record_lists(r, records, body["erased"])
    # each erased event: digest from its hashed fields (commit in place of its text), inclusion at its seq
    bad_digest, bad_incl = [], []
    for e in body["erased"]:
        d = event_digest(session=session, seq=e["seq"], event_id=e["id"], role=e["role"], ts=e["ts"], commit=bytes.fromhex(e["commit"])).hex()
        if d != e["digest"]:
            bad_digest.append(f"seq {e['seq']}: recomputed {d[:16]}…, listed {e['digest'][:16]}…")
        why = _inclusion(e["seq"], tree_size, e["digest"], e["proof"], root)
        if why:
            bad_incl.append(f"seq {e['seq']}: {why}")
    r.add("erased.digests", not bad_digest, f"each of the {len(seqs)} erased events' digest recomputed from its hashed fields and commit", "all match", "; ".join(bad_digest)[:1200], "erased")
    r.add("erased.inclusion", not bad_incl, f"each erased event is its seq's leaf in the signed tree of size {tree_size}", "all included", "; ".join(bad_incl)[:1200], "erased")


def _check_session_scope(r: Rows, body: dict[str, Any]) -> None:
    session, cpb = body["session"], body["checkpoint"]["body"]
    r.add("certificate.session", cpb["session"] == session, "the final checkpoint belongs to the certificate's session", session, cpb["session"])
    n = body["counts"]["events"]
    r.add("certificate.structure", n == cpb["tree_size"], "the event count is the final checkpoint's tree size", cpb["tree_size"], n, "counts.events")


@dataclass(frozen=True)
class LedgerView:
    """What a data directory says about the session (storage.files.receipts.certificate_io builds it from the auditor).

    `exists`: the session's ledger is there; `problem`: it could not be read; `verified`: events before the
    first break; `break_words`: that break in `ledger verify`'s words, or None; `line_at(seq)`: a stored line's
    fields (seq < verified); `root_at(n)` and `consistent(m, n)` over the digests the auditor recomputed."""

    session: str
    exists: bool
    problem: str | None
    verified: int
    break_words: str | None
    line_at: Callable[[int], dict[str, Any]]
    root_at: Callable[[int], bytes]
    consistent: Callable[[int, int], str]  # '' when a consistency proof from m to n verifies, else why not
    how: str = ""
    # why this data directory cannot be shown to be the one that signed the certificate (its key differs or is
    # absent), or None: a session scope's ledger.deleted is then not_verifiable, as an absence anywhere else proves nothing
    foreign: str | None = None
    # what of a deleted session the data directory still holds (a folder, a pending erasure), or None: the
    # ledger alone being gone does not make a session deleted (receipts hold its words whole)
    leftovers: str | None = None
    # the session's stored receipts: a function of (erased seqs, withdrawn ids) giving, per offending receipt file,
    # why it still holds an erased event's words (it discloses one, or is format 1 citing one, or is listed as
    # withdrawn and still there, or cannot be read); None when not looked at
    receipt_problems: Callable[[set[int], set[str]], list[str]] | None = None


def _check_ledger_events(r: Rows, body: dict[str, Any], led: LedgerView) -> None:
    if not led.exists or led.problem is not None:
        for name in LEDGER_ROWS_EVENTS:
            if led.problem is not None:
                r.add(name, False, f"the session's ledger was not read: {led.problem}", "a regular file", "refused")
            else:
                r.na(name, f"this data directory has no session {led.session}: the ledger checks cannot run here")
        return
    cpb = body["checkpoint"]["body"]
    tree_size = cpb["tree_size"]
    stop = f"the ledger's first break ({led.break_words})" if led.break_words else f"the end of the ledger ({led.verified} events)"
    problems = []
    for e in body["erased"]:
        if e["seq"] >= led.verified:
            problems.append(f"seq {e['seq']} lies after {stop}")
            continue
        line = led.line_at(e["seq"])
        if "commit" not in line or "text" in line:
            problems.append(f"seq {e['seq']} is not in erased form: the ledger still holds its text")
        elif line.get("digest") != e["digest"] or line.get("commit") != e["commit"] or line.get("id") != e["id"]:
            problems.append(f"seq {e['seq']} differs: ledger digest {str(line.get('digest'))[:16]}…, certificate {e['digest'][:16]}…")
    r.add("ledger.erased", not problems, "each erased seq is in erased form in the ledger with the same id, digest and commit", "all erased as listed", "; ".join(problems))
    bad = []
    for item in body["records"]:
        rec = item["event"]
        if rec["seq"] >= led.verified:
            bad.append(f"the erasure record at seq {rec['seq']} lies after {stop}")
            continue
        stored = led.line_at(rec["seq"])
        if stored.get("digest") != rec["digest"] or stored.get("id") != rec["id"]:
            bad.append(f"seq {rec['seq']}: ledger digest {str(stored.get('digest'))[:16]}…, certificate {rec['digest'][:16]}…")
    seqs = [item["event"]["seq"] for item in body["records"]]
    at = f"seq {seqs[0]}" if len(seqs) == 1 else f"seqs {seqs[0]}–{seqs[-1]}"
    r.add("ledger.record", not bad, f"the ledger holds the erasure record(s) at {at} with the same id and digest", "all as listed", "; ".join(bad)[:1200])
    if led.receipt_problems is None:
        r.na("ledger.receipts", "the session's stored receipts were not looked at")
    else:
        held = led.receipt_problems({e["seq"] for e in body["erased"]}, set(body["receipts"]["withdrawn"]))
        r.add(
            "ledger.receipts",
            not held,
            "no stored receipt of the session discloses an erased event, carries one signed whole (format 1), or was listed as withdrawn and kept",
            "no erased words in a stored receipt",
            "; ".join(held)[:1200],
        )
    how = f" [{led.how}]" if led.how else ""
    if led.verified < tree_size:
        why = f"breaks at {led.break_words}" if led.break_words else f"holds {led.verified} events"
        r.add("ledger.chain", False, f"the ledger {why}, before the checkpoint's {tree_size} events{how}", f"{tree_size} events that chain from genesis", led.verified)
        r.add("ledger.root", False, f"the ledger verifies only {led.verified} events: its root at {tree_size} cannot be recomputed", tree_size, led.verified)
        r.add("ledger.consistency", False, "no consistency proof to the signed checkpoint", tree_size, led.verified)
        return
    r.add("ledger.chain", True, f"the first {tree_size} events chain from genesis, erased lines verified from their commit{how}")
    root_then = led.root_at(tree_size).hex()
    r.add("ledger.root", root_then == cpb["root"], f"the ledger's Merkle root at size {tree_size} equals the signed root", cpb["root"], root_then, "checkpoint.body.root")
    why = led.consistent(tree_size, led.verified)
    r.add("ledger.consistency", not why, f"the ledger today ({led.verified} events) extends the signed checkpoint ({tree_size})" + (f": {why}" if why else ""), cpb["root"], why or None)


def _check_ledger_session(r: Rows, body: dict[str, Any], led: LedgerView) -> None:
    cpb = body["checkpoint"]["body"]
    if led.exists and led.problem is not None:
        r.add("ledger.deleted", False, f"the data directory still holds something for session {led.session}: {led.problem}", "no ledger", "a ledger")
    elif led.exists and led.verified >= cpb["tree_size"] and led.root_at(cpb["tree_size"]).hex() == cpb["root"]:
        r.add("ledger.deleted", False, f"the data directory still holds the deleted history of session {led.session}", "no ledger", f"{led.verified} events whose root matches the certificate")
    elif led.foreign is not None:  # an absence (or another history) in a directory that did not sign proves nothing
        r.na("ledger.deleted", f"{led.foreign}: what it holds for session {led.session} says nothing about the deleted history")
    elif not led.exists and led.leftovers is not None:
        r.add("ledger.deleted", False, f"this data directory holds no ledger for session {led.session}, but still holds {led.leftovers}", "nothing of the session", led.leftovers)
    elif not led.exists:
        r.add("ledger.deleted", True, f"this data directory holds no ledger for session {led.session}: the session is gone")
    else:
        r.add("ledger.deleted", True, f"session {led.session} in this data directory is a new history, not the deleted one (its root differs)")


def verify_certificate(cert: Certificate, trusted: Sequence[PublicKey], ledger: LedgerView | None = None, *, untrusted: PublicKey | None = None) -> CertificateReport:
    """Check a parsed certificate; with `ledger`, also against what a data directory holds today."""
    r = Rows()
    _signatures(r, cert, trusted, untrusted)
    body = cert.body
    if cert.scope == "events":
        _check_events_scope(r, body)
    else:
        _check_session_scope(r, body)
    rows = LEDGER_ROWS_EVENTS if cert.scope == "events" else LEDGER_ROWS_SESSION
    if ledger is None:
        for name in rows:
            r.na(name, "needs the data directory: run with --data DATA_DIR")
    elif cert.scope == "events":
        _check_ledger_events(r, body, ledger)
    else:
        _check_ledger_session(r, body, ledger)
    return CertificateReport(cert.session, cert.scope, "offline" if ledger is None else "ledger", tuple(r.rows))


def render_text(report: CertificateReport) -> str:
    """The report for a person: one line per check, failed rows with expected and found."""
    mode = "with the ledger" if report.mode == "ledger" else "offline"
    what = "some events" if report.scope == "events" else "the whole session"
    lines = [f"erasure certificate for session {report.session} ({what}), checked {mode}"]
    for c in report.checks:
        lines.append(f"  {MARK[c.status]}  {c.name}: {c.message}")
        if c.status == FAIL and (c.expected is not None or c.found is not None):
            lines.append(f"        expected {c.expected}\n        found    {c.found}")
    lines.append(f"verdict: {report.verdict.upper()} ({len(report.failed)} failed, {len(report.not_verifiable)} not verifiable here)")
    return "\n".join(lines)
