"""Reviewer finding (`mre db export DATABASE_URL SESSION`): the database URL is a positional argument, and one holding a
password is taken (a connection is tried) instead of refused as `mre --database-url` and `mre db migrate` refuse
it: the password sits on a command line every user of the machine can read (ps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main as mre_main


def test_mre_db_export_refuses_a_url_holding_a_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "s3cr3t-Pa55"
    url = f"postgresql://mre:{secret}@/x?host={tmp_path}/nosock&port=1"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    from cli import prog_ledger_pg as pg_cli

    tried: list[str] = []

    def opened(url: str):  # type: ignore[no-untyped-def]
        tried.append(url)
        raise OSError("connection tried (no server here)")

    monkeypatch.setattr(pg_cli, "opened", opened)
    code = mre_main(["db", "export", url, "alice"])
    out, err = capsys.readouterr()
    assert secret not in out + err
    assert tried == [], "a connection was tried with the password from the command line"
    assert code == 2 and "password" in err and "DATABASE_URL" in err, (code, err)
