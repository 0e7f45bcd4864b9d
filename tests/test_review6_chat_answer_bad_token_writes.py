"""Reviewer finding (`python -m chat answer` / `mre chat answer`): a malformed turn token is refused with exit 2
("unusable input, nothing changed") only after the command has created a receipt signing key in DATA_DIR.keys — for
any folder given as DATA_DIR, even one that is no data directory (`/tmp` made `/tmp.keys`). The first run prints the
key's creation line above the error, so the twins' stderr also differ by which ran first."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import prog_chat as chat_cli
from cli.main import main as mre_main


@pytest.mark.parametrize("spelling", ["python -m", "mre"])
def test_a_malformed_token_changes_nothing(spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "not-a-data-dir"
    folder.mkdir()
    argv = ["answer", str(folder), "not-a-token"]
    code = chat_cli.main(argv) if spelling == "python -m" else mre_main(["chat", *argv])
    err = capsys.readouterr().err
    assert code == 2 and "token" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-data-dir"], "a signing key folder was created"
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("cancel", [False, True])
def test_a_well_formed_token_not_issued_here_changes_nothing(cancel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same for a token of the right shape whose proposal is not in DATA_DIR (chat.consent.check_issued runs
    before the signing key is loaded or created): exit 2, nothing written, for an answer and for --cancel."""
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "not-a-data-dir"
    folder.mkdir()
    token = f"ct1.{'a' * 32}.4102444800.{'b' * 64}"
    code = chat_cli.main(["answer", str(folder), token, *(["--cancel"] if cancel else [])])
    err = capsys.readouterr().err
    assert code == 2 and "token: unknown" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-data-dir"], "a signing key folder was created"
    assert list(folder.iterdir()) == []
