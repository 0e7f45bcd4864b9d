"""The app's Verify tab and history check on PostgreSQL: a receipt, an erasure certificate and the visitor's kept
checkpoint are checked against the database's ledger (its rows audited from a private copy), not against DATA_DIR,
which holds no ledger there; a row changed in the database fails them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts import checkpoints as C
from storage.stores import pg_stores
from webui import history as H
from webui.render_verify import MODE_LEDGER
from webui.service import Service
from webui.sessions import new_session_key, session_id

pytestmark = pytest.mark.pg


@pytest.fixture
def service(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Service, str]]:
    monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "verifier-cache"))
    data = tmp_path / "data"
    svc = Service(Engine(data, llm=LLM(api_key=""), stores=pg_stores(pg_url, data)))
    try:
        yield svc, pg_url
    finally:
        svc.engine.close()


def change_row(url: str, session: str, seq: int, old: str, new: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        n = conn.execute(
            "UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), %s, %s), 'UTF8') WHERE session = %s AND seq = %s",
            (old, new, session, seq),
        ).rowcount
    assert n == 1


def test_a_receipt_verifies_against_the_database_and_fails_once_a_cited_row_changes(service: tuple[Service, str]) -> None:
    svc, url = service
    key = new_session_key()
    svc.turn(key, "my locker code is 4711", 8)
    turn = svc.turn(key, "what is my locker code?", 8)
    raw = svc.engine.backend.read_receipt(session_id(key), turn.receipt_id)
    report, mode = svc.verify(raw, key)
    assert mode == MODE_LEDGER and report.verdict == "verified", [c for c in report.checks if c.status != "pass"]
    change_row(url, session_id(key), 0, "4711", "4712")
    report, _ = svc.verify(raw, key)
    assert report.verdict == "failed"


def test_the_kept_checkpoint_is_proved_against_the_database_and_a_rewrite_is_caught(service: tuple[Service, str]) -> None:
    svc, url = service
    key = new_session_key()
    svc.turn(key, "my cat is called Miso", 8)
    first = svc.history_check(key, None)
    assert first.outcome == H.FIRST and first.keep is not None, first.to_dict()
    kept = C.checkpoint_file_bytes(first.keep).decode()
    svc.turn(key, "what is my cat called?", 8)
    check = svc.history_check(key, kept)
    assert check.outcome == H.EXTENDS and check.report is not None and check.report.verdict == "verified", check.to_dict()
    change_row(url, session_id(key), 0, "Miso", "Mosi")
    assert svc.history_check(key, kept).outcome == H.CHANGED


def test_an_erasure_certificate_verifies_against_the_database(service: tuple[Service, str]) -> None:
    from control.forget import forget

    svc, _url = service
    key = new_session_key()
    svc.turn(key, "my bank pin is 9931", 8)
    done = forget(svc.data_dir, session_id(key), [0], stores=svc.engine.stores)
    _cert, report, mode = svc.verify_certificate(done.certificate_path.read_bytes(), key)
    assert mode == MODE_LEDGER and report.verdict == "verified", [c for c in report.checks if c.status != "pass"]
