"""Errors on the command line are one plain line: no internal class name, no traceback, and no
BrokenPipeError when the output is piped into `head` (issue 18, §3)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli.prog_bundle import main as bundle_main
from cli.prog_chat import main as chat_main
from cli.prog_ledger import main as ledger_main
from cli.prog_receipts import main as receipts_main
from cli.prog_retrieval import main as retrieval_main
from cli.support import EXIT_PIPE, run
from receipts.keys import format_public_key
from storage.files.ledger.store import Ledger
from storage.files.receipts import files as receipt_files

ROOT = Path(__file__).resolve().parents[2]
# what leaks from an exception: `IndexUnavailable: …`, `found FileNotFoundError`, `internal: OSError`
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception|Unavailable|Corrupted|Refused)\b|Traceback|Errno")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A data directory with one turn, its receipt, the public key and a kept checkpoint."""
    root = tmp_path_factory.mktemp("errors")
    old = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    try:
        engine = Engine(root / "data")
        engine.remember("alice", "a red kayak for Sunday")
        turn = engine.turn("alice", "what boat do I have?", k=2)
        engine.index.close()
    finally:
        os.environ.update({k: v for k, v in old.items() if v is not None})
    (root / "pub.json").write_text(format_public_key(engine.key.public_key))
    (root / "queries.txt").write_text("kayak\n" * 400)
    return {"root": root, "data": root / "data", "receipt": turn.receipt_path, "pub": root / "pub.json"}


def one_plain_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert not CLASS_NAME.search(err), err
    return err


MAINS = {"ledger": ledger_main, "receipts": receipts_main, "retrieval": retrieval_main, "chat": chat_main}
BAD = [
    (["receipts", "verify", "{receipt}", "--trust", "{root}/missing.json"], "no such file or directory"),
    (["receipts", "verify", "{receipt}", "--trust", "{root}"], "found a directory"),
    (["receipts", "verify", "{receipt}", "--trust", ""], "an empty path"),
    (["receipts", "verify", ""], "an empty path; expected a receipt file"),
    (["receipts", "verify", "{root}"], "is a directory; expected a receipt file"),
    (["receipts", "show", "{root}"], "is a directory; expected a receipt file"),
    (["receipts", "verify", "{root}/nothing.json"], "No such file or directory"),
    (["ledger", "verify", "{data}", "alice", "--since", "{root}"], "is a directory; expected a checkpoint file"),
    (["ledger", "verify", "{data}", "alice", "--since", ""], "an empty path; expected a checkpoint file"),
    (["ledger", "verify", "{data}", "alice", "--since", "{root}/kept-missing.json"], "No such file or directory"),
    (["ledger", "import", "{data}", "alice", "{root}"], "a directory; expected a JSONL file"),
    (["ledger", "verify", "{data}", "no/such"], "session"),
    (["retrieval", "search", "{data}", "alice", "--queries", "{root}"], "expected a text file"),
    (["retrieval", "search", "{data}", "alice", "x", "-k", "99"], "k"),
    # a blank path is not the current folder (Path("") is "."): `rebuild ""` built ./index.sqlite and exited 0
    (["retrieval", "rebuild", ""], "DATA_DIR: an empty path; expected a data directory"),
    (["retrieval", "search", "", "alice", "kayak"], "DATA_DIR: an empty path; expected a data directory"),
    (["retrieval", "search", "{data}", "alice", "--queries", ""], "--queries: an empty path; expected a text file"),
    (["ledger", "import", "{data}", "alice", ""], "import file: an empty path; expected a JSONL file"),
    (["ledger", "import", "", "alice", "{root}/queries.txt"], "DATA_DIR: an empty path; expected a data directory"),
    (["ledger", "verify", "", "alice"], "DATA_DIR: an empty path; expected a data directory"),
    (["receipts", "verify", "{receipt}", "--data", ""], "--data: an empty path; expected a data directory"),
    (["chat", "", "alice", "hello?"], "DATA_DIR: an empty path; expected a data directory"),
]


