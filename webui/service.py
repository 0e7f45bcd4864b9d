"""What every entry point of the app does, once (no Gradio here).

The UI handlers and the MCP tools are thin edges over this class, so the
browser, gradio_client and an MCP client get the same rules: a session key
opens exactly one session; K, messages and uploads are checked before anything
is written; and a receipt is checked against a ledger only when it belongs to
the caller's own session.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle import Origin
from bundle.importer import verify_imported_receipt
from chat.engine import Engine, InputError, Turn
from chat.replay import AsOfError, Replay, replay, search_as_of
from chat.retrieve import Retrieved
from chat.withheld import withheld
from control.revocation import current as current_controls
from control.settle import ErasureUnfinished, settle, settled
from control.state import ControlState
from control.supersession_state import Supersession
from ledger import Event, SessionReport
from ledger.corrupted import LedgerCorrupted
from receipts import checkpoints, redact
from receipts.body import parse_receipt
from receipts.certificate import Certificate, parse_certificate
from receipts.certificate_check import CertificateReport
from receipts.cosignature import Policy
from receipts.keys import KeyConfigError, format_public_key
from receipts.verify import Report
from retrieval.model import SearchError, SearchResponse
from storage import offline as checkpoints_files
from storage.local import keys_dir
from storage.offline import verify_bytes, verify_certificate_bytes
from webui import history as h
from webui.bundles import receipt_home
from webui.downloads import Downloads
from webui.history import HistoryCheck
from webui.inputs import K_MAX, BadInput, check_query, message_or_error, parse_k
from webui.places import keep_private
from webui.render_verify import MODE_IMPORTED, MODE_LEDGER, MODE_NO_LEDGER, MODE_OTHER_SESSION
from webui.sessions import SessionKeyError, check_session_key, is_session_key, session_id
from webui.tamper import Tampered, tamper

REPLAY_CACHE = 64  # replays kept, by receipt and ledger head: a repeated Verify is not another index build
REPLAY_MAX_EVENTS = 200_000  # the Verify tab replays a receipt whose search saw at most this many events (seconds)
log = logging.getLogger("webui")
RESTORE_EVENTS = 200  # how much of a session a reload puts back on screen
HISTORY_UNCHECKED = "the history could not be checked just now; the details are in the server log"


@dataclass(frozen=True, slots=True)
class LedgerView:
    session: str
    events: list[Event]  # the last RESTORE-sized tail is enough for display; all are verified
    total: int
    report: SessionReport | None  # None: no such session yet
    checkpoint: dict[str, Any] | None  # the latest signed checkpoint (receipts.checkpoints.latest)
    problem: str | None = None  # why the events could not be listed


@dataclass(frozen=True, slots=True)
class Past:
    """One restored event and, for an answer, the body of its receipt (None if that file is gone)."""

    event: Event
    body: dict[str, Any] | None


class Service:
    def __init__(self, engine: Engine, downloads: Downloads | None = None) -> None:
        self.engine = engine
        self.data_dir = engine.data_dir
        self._replays: OrderedDict[tuple[str, int, str], Replay] = OrderedDict()  # (receipt sha256, ledger head) -> replay
        self._replays_lock = threading.Lock()
        self.downloads = downloads if downloads is not None else Downloads()
        self.public_key_text = format_public_key(engine.key.public_key)
        self.key_id = engine.key.key_id
        self.public_key_path = self.downloads.put_static("signing.pub", self.public_key_text.encode("ascii"))
        # Where the app keeps copies of receipts (the download copies; webui.layout.build adds Gradio's file cache):
        # forgetting a memory deletes the copies that still hold it (webui/forget.py).
        self.cache_dirs: list[Path] = [self.downloads.root]
        # A visitor's message names none of the server's places (webui/places.py, applied by handlers.to_gr_error).
        keep_private(self.data_dir, "DATA_DIR")
        keep_private(self.downloads.base, "the download folder")
        try:
            keep_private(keys_dir(self.data_dir), "the keys folder")
        except KeyConfigError:
            pass
        if engine.stores.database is not None:
            keep_private(engine.stores.database.shown, "the database")

    # -- sessions --------------------------------------------------------------------
    @staticmethod
    def session(key: object) -> str:
        """The public session id a key opens. Raises SessionKeyError."""
        return session_id(check_session_key(key))

    def history(self, key: str, limit: int = RESTORE_EVENTS) -> list[Past]:
        """The last `limit` events of the key's session, answers with their receipt bodies."""
        session = self.session(key)
        if not self.engine.ledger.exists(session):
            return []
        try:
            with self.settled(session):  # once: the receipts shown are read under the session's turn lock
                return self._history(session, limit, shown=True)
        except BadInput:  # not to be shown now (settled): the answers are shown without stamps
            return self._history(session, limit, shown=False)

    def _history(self, session: str, limit: int, *, shown: bool) -> list[Past]:
        count, _head = self.engine.ledger.head(session)
        out = []
        for ev in self.engine.ledger.events(session, start_seq=max(0, count - limit)):
            body = None
            rid = ev.meta.get("receipt_id") if ev.role == "assistant" else None
            if isinstance(rid, str) and shown:
                body = self._receipt_body(session, rid)
            out.append(Past(ev, body))
        return out

    def _receipt_body(self, session: str, receipt_id: str) -> dict[str, Any] | None:
        """What a stored receipt says; the caller holds `settled`. None when gone, unreadable or malformed."""
        try:
            return parse_receipt(self.engine.backend.read_receipt(session, receipt_id)).body
        except (OSError, ValueError):  # the answer is shown without stamps
            return None

    def settle(self, session: str) -> None:
        """Before anything of the session is shown, copied out or sent to a model (a receipt read, a search, a turn, the
        memories a consent turn proposes): an erasure of it that stopped half way is finished
        (control.settle, with the engine's stores and key; the app's download folders lose their copies of the
        receipts it redacts), or BadInput (one line) when it cannot be finished now."""
        try:
            settle(self.data_dir, session, stores=self.engine.stores, key=self.engine.key, copies=self.cache_dirs)
        except ErasureUnfinished as exc:
            raise BadInput(str(exc)) from None

    @contextmanager
    def settled(self, session: str) -> Iterator[None]:
        """Every read of a stored receipt to be shown or copied out (a download, the chat restored on a page) runs in
        this, as the bundle export does (control.settle.settled): `settle`, then the session's turn lock held with no
        erasure of it pending — one that began in between (another request, process or replica) and stopped half way
        is settled too — so a forget never finds a copy being made: it waits for the lock, and then redacts or removes
        the download copies with the stored receipts. BadInput (one line) when an erasure cannot be finished now."""
        try:
            with settled(self.data_dir, session, self.engine.backend.turn_lock, stores=self.engine.stores, settle_now=lambda: self.settle(session)):
                yield
        except ErasureUnfinished as exc:
            raise BadInput(str(exc)) from None

    def receipt_bytes(self, session: str, receipt_id: str) -> bytes:
        """A stored receipt, read to be shown (`settled`), so a receipt a forget redacts or withdraws is never shown
        as it was. BadInput (settled); OSError (ReceiptNotFound) / ValueError as ReceiptBackend.read_receipt."""
        with self.settled(session):
            return self.engine.backend.read_receipt(session, receipt_id)

    # -- chat, memory, search ------------------------------------------------------------
    def turn(
        self,
        key: object,
        message: object,
        k: object,
        on_delta: Callable[[str], None] | None = None,
        *,
        k_max: int = K_MAX,
    ) -> Turn:
        """Raises SessionKeyError / BadInput (nothing written), TurnError (the turn failed). An erasure of the session
        that stopped half way is finished first (settle): its index rows still hold the words, and a turn would hand
        them to the model and copy them into its receipt."""
        session, k_, text = self.check_turn(key, message, k, k_max=k_max)
        self.settle(session)  # with the download folders: the engine's own settle would leave their copies
        try:
            return self.engine.turn(session, text, k_, on_delta=on_delta, settled=True)
        except InputError as exc:
            raise BadInput(str(exc)) from None

    def check_turn(self, key: object, message: object, k: object, *, k_max: int = K_MAX) -> tuple[str, int, str]:
        return self.session(key), parse_k(k, k_max), message_or_error(message)

    def remember(self, key: object, text: object) -> Event:
        session = self.session(key)
        try:
            return self.engine.remember(session, message_or_error(text))
        except InputError as exc:
            raise BadInput(str(exc)) from None

    def search(
        self,
        key: object,
        query: object,
        k: object,
        *,
        k_max: int = K_MAX,
        include_revoked: bool = False,
        include_superseded: bool = False,
        explain: bool = False,
    ) -> SearchResponse:
        """K in [1, k_max]: the page's slider range by default; the MCP tools pass K_API_MAX. Control events and the
        offline stand-in's replies are never results; revoked memories (and answers that may quote one) only with `include_revoked`, superseded ones (replaced by a newer statement,
        issue 12) only with `include_superseded` (the caller labels them: `revoked`, `superseded`).
        `explain`: each hit carries why it ranked where it did (retrieval.explain)."""
        session = self.session(key)
        k_, q = parse_k(k, k_max), check_query(query)
        self.settle(session)  # an erasure stopped half way left the words in the index rows: finished first
        led = self.engine.ledger
        state = current_controls(led, session) if led.exists(session) else ControlState()
        # revoked memories and every answer that may quote one (chat.withheld: the rule a turn uses), unless asked for;
        # an MCP client is itself a model. Control events are not in the index.
        exclude = set() if include_revoked else set(withheld(self.engine.cites, session, state))
        if not include_superseded:
            exclude |= set(state.supersessions.superseded)
        # never the offline stand-in's replies (boilerplate and quotes, not memories; chat.stand_ins): what a turn is handed
        index = self.engine.index
        try:
            return self.engine.stand_ins.left_out(
                session, lambda skip: index.search(session, q, k_, exclude_seqs=sorted(exclude.union(skip)), explain=explain), lambda got: got.results
            )
        except SearchError as exc:
            raise BadInput(str(exc)) from None

    def search_as_of(self, key: object, query: object, k: object, as_of: str) -> tuple[int, Retrieved]:
        """Manual search's "as of" (issue 34): (the size, the turn's retrieval over the session as it stood when its
        ledger held `as_of` events — chat.replay.search_as_of). BadInput, one line, for a size that is not a whole
        number within the session, or over REPLAY_MAX_EVENTS when it is not the session's size now (an index of that
        many events is built for the answer)."""
        session = self.session(key)
        k_, q = parse_k(k, K_MAX), check_query(query)
        text = as_of.strip()
        led = self.engine.ledger
        now = led.head(session)[0] if led.exists(session) else 0
        if not (text.isascii() and text.isdigit()) or int(text) > now:
            raise BadInput(f"as of: expected a number of events from 0 to {now} (this session's size now), or empty for now")
        size = int(text)
        if size != now and size > REPLAY_MAX_EVENTS:
            raise BadInput(f"as of: {size:,} events is over this app's {REPLAY_MAX_EVENTS:,} for a past size; "
                           "`python -m retrieval search DATA SESSION QUERY --as-of SIZE` answers it")
        self.settle(session)
        try:
            with self.settled(session):
                return size, search_as_of(self.engine.stores, self.engine.cites, session, q, k_, size)
        except AsOfError as exc:
            raise BadInput(f"as of: {exc}") from None
        except SearchError as exc:
            raise BadInput(str(exc)) from None

    def restored_receipt(self, key: object, receipt_id: str) -> str | None:
        """A download copy of one of the key's receipts, or None if the file is gone or may not be copied now. Read
        and written under `settled`: a forget that starts meanwhile waits for the copy, then redacts or removes it."""
        session = self.session(key)
        try:
            with self.settled(session):
                try:
                    data = self.engine.backend.read_receipt(session, receipt_id)
                except (OSError, ValueError):  # gone, unreadable or too large
                    return None
                return self.downloads.put(f"{receipt_id}.json", data)
        except BadInput:  # not to be copied now (settled)
            return None

    def receipt_download(self, turn: Turn) -> str | None:
        """A download copy of the turn's receipt, read and written under `settled`; None when it may not be copied
        now. OSError as ReceiptBackend.read_receipt and Downloads.put."""
        session = turn.user_event.session
        try:
            with self.settled(session):
                return self.downloads.put(f"{turn.receipt_id}.json", self.engine.backend.read_receipt(session, turn.receipt_id))
        except BadInput:
            return None

    def latest_receipt(self, key: object, limit: int = RESTORE_EVENTS) -> tuple[str, dict[str, Any]] | None:
        """(receipt id, what it says) of the newest answer among the last `limit` events whose receipt is on disk."""
        session = self.session(key)
        if not self.engine.ledger.exists(session):
            return None
        count, _head = self.engine.ledger.head(session)
        found = None
        for ev in self.engine.ledger.events(session, start_seq=max(0, count - limit)):
            rid = ev.meta.get("receipt_id") if ev.role == "assistant" else None
            if isinstance(rid, str):
                found = rid
        if found is None:
            return None
        try:
            with self.settled(session):  # read under the session's turn lock, with no erasure of it pending
                body = self._receipt_body(session, found)
        except BadInput:  # not to be shown now
            return None
        return None if body is None else (found, body)

    def withheld_copy(self, key: object, receipt_id: object, seqs: Iterable[int]) -> str:
        """A download copy of one of the key's receipts with the disclosures of `seqs` left out (receipts.redact):
        the signature still verifies; the Verify tab reads those memories as [withheld]. Raises BadInput, RedactError."""
        session = self.session(key)
        if not isinstance(receipt_id, str):
            raise BadInput("withhold: no receipt to copy yet: ask something first")
        chosen = sorted(set(seqs))
        if not chosen:
            raise BadInput("withhold: tick at least one memory to leave out of the copy")
        try:
            with self.settled(session):  # read and written under it: a forget that starts meanwhile waits for the copy
                try:
                    raw = self.engine.backend.read_receipt(session, receipt_id)
                except (OSError, ValueError):
                    raw = None
                if raw is not None:
                    return self.downloads.put(f"{receipt_id}-withheld.json", redact(raw, chosen))
        except BadInput as exc:  # not to be copied now (settled)
            raise BadInput(f"withhold: {exc}") from None
        raise BadInput(f"withhold: receipt {receipt_id[:40]} is not in this session")

    def revoked(self, key: object) -> dict[int, int]:
        """revoked seq -> the seq of the control event that revoked it, in the key's session (for labels)."""
        session = self.session(key)
        led = self.engine.ledger
        if not led.exists(session):
            return {}
        return {s: r.control_seq for s, r in current_controls(led, session).revoked.items()}

    def superseded(self, key: object) -> dict[int, Supersession]:
        """superseded seq -> its supersession (the newer statement's seq and id), in the key's session (for labels)."""
        session = self.session(key)
        led = self.engine.ledger
        if not led.exists(session):
            return {}
        return dict(current_controls(led, session).supersessions.superseded)

    # -- verification --------------------------------------------------------------------
    def verify(self, raw: bytes, key: object = None) -> tuple[Report, str]:
        """Verify receipt bytes; the ledger checks run only for the caller's own session (or a session the caller
        imported: verify_where). Raises MalformedReceipt."""
        report, mode, _home = self.verify_where(raw, key)
        return report, mode

    def verify_where(self, raw: bytes, key: object = None, *, policy: Policy | None = None) -> tuple[Report, str, Origin | None]:
        """(report, mode, the imported session it was checked against). A receipt of a session the caller imported
        (issue 13) is checked against that import's own folder with the key its bundle carried (bundle.trusted_keys).
        The witness cosignatures it carries (§22.1) are checked under `policy`, else the app's (WITNESS_POLICY)."""
        receipt = parse_receipt(raw)
        own = session_id(key) if is_session_key(key) else None
        data_dir = None
        if own is None or receipt.session != own:
            home = receipt_home(self, key, receipt.session)
            if home is not None:
                return verify_imported_receipt(raw, self.data_dir, home.local, stores=self.engine.stores), MODE_IMPORTED, home
            mode = MODE_OTHER_SESSION
        elif not self.engine.ledger.exists(own):
            mode = MODE_NO_LEDGER
        else:
            mode, data_dir = MODE_LEDGER, self.data_dir
        source, _receipts, _latest = self._database()
        policy = policy if policy is not None else self.engine.witnesses
        return verify_bytes(raw, trusted=[self.engine.key.public_key], data_dir=data_dir, source=source, policy=policy), mode, None

    def replay(self, raw: bytes, report: Report, mode: str) -> Replay | str:
        """Why these memories (issue 34): the replay of a receipt's ranking (chat.replay) — only for a receipt of the
        visitor's own session that verified against its ledger here; else why it is not replayed here (a sentence)."""
        if mode != MODE_LEDGER:
            return "Replayed only for a receipt of your own session, checked against its ledger here."
        if report.verdict != "verified":
            return "Not replayed: the receipt did not verify (a ranking nobody signed would be compared)."
        receipt = parse_receipt(raw)
        indexed = receipt.signed_body.get("ranking", {}).get("indexed", 0)
        if indexed > REPLAY_MAX_EVENTS:
            return (f"Not replayed here: the search saw {indexed:,} events, over this app's {REPLAY_MAX_EVENTS:,}; "
                    "`python -m receipts replay RECEIPT --data DATA_DIR --trust PUBKEY` replays it.")
        try:
            with self.settled(receipt.session):
                # a replay reads only the ledger (up to the receipt's sizes, and the erasures since): the same receipt
                # against the same ledger head replays the same, so a visitor clicking Verify again (or an MCP client
                # calling verify_receipt in a loop) costs a head read, not another index build of up to 200k events
                key = (hashlib.sha256(raw).hexdigest(), *self.engine.stores.ledger.head(receipt.session))
                with self._replays_lock:
                    done = self._replays.get(key)
                if done is not None:
                    return done
                got = replay(self.engine.stores, self.engine.cites, receipt)
                with self._replays_lock:
                    self._replays[key] = got
                    while len(self._replays) > REPLAY_CACHE:
                        self._replays.popitem(last=False)
                return got
        except BadInput as exc:  # an erasure of the session that cannot be finished now: said in the section
            return f"Not replayed just now: {exc}"
        except Exception as exc:  # noqa: BLE001 - the verdict above stands; the replay says it could not run, not why
            log.error("replay of %s failed (%s)", receipt.receipt_id, type(exc).__name__)  # no message: it may hold a path
            return "Not replayed just now: the replay could not run; the details are in the server log."

    def _database(self) -> tuple[Any, Any, Any]:
        """On PostgreSQL what the auditor reads instead of the data directory's files: the ledger (its rows audited
        from a private copy, storage.files.receipts.ledger_copy), the receipts and the latest checkpoint; (None, None, None) on files."""
        stores = self.engine.stores
        if stores.ledger.kept_elsewhere() is None:  # DATA_DIR's files are the record: the auditor reads them
            return None, None, None
        return stores.ledger, stores.receipts, stores.receipts.latest_checkpoint

    def verify_certificate(self, raw: bytes, key: object = None) -> tuple[Certificate, CertificateReport, str]:
        """Verify an erasure certificate; against this data directory only when it is about the caller's own
        session (as for receipts). Raises MalformedCertificate."""
        cert = parse_certificate(raw)
        own = session_id(key) if is_session_key(key) else None
        mine = own is not None and cert.session == own
        source, receipts, _latest = self._database()
        report = verify_certificate_bytes(
            raw, trusted=[self.engine.key.public_key], data_dir=self.data_dir if mine else None, source=source, receipts=receipts
        )
        return cert, report, MODE_LEDGER if mine else MODE_OTHER_SESSION

    def tamper(self, raw: bytes, target: str, key: object = None) -> tuple[Tampered, Report, str]:
        """Raises MalformedReceipt (not a receipt) or TamperError (nothing to change there)."""
        t = tamper(raw, target)
        report, mode = self.verify(t.raw, key)
        return t, report, mode

    # -- the history the visitor saw ------------------------------------------------------------
    def history_check(self, key: object, kept_text: object) -> h.HistoryCheck:
        """Prove that the key's session today extends the checkpoint the visitor's browser kept.

        `kept_text` is the JSON text the browser kept for this session (visitor
        input: parsed strictly, anything unusable is ignored with a note). The
        trusted key is the engine's own, as in `verify`. Raises SessionKeyError only.
        """
        session = self.session(key)
        kept, note = h.parse_kept(kept_text, session)
        try:
            if kept is not None and kept["key_id"] != self.key_id:
                return self._key_changed(session, kept, note)
            trusted = [self.engine.key.public_key]
            source, _receipts, latest = self._database()
            if kept is not None:
                report = checkpoints_files.prove_since(self.data_dir, session, kept, trusted, source=source, read_latest=latest)
                if not h.bad_kept_signature(report):
                    return h.from_report(session, kept, report, note)
                note = "the checkpoint kept in this browser does not carry a valid signature by this app's key: ignored"
            try:
                current = self.engine.backend.latest_checkpoint(session)
            except checkpoints.MalformedCheckpoint as exc:
                return h.HistoryCheck(
                    session, h.UNSOUND, f"the server's signed checkpoint cannot be read: {exc}", note=note
                )
            if current is None:
                if self.engine.ledger.exists(session) and self.engine.ledger.head(session)[0] > 0:
                    return h.HistoryCheck(
                        session, h.FIRST, "the server holds no signed checkpoint of this session yet", note=note
                    )
                return h.HistoryCheck(session, h.EMPTY, "", note=note)
            return h.first_look(
                session, current, checkpoints_files.prove_since(self.data_dir, session, current, trusted, source=source, read_latest=latest), note
            )
        except (OSError, LedgerCorrupted) as exc:  # the check could not run: say so, never an error page
            log.warning("session %s: the kept checkpoint could not be checked (%s)", session, type(exc).__name__)
            return h.HistoryCheck(
                session,
                h.UNCHECKED,
                HISTORY_UNCHECKED,  # a fixed sentence: the class is an internal name (issue 18), the log has it
                kept=kept,
                note=note,
            )

    def _key_changed(self, session: str, kept: dict[str, Any], note: str | None) -> h.HistoryCheck:
        try:
            current = self.engine.backend.latest_checkpoint(session)
        except checkpoints.MalformedCheckpoint:
            current = None
        message = (
            f"the app's signing key changed since you last saw this history: the checkpoint this browser kept was "
            f"signed by {kept['key_id']}, this app signs with {self.key_id}, so the history cannot be checked against it"
        )
        return h.HistoryCheck(session, h.KEY_CHANGED, message, kept=kept, current=current, note=note)

    def checkpoint_download(self, which: str, checkpoint: dict[str, Any]) -> str:
        """A download copy of a checkpoint (`which`: "kept" or "current"), as `receipts checkpoint` prints it."""
        b = checkpoint["body"]
        name = f"checkpoint-{which}-{b['session'][:12]}-{b['tree_size']}.json"
        return self.downloads.put(name, checkpoints.checkpoint_file_bytes(checkpoint))

    # -- the ledger tab --------------------------------------------------------------------
    def ledger(self, key: object, limit: int = 500) -> LedgerView:
        session = self.session(key)
        led = self.engine.ledger
        if not led.exists(session):
            return LedgerView(session, [], 0, None, None)
        report = led.verify(session)
        problem = None
        events: list[Event] = []
        try:
            count, _head = led.head(session)
            events = list(led.events(session, start_seq=max(0, count - limit)))
        except LedgerCorrupted as exc:
            problem, count = str(exc), report.events
        checkpoint = None
        try:  # signed after every append (receipts.checkpoints): newer than the newest receipt's
            checkpoint = self.engine.backend.latest_checkpoint(session)
        except (OSError, checkpoints.MalformedCheckpoint) as exc:
            problem = f"{problem}; {exc}" if problem else f"the latest signed checkpoint cannot be read: {exc}"
        return LedgerView(session, events, count, report, checkpoint, problem)


__all__ = ["BadInput", "HistoryCheck", "LedgerView", "Past", "Service", "SessionKeyError"]
