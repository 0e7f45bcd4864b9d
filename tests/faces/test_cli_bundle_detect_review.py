"""Review of `bundle import --detect-changes` (issue 32): a detector failing half way leaves the import standing,
says so in one line, and every record it appended before failing is signed by a checkpoint with DATA_DIR's key
(the bundle's signer), none left after the last checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import chat.engine
import chat.supersede
from bundle import imported_dir
from cli.prog_bundle import main as bundle_main
from storage.files.ledger.store import Ledger
from storage.local import load_existing
from storage.stores import file_stores

from .test_cli_bundle_detect import _offline, _pub, _same_key, source, superseded

__all__ = ["_offline", "source"]  # fixtures


def test_a_detector_failing_half_way_leaves_the_import_standing_and_its_records_signed(
    source: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src, bundle = source
    data = _same_key(src, tmp_path)
    real, calls = chat.supersede.record_supersessions, []

    def fails_after_the_last_record(*a: Any, **kw: Any) -> Any:
        got = real(*a, **kw)
        calls.append(got)
        if len(calls) == 4:  # the fourth user statement (Bristol) has just recorded Leeds' supersession
            raise RuntimeError("disk went away")
        return got

    monkeypatch.setattr(chat.engine, "record_supersessions", fails_after_the_last_record)
    assert bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2", "--detect-changes"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "disk went away" in err and "the import stands as s2" in err, err
    there = imported_dir(data, "s2")
    assert superseded(there, "s") == {0: 4}
    ledger = Ledger(there)
    try:
        size = ledger.head("s")[0]
    finally:
        ledger.close()
    stores = file_stores(there)
    try:
        cp = stores.receipts.latest_checkpoint("s")
    finally:
        stores.close()
    key = load_existing(data)
    assert cp is not None and key is not None
    assert cp["body"]["tree_size"] == size == 6, cp["body"]  # the record (seq 5) is under a signed checkpoint
    assert key.key_id in str(cp)


def test_an_unreadable_signing_key_is_refused_in_one_line_and_nothing_imported(
    source: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from storage.common.keyfiles import keys_dir

    src, bundle = source
    data = _same_key(src, tmp_path)
    for f in keys_dir(data).iterdir():
        if f.is_file() and not f.name.endswith(".pub"):
            f.write_text("not a key", encoding="utf-8")
    code = bundle_main(["import", str(data), str(bundle), "--trust", _pub(src), "--as", "s2", "--detect-changes"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not (data / "imported").exists() or not any(p for p in (data / "imported").iterdir() if not p.name.startswith("."))
