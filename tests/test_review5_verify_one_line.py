"""Reviewer finding (issue 28 item 4 / the project's rule "bad input gets a clear one-line error"): `python -m bundle
verify FILE` on a file whose name holds a newline answers on two lines — the refusal puts the file's name in
unquoted (`{p.name}: not a readable zip …`), where other refusals of the same command print the path as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.prog_bundle import main


def test_bundle_verify_refuses_a_file_named_with_a_newline_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "new\nline.mre.zip"
    path.write_bytes(b"not a zip")
    code = main(["verify", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
