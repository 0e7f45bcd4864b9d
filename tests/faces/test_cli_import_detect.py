"""`ledger import --detect-changes` (issue 32): the change detector runs over the imported user statements in order
and records what it decides as a chat turn would; without the flag an import records nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main as mre_main
from cli.prog_ledger import main as ledger_main
from control.revocation import current as current_controls
from storage.files.ledger.store import Ledger

HISTORY = [
    ("user", "I live in Leeds."),
    ("assistant", "Noted."),
    ("user", "My brother lives in Rome."),
    ("user", "I'd love to live in Oslo one day."),
    ("user", "We have just moved to Bristol."),
]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"role": r, "text": t}) + "\n" for r, t in HISTORY), encoding="utf-8")
    return path


def superseded(data: Path, session: str) -> dict[int, int]:
    ledger = Ledger(data)
    try:
        return {old: link.new_seq for old, link in current_controls(ledger, session).supersessions.superseded.items()}
    finally:
        ledger.close()


def test_an_import_with_detect_changes_supersedes_the_old_home_and_nothing_beside_it(
    tmp_path: Path, history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert ledger_main(["import", str(data), "s", str(history), "--detect-changes", "--create"]) == 0
    assert "1 supersession record appended" in capsys.readouterr().out
    assert superseded(data, "s") == {0: 4}
    assert ledger_main(["verify", str(data), "s"]) == 0


def test_an_import_without_the_flag_records_no_supersession(tmp_path: Path, history: Path) -> None:
    data = tmp_path / "data"
    assert ledger_main(["import", str(data), "s", str(history), "--create"]) == 0
    assert superseded(data, "s") == {}


def test_mre_takes_the_same_flag(tmp_path: Path, history: Path) -> None:
    data = tmp_path / "data"
    assert mre_main(["ledger", "import", str(data), "s", str(history), "--detect-changes", "--create"]) == 0
    assert superseded(data, "s") == {0: 4}


@pytest.mark.pg
def test_an_import_into_postgresql_with_detect_changes_records_the_same(
    tmp_path: Path, history: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With $DATABASE_URL set and a DATA_DIR holding the signing key, the detector runs over the rows just imported
    and appends the same record as on files; its checkpoint verifies. A postgresql:// DATA (no folder, no key of its
    own to sign the records with) is refused before anything is imported."""
    from storage.local import load_or_create
    from storage.stores import open_stores

    data = tmp_path / "data"
    data.mkdir()
    load_or_create(data)
    assert ledger_main(["import", pg_url, "u", str(history), "--detect-changes"]) == 2
    assert "nothing was imported" in capsys.readouterr().err
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert ledger_main(["import", str(data), "s", str(history), "--detect-changes"]) == 0
    assert "1 supersession record appended" in capsys.readouterr().out
    stores = open_stores(data, pg_url)
    try:
        assert not stores.ledger.exists("u")
        state = current_controls(stores.ledger, "s")
        assert {old: link.new_seq for old, link in state.supersessions.superseded.items()} == {0: 4}
    finally:
        stores.close()
    assert ledger_main(["verify", str(data), "s"]) == 0