@pytest.mark.parametrize(("argv", "says"), BAD, ids=[" ".join(a[:3]) + f" [{i}]" for i, (a, _) in enumerate(BAD)])
def test_a_bad_argument_is_one_plain_line_saying_what_was_expected(
    made: dict[str, Path],
    argv: list[str],
    says: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty path must not mean the current folder: nothing appears in it
    cli, *rest = argv
    code = MAINS[cli]([a.format(**{k: str(v) for k, v in made.items()}) for a in rest])
    assert code == 2
    assert says in one_plain_line(capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == []


def test_an_unusable_index_is_named_by_its_path_not_by_its_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    Ledger(data).append("alice", "user", "hello there")
    (data / "index.sqlite").mkdir()  # something that is not a database where the index goes
    assert chat_main([str(data), "alice", "hello?"]) == 2
    assert "index.sqlite" in one_plain_line(capsys.readouterr().err)
    assert retrieval_main(["search", str(data), "alice", "hello"]) == 2
    assert "index.sqlite" in one_plain_line(capsys.readouterr().err)


def test_an_unexpected_failure_is_one_line_without_its_class(capsys: pytest.CaptureFixture[str]) -> None:
    def boom(_args: argparse.Namespace) -> int:
        raise RuntimeError("the disk said no")

    assert run(boom, argparse.Namespace()) == 1
    assert one_plain_line(capsys.readouterr().err) == "error: unexpected failure: the disk said no\n"


@pytest.mark.parametrize(
    ("where", "says"),
    [("model", "the turn failed; no answer was given"), ("receipt", "the receipt could not be written; the answer was withheld")],
)
def test_a_turn_that_fails_unexpectedly_is_a_fixed_sentence_without_the_class_or_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], where: str, says: str
) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise ValueError("bad thing: my red kayak")

    if where == "model":
        monkeypatch.setattr(LLM, "complete", boom)
    else:
        monkeypatch.setattr(receipt_files, "write_receipt", boom)
    assert chat_main([str(tmp_path / "data"), "alice", "what boat do I have?", "--create"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {says}"]


FAILING_TURN = """
import sys
from cli.prog_chat import main
from chat.llm import LLM
def boom(*_a, **_k):
    raise ValueError("bad thing: my red kayak")
LLM.complete = boom
raise SystemExit(main([sys.argv[1], "alice", "what boat do I have?", "--create"]))
"""


def test_a_failed_turn_prints_no_log_record_with_a_class_on_the_terminal(tmp_path: Path) -> None:
    """In a real process (pytest's own log capture hides Python's last-resort handler): stderr holds the CLI's
    notes and its one error line, not the engine's log record naming the exception's class."""
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    r = subprocess.run([sys.executable, "-c", FAILING_TURN, str(tmp_path / "data")], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "error: the turn failed; no answer was given" in r.stderr
    assert "ValueError" not in r.stderr and "kayak" not in r.stderr and "failed (" not in r.stderr, r.stderr


def test_an_os_error_names_the_path_and_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    def denied(_args: argparse.Namespace) -> int:
        raise PermissionError(13, "Permission denied", "/srv/data/sessions")

    assert run(denied, argparse.Namespace()) == 2
    assert one_plain_line(capsys.readouterr().err) == "error: /srv/data/sessions: Permission denied\n"


# --- a reader that goes away: `python -m ... | head` ---------------------------------------------


def spawn_into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """Run a CLI whose stdout is a pipe nobody reads any more (its read end closed before it starts)."""
    r, w = os.pipe()
    os.close(r)
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    try:
        return subprocess.run([sys.executable, "-m", *args], stdout=w, stderr=subprocess.PIPE, cwd=ROOT, env=env, timeout=120)
    finally:
        os.close(w)


PIPED = [
    ["ledger", "verify", "{data}", "--json"],
    ["receipts", "show", "{receipt}", "--json"],
    ["receipts", "pubkey", "{data}"],
    ["retrieval", "search", "{data}", "alice", "kayak"],
    ["chat", "{data}", "alice", "what colour is my kayak?"],
]


@pytest.mark.parametrize("argv", PIPED, ids=[" ".join(a[:2]) for a in PIPED])
def test_output_into_a_closed_pipe_ends_quietly_with_status_141(made: dict[str, Path], argv: list[str]) -> None:
    proc = spawn_into_closed_pipe([a.format(**{k: str(v) for k, v in made.items()}) for a in argv])
    assert proc.stderr.decode() in ("", "key id: " + json.loads(made["pub"].read_text())["key_id"] + "\n")
    assert proc.returncode == EXIT_PIPE


def test_a_reader_that_stops_after_the_first_line_leaves_no_traceback(made: dict[str, Path]) -> None:
    """`python -m retrieval search ... --queries FILE | head -1`: well over a pipe buffer of output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "retrieval", "search", str(made["data"]), "alice", "--queries", str(made["root"] / "queries.txt")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == EXIT_PIPE
    assert json.loads(first)["query"] == "kayak"
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_a_data_directory_below_a_file_is_refused_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("not a folder")
    for create in ([], ["--create"]):
        assert chat_main([str(tmp_path / "notes.txt" / "data"), "alice", "hi", *create]) == 2
        assert f"{tmp_path / 'notes.txt'} is not a directory" in one_plain_line(capsys.readouterr().err)


def test_control_forget_into_a_closed_pipe_ends_quietly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)
    engine = Engine(tmp_path / "data")
    engine.remember("alice", "a secret to forget")
    engine.index.close()
    proc = spawn_into_closed_pipe(["control", "forget", str(tmp_path / "data"), "alice", "0"])
    assert proc.stderr.decode() == "" and proc.returncode == EXIT_PIPE
    assert Ledger(tmp_path / "data").read_events("alice", [0])[0].erased


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_verify_one_line.py):
# Reviewer finding (issue 28 item 4 / the project's rule "bad input gets a clear one-line error"): `python -m bundle
# verify FILE` on a file whose name holds a newline answers on two lines — the refusal puts the file's name in
# unquoted (`{p.name}: not a readable zip …`), where other refusals of the same command print the path as given.
# --------------------------------------------------------------------------------------------------------------------


def test_bundle_verify_refuses_a_file_named_with_a_newline_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "new\nline.mre.zip"
    path.write_bytes(b"not a zip")
    code = bundle_main(["verify", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1, err
