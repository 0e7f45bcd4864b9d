"""Reviewer finding (same family as test_review3_cli_url_as_data_dir): `python app.py --data postgresql://u:PW@…`
prints PW.

The app's --data check (config) does not recognise a URL: Path() folds the '//' and the message names the path,
password included ("--data postgresql:/u:PW@host:1/db: no such data directory, and the folder it would go in
(postgresql:/u:PW@host:1) does not exist either"). Someone who puts DATABASE_URL's value into --data by mistake
gets the password on stderr (and in a service's journal).

Fix: in the app's --data check, refuse an is_database_url() value first with the redacted URL (as
ledger.cli_support._not_a_url does: "a URL, not a data directory; set DATABASE_URL").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "Sekr1tPw"


def test_the_app_names_a_url_given_as_data_without_its_password(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), "--data", f"postgresql://u:{SECRET}@127.0.0.1:1/db"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert SECRET not in out, out
