"""webui.downloads: a process's download folder is its own while it lives (run-<pid>-*, flock on .lock), and the
folder of a process that is gone — killed mid-erasure, its copies still quoting a forgotten memory — is overwritten
and removed by the next Downloads or sweep; a live process's folder is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from webui.downloads import LOCK, Downloads

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"words of a memory forgotten since"

CHILD = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from webui.downloads import Downloads
d = Downloads(sys.argv[2])
print(d.put("rcpt_x.json", sys.argv[3].encode()), flush=True)
if sys.argv[4] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()  # "wait": alive until the test closes stdin, then exits without close()
"""


def _child(base: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ROOT), str(base), SECRET.decode(), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, "the child wrote no download"
    return proc, Path(line)


def _run_folder(copy: Path) -> Path:
    return copy.parent.parent  # <base>/run-<pid>-*/<token>/<name>


def _killed(base: Path) -> Path:
    proc, copy = _child(base, "kill")
    assert proc.wait(timeout=60) == -9
    return copy


def test_a_killed_process_s_folder_is_overwritten_then_removed_when_the_next_one_starts(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    copy = _killed(base)
    witness = tmp_path / "witness"
    os.link(copy, witness)  # a second name for the same bytes: it shows what was written before the unlink
    d = Downloads(base)
    try:
        assert not _run_folder(copy).exists()
        assert witness.read_bytes() == bytes(len(SECRET)), "the copy must be overwritten before it is unlinked"
        assert [p.name for p in base.iterdir()] == [d.root.name]
    finally:
        d.close()


def test_a_live_process_s_folder_is_never_touched_and_goes_once_it_exits(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    proc, copy = _child(base, "wait")
    try:
        d = Downloads(base)
        assert d.sweep(max_age=0, now=time.time() + 3600) == 0
        assert copy.read_bytes() == SECRET and (_run_folder(copy) / LOCK).exists()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
    try:
        assert d.sweep() == 1  # it exited without close(): its lock went with it
        assert not _run_folder(copy).exists()
    finally:
        d.close()


def test_another_downloads_of_this_process_is_live_too(tmp_path: Path) -> None:
    first = Downloads(tmp_path)
    path = Path(first.put("rcpt_x.json", SECRET))
    second = Downloads(tmp_path)
    try:
        assert path.read_bytes() == SECRET
        del first  # dropped without close(): the process still holds its lock
        assert Downloads(tmp_path).sweep_dead() == 0 and path.exists()
    finally:
        second.close()


def test_the_periodic_sweep_removes_a_folder_of_a_process_killed_meanwhile(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    d = Downloads(base)
    try:
        copy = _killed(base)
        assert _run_folder(copy).exists()
        assert d.sweep() == 1 and not _run_folder(copy).exists() and d.root.exists()
    finally:
        d.close()


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_a_folder_killed_before_its_lock_file_goes_by_its_pid_and_symlinks_are_not_followed(tmp_path: Path) -> None:
    base = tmp_path / "downloads"
    outside = tmp_path / "outside.txt"
    outside.write_bytes(SECRET)
    dead = base / f"run-{_dead_pid()}-abcd1234"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "rcpt_x.json").write_bytes(SECRET)
    (dead / "link").symlink_to(outside)
    (dead / "dirlink").symlink_to(tmp_path)
    d = Downloads(base)
    try:
        assert not dead.exists()
        assert outside.read_bytes() == SECRET and tmp_path.is_dir()
    finally:
        d.close()


@pytest.mark.parametrize("name", ["run-abcd1234", "run-notapid-x", "other-1-x"])
def test_a_folder_without_a_pid_is_left_alone(tmp_path: Path, name: str) -> None:
    """Written before folders carried a pid (or not ours): nothing says its process is gone."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "rcpt_x.json").write_bytes(SECRET)
    d = Downloads(tmp_path)
    try:
        assert (folder / "rcpt_x.json").read_bytes() == SECRET
    finally:
        d.close()


def test_close_removes_the_folder_and_lets_go_of_its_lock(tmp_path: Path) -> None:
    d = Downloads(tmp_path)
    d.put("rcpt_x.json", SECRET)
    d.close()
    assert not d.root.exists() and list(tmp_path.iterdir()) == []
    d.close()  # twice is harmless
