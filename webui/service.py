"""What every entry point of the app does, once (no Gradio here).

The UI handlers and the MCP tools are thin edges over this class, so the
browser, gradio_client and an MCP client get the same rules: a session key
opens exactly one session; K, messages and uploads are checked before anything
is written; and a receipt is checked against a ledger only when it belongs to
the caller's own session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chat.engine import Engine, InputError, Turn
from ledger import Event, LedgerCorrupted, SessionReport
from receipts import files
from receipts.api import verify_bytes
from receipts.body import MalformedReceipt, parse_receipt
from receipts.keys import format_public_key
from receipts.verify import Report
from retrieval.model import SearchError, SearchResponse

from .downloads import Downloads
from .inputs import BadInput, check_query, message_or_error, parse_k
from .render_verify import MODE_LEDGER, MODE_NO_LEDGER, MODE_OTHER_SESSION
from .sessions import SessionKeyError, check_session_key, is_session_key, session_id
from .tamper import Tampered, tamper

log = logging.getLogger("webui")
RESTORE_EVENTS = 200  # how much of a session a reload puts back on screen


@dataclass(frozen=True, slots=True)
class LedgerView:
    session: str
    events: list[Event]  # the last RESTORE-sized tail is enough for display; all are verified
    total: int
    report: SessionReport | None  # None: no such session yet
    latest_receipt_id: str | None
    checkpoint: dict[str, Any] | None
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
        self.downloads = downloads if downloads is not None else Downloads()
        self.public_key_text = format_public_key(engine.key.public_key)
        self.key_id = engine.key.key_id
        self.public_key_path = self.downloads.put_static("signing.pub", self.public_key_text.encode("ascii"))

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
        count, _head = self.engine.ledger.head(session)
        out = []
        for ev in self.engine.ledger.events(session, start_seq=max(0, count - limit)):
            body = None
            rid = ev.meta.get("receipt_id") if ev.role == "assistant" else None
            if isinstance(rid, str):
                body = self._receipt_body(session, rid)
            out.append(Past(ev, body))
        return out

    def _receipt_body(self, session: str, receipt_id: str) -> dict[str, Any] | None:
        try:
            path = files.receipt_path(self.data_dir, session, receipt_id)
            return parse_receipt(files.read_receipt_bytes(path)).body
        except (OSError, ValueError):  # gone, unreadable or malformed: the answer is shown without stamps
            return None

    # -- chat, memory, search ------------------------------------------------------------
    def turn(self, key: object, message: object, k: object, on_delta: Callable[[str], None] | None = None) -> Turn:
        """Raises SessionKeyError / BadInput (nothing written), TurnError (the turn failed)."""
        session, k_, text = self.check_turn(key, message, k)
        try:
            return self.engine.turn(session, text, k_, on_delta=on_delta)
        except InputError as exc:
            raise BadInput(str(exc)) from None

    def check_turn(self, key: object, message: object, k: object) -> tuple[str, int, str]:
        return self.session(key), parse_k(k), message_or_error(message)

    def remember(self, key: object, text: object) -> Event:
        session = self.session(key)
        try:
            return self.engine.remember(session, message_or_error(text))
        except InputError as exc:
            raise BadInput(str(exc)) from None

    def search(self, key: object, query: object, k: object) -> SearchResponse:
        session = self.session(key)
        k_, q = parse_k(k), check_query(query)
        try:
            return self.engine.index.search(session, q, k_)
        except SearchError as exc:
            raise BadInput(str(exc)) from None

    def restored_receipt(self, key: object, receipt_id: str) -> str | None:
        """A download copy of one of the key's receipts, or None if the file is gone."""
        session = self.session(key)
        try:
            data = files.read_receipt_bytes(files.receipt_path(self.data_dir, session, receipt_id))
        except (OSError, ValueError):
            return None
        return self.downloads.put(f"{receipt_id}.json", data)

    def receipt_download(self, turn: Turn) -> str:
        return self.downloads.put(f"{turn.receipt_id}.json", files.read_receipt_bytes(turn.receipt_path))

    # -- verification --------------------------------------------------------------------
    def verify(self, raw: bytes, key: object = None) -> tuple[Report, str]:
        """Verify receipt bytes; the ledger checks run only for the caller's own session. Raises MalformedReceipt."""
        receipt = parse_receipt(raw)
        own = session_id(key) if is_session_key(key) else None
        data_dir = None
        if own is None or receipt.session != own:
            mode = MODE_OTHER_SESSION
        elif not self.engine.ledger.exists(own):
            mode = MODE_NO_LEDGER
        else:
            mode, data_dir = MODE_LEDGER, self.data_dir
        return verify_bytes(raw, trusted=[self.engine.key.public_key], data_dir=data_dir), mode

    def tamper(self, raw: bytes, target: str, key: object = None) -> tuple[Tampered, Report, str]:
        """Raises MalformedReceipt (not a receipt) or TamperError (nothing to change there)."""
        t = tamper(raw, target)
        report, mode = self.verify(t.raw, key)
        return t, report, mode

    # -- the ledger tab --------------------------------------------------------------------
    def ledger(self, key: object, limit: int = 500) -> LedgerView:
        session = self.session(key)
        led = self.engine.ledger
        if not led.exists(session):
            return LedgerView(session, [], 0, None, None, None)
        report = led.verify(session)
        problem = None
        events: list[Event] = []
        try:
            count, _head = led.head(session)
            events = list(led.events(session, start_seq=max(0, count - limit)))
        except LedgerCorrupted as exc:
            problem, count = str(exc), report.events
        rid, checkpoint = self._latest_checkpoint(session)
        return LedgerView(session, events, count, report, rid, checkpoint, problem)

    def _latest_checkpoint(self, session: str) -> tuple[str | None, dict[str, Any] | None]:
        for path in reversed(files.list_receipts(self.data_dir, session)):
            try:
                body = parse_receipt(files.read_receipt_bytes(path)).body
            except (OSError, ValueError, MalformedReceipt):
                continue
            return body["receipt_id"], body["checkpoint"]
        return None, None


__all__ = ["BadInput", "LedgerView", "Past", "Service", "SessionKeyError"]
