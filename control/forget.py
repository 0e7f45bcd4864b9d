"""Forgetting, with proof (I/O): the one function the app, the CLI and MCP call.

`forget` erases events of a session in one transaction of the session, under
its turn lock (storage.files.receipts.files.session_turn_lock), in this order:

1. plan (control.plan): the named events, the answers that cited them, the
   stored receipts to redact or withdraw — refused with one line, nothing changed;
2. a journal (DATA_DIR/erasures/.pending-<session>.json: seqs and receipt ids,
   never text; on PostgreSQL a row of `erasures_pending` committed with step 3) so
   that a crash at any later step is finished by `recover`;
3. Ledger.erase: the lines rewritten into erased form and the erasure records
   appended (one per 64 erased events, consecutive), in one durable rename;
4. the index forgets them (FTS rows, neighbours' context, then SQLite's purge);
5. stored receipts: format 2 redacted in place (temp, fsync, rename), format 1
   deleted (its texts are inside the signature) and listed as withdrawn;
6. a new signed checkpoint covering the erasure records, kept as the latest;
7. the erasure certificate, written 0600 under DATA_DIR/erasures/ and returned.

The steps themselves are in control.steps. The auditor's cache and the producer's Merkle tree hold digests only, which an
erasure does not change (the strong property test greps them); the auditor
re-hashes the changed bytes on its next verdict.

On PostgreSQL (`stores=` from storage.stores) the same steps run on rows: the ledger's erase rewrites the lines and
appends the records in one transaction, the index forgets (storage.pg.index_forget), receipts are rewritten or
deleted; the ledger's, the index's and the receipt tables are VACUUMed. No live row, receipt or receipt copy in
DATA_DIR holds the words after it (tests/storage/test_control_backends.py). What PostgreSQL keeps — measured on a
throwaway cluster after a forget and CHECKPOINT: VACUUM marks the old row versions' space free without zeroing
it, so the relation files of events, search_events (and its GIN index), search_terms, search_df and a TOAST
table still held the erased word's bytes, as did a WAL segment; `VACUUM FULL` on those tables (a rewrite under
an ACCESS EXCLUSIVE lock: every session waits for it) left none outside WAL. WAL segments until recycled,
archived WAL, base backups and replicas are the operator's to expire. The certificate is kept in DATA_DIR on either
backend; the journal too on files, while on PostgreSQL it is a row of `erasures_pending`, written in the erase's own
transaction (a whole session's: before anything is deleted), so that every replica sees the erasure pending.

`forget_session` deletes a whole session (as Engine.forget does) and leaves a
certificate holding only hashes: the final checkpoint and counts. `preview` says
what `forget` would do; `recover` finishes what a crash interrupted, download copies included.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from control.plan import Plan, PlanError, plan
from control.quoting import first_quoted
from control.steps import (
    UNRECEIPTED,
    Finished,
    Journal,
    citations,
    db_journals,
    delete_session,
    erasures_dir,
    file_journals,
    find_records,
    finish,
    has_record_for,
    needles,
    purge_copies,
    records_for,
    slot,
    withdraw_quoting,
    write_durable,
)
from control.where import Where, where
from ledger import Event
from ledger.canonical import canonical_json, loads_strict
from ledger.erasing import EraseError
from ledger.event import EVENT_ID_RE, EventError, SessionMoved, now_ts, validate_session_id
from receipts import certificate as cert
from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from storage.local import load_or_create

if TYPE_CHECKING:
    from storage.stores import Stores

if TYPE_CHECKING:
    from storage.api import LedgerStore, SearchIndex, Stores
    from storage.api import LedgerStore as AnyLedger

log = logging.getLogger("control")


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """What one erasure did. `certificate` is the envelope written at `certificate_path`."""

    session: str
    named: tuple[int, ...]
    cascaded: tuple[int, ...]
    erased: tuple[int, ...]
    roles: dict[int, str]
    redacted: tuple[str, ...]
    withdrawn: tuple[str, ...]
    record_seq: int | None  # the last erasure record's seq (None: a whole session deleted)
    certificate_path: Path
    certificate: dict[str, Any] = field(repr=False)
    copies_removed: tuple[Path, ...] = ()  # download copies of those receipts found under `copies` and deleted
    imports_dropped: int = 0  # import records (unsalted hashes of an imported file) that held an erased seq
    # overwritten and removed: events.jsonl.torn-*/cut-* files that held an erased text, index.sqlite.corrupt-* copies
    quarantine_removed: tuple[str, ...] = ()
    record_seqs: tuple[int, ...] = ()  # every erasure record's seq (one per 64 erased events), in order

    def summary_lines(self) -> list[str]:
        """What was erased, for a person (the CLI prints these; the app shows them)."""
        removed = [f"  quarantined copies overwritten and removed: {', '.join(self.quarantine_removed)}"] if self.quarantine_removed else []
        if self.record_seq is None:
            return [f"session {self.session}: deleted ({len(self.erased)} events)", *removed]
        words = _listed([f"{s} ({self.roles.get(s, '?')})" for s in self.erased])
        lines = [f"session {self.session}: erased {len(self.erased)} event(s): seq {words}"]
        if self.cascaded:
            lines.append(f"  answers that cited them, erased with them ({len(self.cascaded)}): seq {_listed(list(map(str, self.cascaded)))}")
        recs = self.record_seqs or (self.record_seq,)
        if len(recs) == 1:
            lines.append(f"  erasure record: seq {recs[0]}")
        else:
            lines.append(f"  erasure records: seq {recs[0]}–{recs[-1]} ({len(recs)} records, at most 64 events each)")
        lines.append(f"  receipts redacted: {_listed(list(self.redacted)) or 'none'}")
        lines.append(f"  receipts withdrawn (format 1, deleted): {_listed(list(self.withdrawn)) or 'none'}")
        if self.imports_dropped:
            lines.append(f"  import records dropped (they hashed an erased event): {self.imports_dropped}")
        return lines + removed


LISTED = 40  # items a summary line names; the certificate and --json list them all


def _listed(items: Sequence[str]) -> str:
    if len(items) <= LISTED:
        return ", ".join(items)
    return f"{', '.join(items[:LISTED])}, … and {len(items) - LISTED} more (the certificate and --json list them all)"


def _key(data: Path, key: SigningKey | None) -> SigningKey:
    """Loaded only once the request was found sound: a first use creates the key in DATA_DIR."""
    return key if key is not None else load_or_create(data)


def _resolve(led: AnyLedger, session: str, items: Iterable[object]) -> list[object]:
    """Seqs as given, with event ids (`evt_…`, what MCP's forget_memory names) replaced by their seqs."""
    given = list(items)
    ids = {x for x in given if isinstance(x, str) and x.startswith("evt_")}
    if not ids:
        return given
    for x in ids:
        if not EVENT_ID_RE.fullmatch(x):
            raise PlanError(f"event id {x[:60]!r}: not an event id (evt_ and 32 lowercase hex digits)")
    found = {ev.id: ev.seq for ev in led.events(session) if ev.id in ids}
    missing = sorted(ids - found.keys())
    if missing:
        raise PlanError(f"session {session}: no event with id {missing[0]}")
    return [found[x] if isinstance(x, str) and x in found else x for x in given]


def _check_session(w: Where, session: object) -> str:
    try:
        validate_session_id(session)
    except EventError as exc:
        raise PlanError(str(exc)) from None
    assert isinstance(session, str)
    if not w.ledger.exists(session):
        raise PlanError(f"session {session}: no such session in {w.where}")
    return session


# -- forgetting events ------------------------------------------------------------------
def preview(
    data_dir: str | os.PathLike[str],
    session: str,
    seqs: Iterable[object],
    *,
    cascade: bool = True,
    ledger: LedgerStore | None = None,
    stores: Stores | None = None,
) -> Plan:
    """What `forget` would erase — the named events, the answers that would go with them, the receipts it would
    redact or withdraw — changing nothing (the app's confirmation lists it). PlanError as for `forget`."""
    w = where(data_dir, stores, ledger=ledger)
    led = w.ledger
    session = _check_session(w, session)
    try:
        with w.receipts.turn_lock(session):
            count, _head = led.head(session)
            cites = citations(w.data_dir, session, led, backend=w.receipts)
            p = plan(session, _resolve(led, session, seqs), count, lambda s: slot(led.read_events(session, [s])[0]), cites, cascade=cascade)
            return withdraw_quoting(w.data_dir, p, led.read_events(session, p.named), backend=w.receipts)
    finally:
        w.close_index()


def forget(
    data_dir: str | os.PathLike[str],
    session: str,
    seqs: Iterable[object],
    *,
    reason: str | None = None,
    cascade: bool = True,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    stores: Stores | None = None,
) -> ForgetResult:
    """Erase `seqs` of `session` (and, with `cascade`, the answers whose receipts cited them); return what was done.

    `seqs` may hold ints, decimal strings (as typed) or event ids (`evt_…`, as MCP's forget_memory names them).

    Raises PlanError (one line; nothing changed) for an unknown session, a seq the session does not hold, an
    event already erased or an erasure record. The app passes its Engine's ledger, index and key, and as
    `copies` the folders where it keeps download copies (its temp folder, Gradio's cache): any copy of a receipt
    this erasure redacts or withdraws is deleted there.

    `stores` (storage.stores): the session's ledger, index and receipts, on files or PostgreSQL (default: the
    files in `data_dir`, with `ledger` and `index` when given). On PostgreSQL the same steps run on the rows —
    the ledger's erase rewrites the lines and appends the records in one transaction, the index forgets, receipts are
    redacted or deleted — and each table is VACUUMed; the certificate is kept in `data_dir`, the journal in the
    database (`erasures_pending`, so a crash is finished by `recover` or a copy of the session on any replica), and what PostgreSQL keeps
    after VACUUM (free space not yet reused, WAL, backups, replicas) is the operator's to expire."""
    w = where(data_dir, stores, ledger=ledger, index=index)
    try:
        return _forget(w, session, seqs, reason, cascade, key, copies)
    finally:
        w.close_index()


def _forget(
    w: Where,
    session: str,
    seqs: Iterable[object],
    reason: str | None,
    cascade: bool,
    key: SigningKey | None,
    copies: Iterable[str | os.PathLike[str]],
) -> ForgetResult:
    data, led = w.data_dir, w.ledger
    session = _check_session(w, session)
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
        raise PlanError("reason: must be text of at most 2000 characters")
    with w.receipts.turn_lock(session):
        count, _head = led.head(session)
        cites = citations(data, session, led, backend=w.receipts)
        p = plan(session, _resolve(led, session, seqs), count, lambda s: slot(led.read_events(session, [s])[0]), cites, cascade=cascade)
        doomed = led.read_events(session, p.erase)
        p = withdraw_quoting(data, p, [ev for ev in doomed if ev.seq in p.named], backend=w.receipts)
        if reason:
            _check_reason(reason, doomed)
        quarantine = led.quarantined_with(session, needles(doomed))
        del doomed
        k = _key(data, key)
        w.open_now()  # opened before the ledger changes, as it always was: an index that cannot open stops nothing half-way
        journal = {
            "scope": "events",
            "session": session,
            "seqs": list(p.erase),
            "redact": {r: list(s) for r, s in p.redact.items()},
            "withdraw": list(p.withdraw),
            "quarantine": quarantine,
            "records": records_for(len(p.erase)),
        }
        # the journal first on files (removed if the records never reached the log); on PostgreSQL a row written in the
        # erase's own transaction, there exactly when the ledger changed and seen by every replica (settle, recover)
        try:
            erasure, finished_journal = led.erase_journaled(
                session, list(p.erase), reason=reason, journal=canonical_json(journal) + b"\n",
                landed=partial(has_record_for, led, session, p.erase),
            )
        except EraseError as exc:
            raise PlanError(str(exc)) from None
        done = finish(w, k, session, erasure.records, p.redact, p.withdraw, quarantine)
        # the copies before the journal goes: a crash while they are deleted is finished by `recover` (given them)
        gone = purge_copies(copies, done.redacted + done.withdrawn, session=session)
        finished_journal()
        for c in cites:  # a receipt-less answer's record, once that answer is erased, has nothing left to say
            if c.format == UNRECEIPTED and c.response_seq in p.erase:
                w.receipts.drop_cites(session, c.receipt_id)
    return dataclasses.replace(_result(p, [r.seq for r in erasure.records], done), copies_removed=gone)


def _check_reason(reason: str, events: Sequence[Event]) -> None:
    """The reason is kept in the erasure record for good: refuse one that repeats a word of what it erases."""
    hit = first_quoted(reason, [ev.text for ev in events])  # the reason read once, however many events
    if hit is not None:
        raise PlanError(f"reason: repeats a word of the event at seq {events[hit].seq}, and the reason is kept after the erasure; say why without quoting it")


def _result(p: Plan, record_seqs: Sequence[int], done: Finished) -> ForgetResult:
    return ForgetResult(
        p.session,
        p.named,
        p.cascaded,
        p.erase,
        p.roles,
        done.redacted,
        done.withdrawn,
        record_seqs[-1],
        done.path,
        done.envelope,
        imports_dropped=done.imports_dropped,
        quarantine_removed=done.quarantine_removed,
        record_seqs=tuple(record_seqs),
    )


# -- forgetting a whole session -------------------------------------------------------------
def forget_session(
    data_dir: str | os.PathLike[str],
    session: str,
    *,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    stores: Stores | None = None,
) -> ForgetResult:
    """Delete a session — its ledger, receipts, Merkle tree, audit cache and index rows — and purge the index;
    leave one certificate in DATA_DIR/erasures/ holding only hashes (the final checkpoint and counts).
    `copies`: as for `forget`; every download copy of the session's receipts there is deleted. `stores`: as for
    `forget` (on PostgreSQL the rows are deleted and the tables VACUUMed)."""
    result = _forget_session(where(data_dir, stores, ledger=ledger, index=index), session, key, None, copies)
    assert result is not None
    return result


def forget_session_if_idle(
    data_dir: str | os.PathLike[str],
    session: str,
    idle_before: float,
    *,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    stores: Stores | None = None,
) -> ForgetResult | None:
    """forget_session for RETENTION_HOURS: only if the ledger was last written before `idle_before` (a Unix
    time; on files the log's mtime, on PostgreSQL the last event's `ts`), checked under the turn lock, so a turn
    running or just finished is never deleted; else None."""
    return _forget_session(where(data_dir, stores, ledger=ledger, index=index), session, key, idle_before, copies)


def _last_written(w: Where, session: str) -> float | None:
    """When the session was last written (the idle check's answer; on files the log's mtime, on PostgreSQL the
    server's clock at its last write)."""
    return w.ledger.last_written(session)


def _forget_session(
    w: Where,
    session: str,
    key: SigningKey | None,
    idle_before: float | None,
    copies: Iterable[str | os.PathLike[str]],
) -> ForgetResult | None:
    try:
        return _forget_session_in(w, session, key, idle_before, copies)
    finally:
        w.close_index()


def _forget_session_in(
    w: Where,
    session: str,
    key: SigningKey | None,
    idle_before: float | None,
    copies: Iterable[str | os.PathLike[str]],
) -> ForgetResult | None:
    data, led = w.data_dir, w.ledger
    session = _check_session(w, session)
    k = _key(data, key)
    w.open_now()  # opened before anything changes, as it always was
    with w.receipts.turn_lock(session):
        if idle_before is not None:
            written = _last_written(w, session)
            if written is None or written >= idle_before:
                return None
        count, head = led.head(session)
        if count == 0:
            raise PlanError(f"session {session}: holds no events, so there is nothing to sign a certificate over")
        receipt_ids = w.receipts.receipt_ids(session)
        n_receipts = len(receipt_ids)
        store = w.receipts.synced_tree(led, session)
        try:
            cp = sign_checkpoint(session=session, tree_size=count, root=store.root(count), chain_head=head, issued_at=now_ts(), key=k)
        finally:
            store.close()
        body = cert.session_body(session=session, events=count, receipts=n_receipts, checkpoint=cp, issued_at=now_ts())
        envelope = cert.sign_certificate(body, k)
        path = erasures_dir(data) / f"erasure-{session}-all-{cp['body']['issued_at'].replace(':', '').replace('.', '')}.json"
        write_durable(path, cert.certificate_file_bytes(envelope))  # first: it holds only hashes
        journal = {"scope": "session", "session": session, "certificate": path.name, "receipts": receipt_ids}
        # on PostgreSQL a row every replica sees, with the certificate (hashes only) for the replica that finishes it
        finished_journal = led.keep_journal(session, canonical_json(journal) + b"\n", cert.certificate_file_bytes(envelope))
        try:
            scrubbed = delete_session(w, session, (count, head), idle_before)
        except SessionMoved as exc:  # an import appended after the count was read: the certificate would not cover it
            finished_journal()
            path.unlink(missing_ok=True)
            if idle_before is not None:
                return None  # written just now: not idle any more
            raise PlanError(f"{exc}; forget the session again") from None
        gone = purge_copies(copies, receipt_ids, session=session, whole_session=True)
        finished_journal()
    return ForgetResult(session, (), (), tuple(range(count)), {}, (), tuple(sorted(receipt_ids)), None, path, envelope, gone, quarantine_removed=scrubbed)


# -- recovery after a crash --------------------------------------------------------------------
def pending(data_dir: str | os.PathLike[str]) -> list[Path]:
    """The journals in this DATA_DIR (on PostgreSQL an erasure's journal is a row: `pending_sessions`)."""
    folder = erasures_dir(data_dir)
    return sorted(folder.glob(".pending-*.json")) if folder.is_dir() else []


def _journals(data: Path, stores: Stores | None, session: str | None) -> list[Journal]:
    """Every erasure journal recover finishes: the files in `data` (on either backend: the file backend's, or one an
    older version left on PostgreSQL) and, on PostgreSQL, the database's rows, which every replica sees."""
    out = file_journals(data, session)
    if stores is not None:
        out += db_journals(stores.ledger, session)
    return out


def pending_sessions(data_dir: str | os.PathLike[str], stores: Stores | None = None) -> list[str]:
    """The sessions with an erasure in progress or stopped half way: in this DATA_DIR's journals and, on PostgreSQL,
    in the database (whichever replica began it)."""
    return sorted({j.session for j in _journals(Path(data_dir), stores, None)})


def recover(
    data_dir: str | os.PathLike[str],
    *,
    ledger: LedgerStore | None = None,
    index: SearchIndex | None = None,
    key: SigningKey | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    stores: Stores | None = None,
    session: str | None = None,
) -> list[Path]:
    """Finish every erasure a crash interrupted (call it when the CLI or the app starts), or with `session` only
    that session's (control.settle, before a copy of it is made); return the certificates written. An erasure whose
    record reached the ledger is completed (index purge, receipts, checkpoint, certificate); one that did not is
    dropped — the ledger never changed. A session deletion is completed.

    `copies`: as for `forget` — the folders where the app keeps download copies. A crash left there the copies of
    the receipts the interrupted erasure redacts or withdraws (every receipt of a deleted session), still holding
    the words: each completed erasure deletes them, as `forget` would have.

    `stores`: as for `forget`. On PostgreSQL an erasure's journal is a row of `erasures_pending` (written in the
    ledger's erase transaction), so any replica finishes an erasure another replica began — its certificate written
    in this `data_dir` — and journals left in `data_dir` by an older version are finished too."""
    data = Path(data_dir)
    journals = _journals(data, stores, session)
    if not journals:
        return []
    w = where(data, stores, ledger=ledger, index=index)
    try:
        return _recover(w, journals, key, [Path(c) for c in copies])
    finally:
        w.close_index()


def _recover(w: Where, journals: list[Journal], key: SigningKey | None, roots: list[Path]) -> list[Path]:
    data, led = w.data_dir, w.ledger
    k = _key(data, key)
    w.open_now()  # opened before anything changes, as it always was
    written = []
    for journal in journals:
        session = journal.session
        try:
            validate_session_id(session)
        except EventError:
            log.warning("%s: not an erasure journal name; left for a person", journal.name)
            continue
        with w.receipts.turn_lock(session):  # a forget still running in another process (or replica) finishes first
            try:
                raw, certificate = journal.read()
                entry = loads_strict(raw, "$")
                if entry["session"] != session:
                    raise ValueError("names another session")
            except FileNotFoundError:
                continue  # that forget finished (here, or on another replica)
            except (ValueError, KeyError, TypeError, OSError) as exc:
                log.warning("%s: unreadable erasure journal (%s); left for a person", journal.name, str(exc)[:200])
                continue
            if entry.get("scope") == "session":
                delete_session(w, session)
                purge_copies(roots, _ids(entry.get("receipts")), session=session, whole_session=True)
                written.append(_session_certificate(data, entry.get("certificate"), certificate))
            elif led.exists(session) and (records := find_records(led, session, entry["seqs"], entry.get("records"))) is not None:
                written.append(finish(w, k, session, records, entry["redact"], entry["withdraw"], entry.get("quarantine", [])).path)
                purge_copies(roots, [*_ids(entry["redact"]), *_ids(entry["withdraw"])], session=session)
            else:
                log.warning("session %s: an erasure was interrupted before the ledger changed; nothing was erased", session)
            journal.done()
    return written


def _session_certificate(data: Path, name: object, kept: bytes | None) -> Path:
    """The certificate of a finished session deletion: in this DATA_DIR, written there from the bytes the database
    kept with the journal when another replica began the deletion (it holds only hashes)."""
    path = erasures_dir(data) / str(name)
    if kept is not None and isinstance(name, str) and Path(name).name == name and name.startswith("erasure-") and not path.exists():
        write_durable(path, kept)
    return path


def _ids(value: object) -> list[str]:
    """Receipt ids as a journal lists them (a list, or a mapping's keys); anything else lists none."""
    return [x for x in value if isinstance(x, str)] if isinstance(value, (list, dict)) else []


def describe(result: ForgetResult) -> str:
    """The CLI's output: what was erased, then `certificate: <path>` as the last line."""
    return "\n".join([*result.summary_lines(), f"certificate: {result.certificate_path}"])


def result_dict(result: ForgetResult, recovered: Sequence[Path] = ()) -> dict[str, Any]:
    """The CLI's `--json` output: what was erased (seqs, roles, receipts, files) and the certificate's path.

    `scope` is "events" for `forget` and "session" for `forget_session` (then `events` is the session's count and
    no seq is listed). `recovered`: certificates of interrupted erasures finished first. Never a text."""
    common = {
        "session": result.session,
        "certificate": str(result.certificate_path),
        "receipts": {"redacted": list(result.redacted), "withdrawn": list(result.withdrawn)},
        "copies_removed": [str(p) for p in result.copies_removed],
        "quarantine_removed": list(result.quarantine_removed),
        "recovered": [str(p) for p in recovered],
    }
    if result.record_seq is None:
        return {"scope": "session", "events": len(result.erased), **common}
    return {
        "scope": "events",
        "named": list(result.named),
        "cascaded": list(result.cascaded),
        "erased": [{"seq": s, "role": result.roles.get(s)} for s in result.erased],
        "record_seq": result.record_seq,
        "record_seqs": list(result.record_seqs or (result.record_seq,)),
        "imports_dropped": result.imports_dropped,
        **common,
    }


def certificate_json(result: ForgetResult) -> str:
    return json.dumps(result.certificate, indent=2, sort_keys=True)
