"""Reviewer finding (`mre` vs its `python -m` twins): argparse and click read arguments that start with '-'
differently, so the twins disagree in exit status and effect on the same input:

* a negative-number positional (a query "-1", a chat message "-5", a seq "-3"): argparse takes it as the positional
  (the search runs, the turn is answered), mre refuses it as an unknown option (exit 2);
* an option value that starts with '-' (`--reason -typo`): argparse refuses it (exit 2, nothing changed), mre takes it
  as the value and revokes;
* `-k=5`: argparse reads 5, mre refuses '=5'.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from chat.engine import Engine
from cli import prog_chat as chat_cli
from cli import prog_control as control_cli
from cli import prog_retrieval as retrieval_cli
from cli.main import main as mre_main

ENV = ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    engine = Engine(tmp_path / "a")
    engine.remember("alice", "the thermostat was set to -1 degrees by mistake")
    engine.index.close()
    return tmp_path / "a"


def _copy(data: Path) -> Path:
    b = data.parent / "b"
    shutil.copytree(data, b)
    keys = Path(f"{data}.keys")
    if keys.exists():
        shutil.copytree(keys, Path(f"{b}.keys"))
    return b


def _code(main, argv: list[str]) -> int:  # type: ignore[no-untyped-def]
    try:
        return int(main(argv))
    except SystemExit as exc:  # argparse's own exit
        return int(exc.code or 0)


@pytest.mark.parametrize("which", ["search", "chat"])
def test_a_negative_number_positional_is_read_the_same(data: Path, which: str, capsys: pytest.CaptureFixture[str]) -> None:
    b = _copy(data)
    if which == "search":
        py = _code(retrieval_cli.main, ["search", str(data), "alice", "-1"])
        twin = mre_main(["search", "query", str(b), "alice", "-1"])
    else:
        py = _code(chat_cli.main, [str(data), "alice", "-5"])
        twin = mre_main(["chat", "turn", str(b), "alice", "-5"])
    assert py == 0
    assert twin == py


def test_a_reason_starting_with_a_dash_is_read_the_same(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = _copy(data)
    py = _code(control_cli.main, ["revoke", str(data), "alice", "0", "--reason", "-typo"])
    twin = mre_main(["control", "revoke", str(b), "alice", "0", "--reason", "-typo"])
    assert (py, twin) == (py, py)


def test_k_equals_is_read_the_same(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    py = _code(retrieval_cli.main, ["search", str(data), "alice", "thermostat", "-k=5"])
    twin = mre_main(["search", "query", str(data), "alice", "thermostat", "-k=5"])
    assert py == 0
    assert twin == py
