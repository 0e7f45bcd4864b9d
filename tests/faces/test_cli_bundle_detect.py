"""`bundle import --detect-changes` (issue 32, on request): the change detector runs over the imported session's user
statements in order, as `ledger import --detect-changes` does, appending its records to the imported ledger and
signing a checkpoint with DATA_DIR's key — only when that key signed the bundle, so the session's receipts and
checkpoints still verify with the key it carried. Where it cannot sign (another key, no key, PostgreSQL's schema of
imports) it is refused in one line and nothing is imported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bundle import export_session, imported_dir
from cli.main import main as mre_main
from cli.prog_bundle import main as bundle_main
from cli.prog_ledger import main as ledger_main
from control.revocation import current as current_controls
from storage.common.keyfiles import keys_dir
from storage.files.ledger.store import Ledger
from storage.local import load_existing, load_or_create

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


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A data directory whose session `s` was imported without detection (no record), and its bundle."""
    root = tmp_path_factory.mktemp("bundle-detect")
    history = root / "history.jsonl"
    history.write_text("".join(json.dumps({"role": r, "text": t}) + "\n" for r, t in HISTORY), encoding="utf-8")
    data = root / "data"
    data.mkdir()
    load_or_create(data)
    assert ledger_main(["import", str(data), "s", str(history)]) == 0
    assert superseded(data, "s") == {}, "the property these tests rest on: the source has no record"
    bundle = root / "s.mre.zip"
    export_session(data, "s", bundle, key=load_existing(data))
    return data, bundle


def superseded(data: Path, session: str) -> dict[int, int]:
    ledger = Ledger(data)
    try:
        return {old: link.new_seq for old, link in current_controls(ledger, session).supersessions.superseded.items()}
    finally:
        ledger.close()


def _same_key(source: Path, tmp_path: Path) -> Path:
    data = tmp_path / "data2"
    data.mkdir()
    shutil.copytree(keys_dir(source), keys_dir(data))
    return data


def _pub(source: Path) -> str:
    return str(keys_dir(source) / "signing.pub")


def test_a_bundle_this_key_signed_is_imported_and_its_changes_recorded_and_signed(
    source: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, bundle = source
    data = _same_key(src, tmp_path)
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2", "--detect-changes"]) == 0
    assert "1 supersession record appended" in capsys.readouterr().out
    there = imported_dir(data, "s2")
    assert superseded(there, "s") == {0: 4}  # Leeds by Bristol; the brother and the wish untouched
    assert ledger_main(["verify", str(there), "s"]) == 0  # the chain and the checkpoint signed after the records


def test_without_the_flag_the_import_records_nothing(source: tuple[Path, Path], tmp_path: Path) -> None:
    src, bundle = source
    data = _same_key(src, tmp_path)
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2"]) == 0
    assert superseded(imported_dir(data, "s2"), "s") == {}


def test_mre_takes_the_same_flag(source: tuple[Path, Path], tmp_path: Path) -> None:
    src, bundle = source
    data = _same_key(src, tmp_path)
    assert mre_main(["bundle", "import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2", "--detect-changes"]) == 0
    assert superseded(imported_dir(data, "s2"), "s") == {0: 4}


def test_a_bundle_another_key_signed_is_refused_and_nothing_imported(
    source: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, bundle = source
    data = tmp_path / "data2"
    data.mkdir()
    load_or_create(data)  # a key of its own, not the bundle's signer
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--detect-changes"]) == 2
    err = capsys.readouterr().err
    assert "--detect-changes: the bundle is signed by" in err and "nothing was imported" in err and len(err.strip().splitlines()) == 1
    assert not any(p for p in (data / "imported").iterdir() if not p.name.startswith("."))


def test_a_data_directory_without_a_key_is_refused_and_left_as_it_was(
    source: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, bundle = source
    data = tmp_path / "new"
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--detect-changes", "--create"]) == 2
    assert "holds no signing key" in capsys.readouterr().err
    assert not data.exists()


@pytest.mark.pg
def test_on_postgresql_it_is_refused_and_nothing_imported(
    source: tuple[Path, Path], tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from storage.stores import open_stores

    src, bundle = source
    data = _same_key(src, tmp_path)
    monkeypatch.setenv("DATABASE_URL", pg_url)
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2", "--detect-changes"]) == 2
    assert "on PostgreSQL" in capsys.readouterr().err
    stores = open_stores(data, pg_url)
    try:
        assert not stores.ledger.imports().taken("s2")
    finally:
        stores.close()
