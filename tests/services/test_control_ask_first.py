"""`python -m control ask-first DATA_DIR SESSION [on|off]` (issue 28, item 7): ask me first turned on or off for a
session from the command line, in the same settings store the app uses (control.settings), on both backends
(files: DATA_DIR/sessions/<session>/settings.json; PostgreSQL with DATABASE_URL: the session_settings row)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control.settings import ConsentRequired, get_consent, refuse_direct_turn, set_consent
from storage.stores import Stores, file_stores, pg_stores

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


@dataclass
class Deployment:
    kind: str
    data: Path
    stores: Stores
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "control", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120)


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def dep(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    data = tmp_path / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    if request.param == "files":
        stores = file_stores(data)
    else:
        url = request.getfixturevalue("pg_url")
        stores = pg_stores(url, data, pool_size=2)
        env["DATABASE_URL"] = url
    Engine(data, llm=LLM(api_key=""), stores=stores).remember(S, "I park on the third floor")
    try:
        yield Deployment(request.param, data, stores, env)
    finally:
        stores.close()


def test_ask_first_turns_ask_me_first_on_and_off_in_the_store_the_app_reads(dep: Deployment) -> None:
    shown = dep.run("ask-first", str(dep.data), S)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"session {S}: ask me first is off"
    on = dep.run("ask-first", str(dep.data), S, "on")
    assert on.returncode == 0, on.stderr
    assert "ask me first is on" in on.stdout
    assert get_consent(dep.stores, S) is True
    with pytest.raises(ConsentRequired):
        refuse_direct_turn(dep.stores, S)  # what the one-step turn (web chat, MCP ask, python -m chat) calls first
    assert dep.run("ask-first", str(dep.data), S).stdout.strip() == f"session {S}: ask me first is on"
    off = dep.run("ask-first", str(dep.data), S, "off")
    assert off.returncode == 0, off.stderr
    assert get_consent(dep.stores, S) is False
    refuse_direct_turn(dep.stores, S)


def test_ask_first_shows_what_the_app_set(dep: Deployment) -> None:
    set_consent(dep.stores, S, True)
    shown = dep.run("ask-first", str(dep.data), S)
    assert shown.returncode == 0 and shown.stdout.strip() == f"session {S}: ask me first is on"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("nobody",), "unknown"),
        (("nobody", "on"), "unknown"),
        (("../etc", "on"), "session id"),
        ((S, "maybe"), "on or off"),
    ],
)
def test_ask_first_refuses_bad_input_in_one_line_and_changes_nothing(dep: Deployment, args: tuple[str, ...], words: str) -> None:
    done = dep.run("ask-first", str(dep.data), *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert get_consent(dep.stores, S) is False
    if dep.kind == "files":
        assert not (dep.data / "sessions" / "nobody").exists()


def test_ask_first_refuses_a_folder_that_is_not_a_data_directory(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run([sys.executable, "-m", "control", "ask-first", str(tmp_path), S, "on"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "not a data directory" in done.stderr
