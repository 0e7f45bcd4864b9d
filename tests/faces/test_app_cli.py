"""`python app.py` as a command: --help, and refusals that are one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import app
from webui.config import ConfigError, open_engine, parse_args

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_the_options_and_the_environment() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    for word in (
        "--data",
        "--host",
        "--port",
        "--retention-hours",
        "DATA_DIR",
        "GRADIO_SERVER_NAME",
        "GRADIO_SERVER_PORT",
        "RETENTION_HOURS",
        "GROQ_API_KEY",
    ):
        assert word in out


@pytest.mark.parametrize("argv", [["--port", "nope"], ["--retention-hours", "forever"], ["--concurrency", "0"]])
def test_a_bad_option_is_one_line_and_exit_status_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert app.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


# --- the data directory: made as `python -m chat` makes one (issue 18) ----------------------------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)


def everything_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_data_directory_whose_parent_is_missing_is_refused_and_nothing_is_created(
    tmp_path: Path, offline: None
) -> None:
    cfg = parse_args(["--data", str(tmp_path / "typo" / "deep" / "data")], {})
    with pytest.raises(ConfigError, match=r"no such data directory.*nothing was created.*--create"):
        open_engine(cfg)
    assert everything_under(tmp_path) == []


@pytest.mark.parametrize("blank", ["", " "])
def test_an_empty_data_path_is_refused_not_taken_for_the_current_folder(blank: str) -> None:
    with pytest.raises(ConfigError, match=r"^--data: an empty path; expected a data directory"):
        parse_args(["--data", blank], {})


def test_the_app_refuses_a_mistyped_data_directory_in_one_line_before_starting(tmp_path: Path, offline: None) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "--data", str(tmp_path / "typo" / "data"), "--port", "7999"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --data ") and proc.stderr.count("\n") == 1 and "--create" in proc.stderr
    assert everything_under(tmp_path) == []


def test_create_makes_the_whole_path_and_a_key_and_says_both(
    tmp_path: Path, offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "new" / "deep" / "data"
    cfg = parse_args(["--data", str(data), "--create"], {})
    assert cfg.create
    engine = open_engine(cfg)
    engine.index.close()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"created data directory {data}"
    assert err[1].startswith(f"created a new receipt signing key {engine.key.key_id} in {tmp_path / 'new' / 'deep' / 'data.keys'}")
    assert data.is_dir() and len(err) == 2


def test_the_default_data_directory_starts_on_a_fresh_machine_and_says_what_it_made(
    tmp_path: Path, offline: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = parse_args([], {})  # docs/guides/app.md: `python app.py`, DATA_DIR unset: ./data
    assert cfg.data_dir == Path("data") and not cfg.create
    open_engine(cfg).index.close()
    err = capsys.readouterr().err
    assert "created data directory data\n" in err and "created a new receipt signing key" in err
    assert (tmp_path / "data").is_dir() and (tmp_path / "data.keys" / "signing.key").is_file()


def test_a_missing_data_directory_other_than_the_default_needs_create(
    tmp_path: Path, offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python app.py --data ./dta` (meant ./data): one line naming it and --create; nothing made, no key."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        open_engine(parse_args(["--data", "./dta"], {}))
    assert str(caught.value) == "--data dta: no such data directory; nothing was created (pass --create to start a new one there)"
    assert everything_under(tmp_path) == []
    open_engine(parse_args(["--data", "./mine"], {"DATA_DIR": "mine"})).index.close()  # $DATA_DIR is the default
    open_engine(parse_args(["--data", "./dta", "--create"], {})).index.close()
    assert (tmp_path / "mine").is_dir() and (tmp_path / "dta").is_dir()


def test_an_existing_data_directory_and_key_open_without_a_word(
    tmp_path: Path, offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    cfg = parse_args(["--data", str(tmp_path / "data")], {})
    first = open_engine(cfg)
    first.index.close()
    capsys.readouterr()
    again = open_engine(cfg)
    again.index.close()
    assert capsys.readouterr().err == "" and again.key.key_id == first.key.key_id


def test_a_start_up_failure_is_a_fixed_sentence_not_the_class_or_its_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(_cfg: object, **_kw: object) -> None:
        raise PermissionError(13, "the words of a memory", "/srv/data/sessions/x")

    monkeypatch.setattr(app, "start", fails)
    assert app.main([]) == 1
    line = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert line == [f"error: {app.START_FAILED}"]
    assert "PermissionError" not in line[0] and "words of a memory" not in line[0]
