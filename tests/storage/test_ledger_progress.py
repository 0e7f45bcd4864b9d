"""Progress on the ledger's long commands (issue 15): a tqdm bar on a terminal, nothing when not one.

`import` counts lines; `verify`, `list` and `repair` count the bytes verified, whether one process walks
the file or the parallel verifier's workers do (they report each block they read).
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest

from storage.files.ledger.parallel import verify_file_parallel_erased
from storage.files.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]


class Count:
    def __init__(self) -> None:
        self.n = 0

    def update(self, k: int) -> None:
        self.n += k


def ledger_with(tmp_path: Path, n: int) -> Ledger:
    led = Ledger(tmp_path / "d")
    led.import_jsonl("s", [json.dumps({"role": "user", "text": f"line {i}"}).encode() for i in range(n)])
    return led


def test_verify_counts_every_byte_of_the_file(tmp_path: Path) -> None:
    led = ledger_with(tmp_path, 300)
    progress = Count()
    assert led.verify("s", progress=progress).ok
    assert progress.n == led.log_path("s").stat().st_size


def test_the_parallel_verifier_reports_each_workers_bytes(tmp_path: Path) -> None:
    led = ledger_with(tmp_path, 300)
    counted = Count()
    assert verify_file_parallel_erased(led.log_path("s"), "s", workers=3, min_bytes=1, progress=counted.update) is not None
    assert counted.n == led.log_path("s").stat().st_size


def run_on_a_terminal(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, what the terminal showed on stderr) of `python -m ledger ARGS` on a pseudo-terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECEIPT")}
    proc = subprocess.Popen([sys.executable, "-m", "ledger", *args], stdin=follower, stderr=follower, stdout=subprocess.PIPE, cwd=ROOT, env=env)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.wait()
    os.close(leader)
    return proc.returncode, out, shown.decode(errors="replace")


@pytest.mark.parametrize("command", ["verify", "list", "repair"])
def test_long_commands_show_a_bar_on_a_terminal_and_nothing_otherwise(tmp_path: Path, command: str) -> None:
    ledger_with(tmp_path, 50)
    args: list[Any] = [command, str(tmp_path / "d")] + (["s"] if command == "repair" else [])
    code, _out, shown = run_on_a_terminal(*args)
    assert code == 0 and "verifying: 100%" in shown
    plain = subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True, text=True, cwd=ROOT)
    assert plain.returncode == 0 and plain.stderr == ""


def test_import_shows_lines_on_a_terminal_and_nothing_otherwise(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"role": "user", "text": f"t{i}"}) + "\n" for i in range(40)))
    code, out, shown = run_on_a_terminal("import", str(tmp_path / "a"), "s", str(src), "--create")
    assert code == 0 and "importing: 40.0 lines" in shown and "imported 40 events" in out
    plain = subprocess.run([sys.executable, "-m", "ledger", "import", str(tmp_path / "b"), "s", str(src), "--create"],
                           capture_output=True, text=True, cwd=ROOT, env={k: v for k, v in os.environ.items() if not k.startswith("RECEIPT")})
    assert plain.returncode == 0 and "importing" not in plain.stderr
