"""`ledger import` leaves the session indexed, so a search answers without indexing it (issue 30). A search that
finds no index builds it once and keeps it, saying so; only a data directory it cannot write gets a temporary one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cli.prog_ledger import main as ledger_main
from cli.prog_retrieval import main as retrieval_main

N = 300


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Events handed to the row planner by any index of either backend (a spy on plan_rows)."""
    import storage.files.retrieval.db as files_db
    import storage.pg.index as pg_index

    seen: list[int] = []
    for module in (files_db, pg_index):
        real = module.plan_rows

        def spy(*, real: Any = real, **kw: Any) -> Any:
            seen.append(len(kw["events"]))
            return real(**kw)

        monkeypatch.setattr(module, "plan_rows", spy)
    return seen


def messages(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"role": "user", "text": f"the wombat fact {i}"}) + "\n" for i in range(N)))
    return src


def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    data = tmp_path / "data"
    assert ledger_main(["import", str(data), "s1", str(messages(tmp_path)), "--create"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return data


def search(data: Path | str, capsys: pytest.CaptureFixture[str], query: str = "wombat fact 7") -> tuple[list[int], str]:
    assert retrieval_main(["search", str(data), "s1", query, "--json"]) == 0
    out, err = capsys.readouterr()
    return [h["seq"] for h in json.loads(out)["results"]], err


def test_an_import_indexes_the_session_and_a_search_then_indexes_nothing(
    tmp_path: Path, planned: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    data = imported(tmp_path, capsys)
    assert sum(planned) == N and (data / "index.sqlite").is_file()
    planned.clear()
    for _ in range(2):
        seqs, err = search(data, capsys)
        assert seqs[0] == 7 and planned == [] and err == ""


def test_an_import_leaves_the_control_state_saved_so_a_fresh_search_never_folds_the_whole_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import control.revocation as revocation

    data = imported(tmp_path, capsys)
    assert (data / "sessions" / "s1" / "control-state.json").is_file()
    revocation._cache.clear()  # as a fresh process finds it
    full: list[str] = []
    real = revocation._derived_in_full

    def spy(fl: Any, session: str, *args: Any) -> Any:
        full.append(session)
        return real(fl, session, *args)

    monkeypatch.setattr(revocation, "_derived_in_full", spy)
    seqs, err = search(data, capsys)
    assert seqs[0] == 7 and err == "" and full == []


def test_a_search_with_no_index_builds_it_once_keeps_it_and_says_so(
    tmp_path: Path, planned: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    data = imported(tmp_path, capsys)
    for p in data.glob("index.sqlite*"):
        p.unlink()
    planned.clear()
    seqs, err = search(data, capsys)
    assert seqs[0] == 7 and sum(planned) == N
    assert "had no index.sqlite" in err and "kept" in err and "temporary" not in err
    assert (data / "index.sqlite").is_file()
    planned.clear()
    seqs, err = search(data, capsys)
    assert seqs[0] == 7 and planned == [] and err == ""


def test_a_read_only_data_directory_is_searched_through_a_temporary_index_that_says_so(
    tmp_path: Path, planned: list[int], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage import admin

    data = imported(tmp_path, capsys)
    for p in data.glob("index.sqlite*"):
        p.unlink()
    if os.geteuid() == 0:  # root writes through any mode bits: say the directory cannot be written, as a read-only mount would
        monkeypatch.setattr(admin, "_writable", lambda _path: False)
    else:
        data.chmod(0o555)
    try:
        for _ in range(2):
            planned.clear()
            seqs, err = search(data, capsys)
            assert seqs[0] == 7 and sum(planned) == N  # every time: nothing is kept
            assert "read-only" in err and "temporary index" in err
            assert not list(data.glob("index.sqlite*"))
    finally:
        data.chmod(0o700)


@pytest.mark.pg
def test_an_import_into_postgresql_indexes_the_session_and_a_search_then_indexes_nothing(
    tmp_path: Path, pg_url: str, planned: list[int], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    data = tmp_path / "data"
    data.mkdir()
    assert ledger_main(["import", pg_url, "s1", str(messages(tmp_path))]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert sum(planned) == N
    planned.clear()
    seqs, err = search(data, capsys)
    assert seqs[0] == 7 and planned == [] and "temporary" not in err
    assert not (data / "index.sqlite").exists()


@pytest.mark.pg
def test_a_migrated_session_is_indexed_in_postgresql_and_a_search_then_indexes_nothing(
    tmp_path: Path, pg_url: str, planned: list[int], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = imported(tmp_path, capsys)
    monkeypatch.setenv("DATABASE_URL", pg_url)
    planned.clear()
    assert ledger_main(["migrate", str(data)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert sum(planned) == N
    planned.clear()
    seqs, err = search(data, capsys)
    assert seqs[0] == 7 and planned == [] and "temporary" not in err


def test_an_index_that_cannot_be_written_leaves_the_import_standing_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    (data / "index.sqlite").mkdir(parents=True)  # something that is not a database where the index goes
    assert ledger_main(["import", str(data), "s1", str(messages(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"imported {N} events into session s1")
    assert err.count("\n") == 1 and err.startswith("warning: session s1: imported but not indexed (") and "Traceback" not in err
    assert ledger_main(["verify", str(data), "s1"]) == 0
