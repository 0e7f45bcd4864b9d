"""Reviewer finding (issue 28 item 3, webui.service.receipt_bytes): the app's receipt download checks for a pending
erasure (control.settle) and then reads the stored receipt without holding the session's turn lock, so a forget that
begins between the two (another request, another replica: its ledger erase committed, its receipts not yet redacted)
is not waited for: the download copies the receipt as it was, with the forgotten word, after the person asked. The
bundle export closes the same gap with control.settle.settled (check, then lock, then check again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui import service as service_module
from webui.service import Service
from webui.sessions import new_session_key, session_id

from .forget_support import marked_session
from .test_erasure_pending_copies import has_marker, stopped_half_way, svc  # noqa: F401 - svc is a fixture


@pytest.mark.parametrize("svc", ["files"], indirect=True)
def test_a_receipt_download_racing_a_forget_holds_no_forgotten_word(svc: tuple[str, Service, str | None], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    _kind, service, _url = svc
    session = session_id(new_session_key())
    mem, turns = marked_session(service.engine, session)
    real = service_module.settle
    fired: list[bool] = []

    def settle_then_a_forget_begins(*a, **k):  # type: ignore[no-untyped-def]
        out = real(*a, **k)
        if not fired:
            fired.append(True)
            stopped_half_way(service, session, [mem])  # the erase committed, the receipts not yet redacted
        return out

    monkeypatch.setattr(service_module, "settle", settle_then_a_forget_begins)
    path = Path(service.receipt_download(turns[-1]))
    assert fired
    assert not has_marker(path.read_bytes())
