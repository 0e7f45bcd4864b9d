"""A session as one readable Markdown file (issue 13's readable export): `render_markdown(data_dir, session)`.

The conversation in order with its times; each answer followed by the memories its receipt cited (seq, role,
short digest, and the state the ledger gives them now: revoked, superseded by seq N, forgotten); erased turns
shown as "[forgotten]"; control records (erasure, revoke/restore, supersession) as one italic line each. Text is
escaped so a message cannot turn into Markdown structure (a heading, a link, an image fetched by a viewer).
On either backend (`stores=`, storage.stores): the same events and receipts give the same text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from bundle.export import no_erasure_pending, session_stores
from bundle.format import BundleError
from control.revocation import current
from control.state import ControlState
from ledger import Event
from ledger.controls import control_of_record
from ledger.event import EventError, validate_session_id
from ledger.supersessions import supersession_of_record
from receipts.body import MalformedReceipt, cited_events, parse_receipt
from receipts.stores import ReceiptBackend
from storage.local import replace_durable

if TYPE_CHECKING:
    from receipts.keys import SigningKey
    from storage.api import LedgerStore
    from storage.stores import Stores

# Every character that can start Markdown structure, backslash-escaped (CommonMark escapes any ASCII punctuation):
# `=` too (a line of "===" under a line makes it a heading) and `&` (an entity such as "&lt;" would show as "<").
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~=&])")
MAX_QUOTE = 4000


def _md(text: str) -> str:
    """Escape Markdown in `text` (every special character), keep line breaks as hard breaks."""
    text = text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE] + " …"
    lines = [_MD_SPECIAL.sub(r"\\\1", line) for line in text.replace("\r", "").split("\n")]
    return "  \n".join(lines)


def _record(ev: Event) -> str | None:
    """One line for a control record (erasure, revoke/restore, supersession), or None for a turn."""
    if ev.role != "system" or ev.erased:
        return None
    if "erasure" in ev.meta:
        seqs = ev.meta["erasure"].get("seqs") if isinstance(ev.meta["erasure"], dict) else None
        return f"erasure record: seqs {seqs} forgotten" if isinstance(seqs, list) else "erasure record"
    d = ev.to_dict()
    ctl = control_of_record(d)
    if ctl is not None:
        return f"control record: {ctl[0]} seq {ctl[1]}"
    s = supersession_of_record(d)
    if s is not None:
        return f"supersession record: seq {s.new_seq} supersedes seq {s.old_seq} ({s.decided_by})"
    return None


def _label(ev: Event) -> str:
    return {"user": "You", "assistant": "Assistant", "system": "System", "imported": "Imported"}.get(ev.role, ev.role)


def _cited(backend: ReceiptBackend, session: str, receipt_id: object) -> list[dict] | None:  # type: ignore[type-arg]
    if not isinstance(receipt_id, str):
        return None
    try:
        raw = backend.read_receipt(session, receipt_id)
        body = parse_receipt(raw).signed_body
    except (MalformedReceipt, ValueError, OSError):
        return None
    return [ev for name, ev in cited_events(body) if name.startswith("memory")]


def _state(ledger: LedgerStore, session: str) -> ControlState:
    """The session's control state now (control.revocation.current: the file ledger's persisted one, or on
    PostgreSQL the one folded from its system rows)."""
    return current(ledger, session)


def render_markdown(
    data_dir: str | os.PathLike[str],
    session: str,
    *,
    stores: Stores | None = None,
    recover_with: Stores | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
    key: SigningKey | None = None,
) -> tuple[str, int]:
    """(the Markdown text, the number of events it covers). `stores`: where the session is kept (default the files
    in `data_dir`). Read under the session's turn lock, with an erasure of it that stopped half way finished first,
    or refused (BundleError), as for export_session (`recover_with`, `copies`, `key`: as there)."""
    data = Path(data_dir)
    try:
        validate_session_id(session)
    except EventError as exc:  # bad input, said as such (the CLI's exit 2), not an unexpected failure
        raise BundleError(str(exc)) from None
    with ExitStack() as stack:
        ledger, backend = session_stores(stack, data, stores, session)
        stack.enter_context(no_erasure_pending(data, session, backend, stores=recover_with or stores, key=key, copies=copies))
        state = _state(ledger, session)
        sup = state.supersessions
        out = [f"# Session {session}", "", "Exported from the Memory Receipt Engine. Each answer lists the memories its receipt cited "
               "(seq, role, first 12 hex digits of the event digest); verify a receipt with `python -m receipts verify`.", ""]
        n = 0
        for ev in ledger.events(session):
            n += 1
            record = _record(ev)
            if record is not None:
                out.append(f"*{ev.ts} · seq {ev.seq} · {record}*")
                out.append("")
                continue
            marks = []
            if ev.seq in state.revoked:
                marks.append("revoked")
            if ev.seq in sup.superseded:
                marks.append(f"superseded by seq {sup.superseded[ev.seq].new_seq}")
            tag = f" ({', '.join(marks)})" if marks else ""
            out.append(f"**{_label(ev)}** · {ev.ts} · seq {ev.seq}{tag}")
            out.append("")
            out.append("[forgotten]" if ev.erased else _md(ev.text) or "*(empty)*")
            out.append("")
            if ev.role == "assistant":
                cited = _cited(backend, session, ev.meta.get("receipt_id"))
                if cited:
                    out.append(f"Memories cited (receipt {_md(str(ev.meta.get('receipt_id')))}):")
                    out.append("")
                    for c in cited:
                        seq = c["seq"]
                        now = []
                        if seq in state.revoked:
                            now.append("revoked since")
                        if seq in sup.superseded:
                            now.append(f"superseded by seq {sup.superseded[seq].new_seq}")
                        if "commit" in c and not c.get("text"):
                            now.append("forgotten")
                        extra = f" — {', '.join(now)}" if now else ""
                        out.append(f"- seq {seq} · {c['role']} · digest {c['digest'][:12]}{extra}")
                    out.append("")
        return "\n".join(out) + "\n", n


def write_markdown(data_dir: str | os.PathLike[str], session: str, out: str | os.PathLike[str], *, stores: Stores | None = None) -> int:
    text, n = render_markdown(data_dir, session, stores=stores)
    replace_durable(Path(out), text.encode("utf-8"))
    return n
