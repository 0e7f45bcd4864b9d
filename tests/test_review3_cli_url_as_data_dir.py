"""Reviewer finding (c7dbcb0 "a URL given as a data directory is named without its password"): not in every command.

ledger.cli_support names a postgresql:// URL given where DATA_DIR is expected through storage.redact. Two command
lines check DATA_DIR themselves and echo the raw argument: `python -m retrieval search|rebuild` (retrieval.cli
_data_dir: "<raw>: not a directory") and `python -m control forget|revoke|restore|supersede|history`
(control.__main__: "<raw>: not a data directory …"). With DATABASE_URL unset (or set: retrieval never takes a URL
argument), `python -m retrieval search postgresql://u:PW@host/db S q` prints PW on stderr — into the terminal
scroll-back, a CI log, a support ticket.

Fix: route both through ledger.cli_support's check (existing_data_dir / _not_a_url), or at least redact(raw) in
those two messages; a test over every `python -m` entry point that takes DATA_DIR would keep new ones honest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECRET = "Sekr1tPw"
URL = f"postgresql://u:{SECRET}@127.0.0.1:1/db"


@pytest.mark.parametrize(
    "argv",
    [
        ["retrieval", "search", URL, "alice", "bees"],
        ["retrieval", "rebuild", URL],
        ["control", "forget", URL, "alice", "--all"],
        ["control", "revoke", URL, "alice", "0"],
    ],
    ids=["retrieval-search", "retrieval-rebuild", "control-forget", "control-revoke"],
)
def test_a_url_given_as_data_dir_is_named_without_its_password(tmp_path: Path, argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert SECRET not in out, out
