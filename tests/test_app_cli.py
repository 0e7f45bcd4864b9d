"""`python app.py` as a command: --help, and refusals that are one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import app

ROOT = Path(__file__).resolve().parents[1]


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
