"""Data directories on the command line: reading creates nothing; writing creates a missing data directory only with
--create (the whole path) or when it is the default ./data ($DATA_DIR), and says so; anything else is one line naming
the path and the flag, exit 2 (issue 18, §3; issue 31: a typo never starts a second history)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chat.engine import Engine
from cli import prog_chat as chat_cli
from cli.main import main as mre_main
from cli.prog_chat import main as chat_main
from cli.prog_ledger import main as ledger_main
from cli.prog_receipts import main as receipts_main
from cli.prog_retrieval import main as retrieval_main
from receipts.keys import format_public_key
from storage.common.keyfiles import load_or_create
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as checkpoints_files


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATA_DIR"):
        monkeypatch.delenv(name, raising=False)


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root (root's siblings too: keys live beside DATA_DIR) with its size and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns)
    return out


def one_error_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err and "Error:" not in err, err
    return err


def import_file(tmp_path: Path, n: int = 2, name: str = "in.jsonl") -> Path:
    src = tmp_path / name
    src.write_text("".join(json.dumps({"role": "user", "text": f"fact {i}"}) + "\n" for i in range(n)))
    return src


@pytest.fixture
def populated(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(root, data dir with a session, a key, a checkpoint and a receipt — but no index.sqlite and no tail
    record — receipt path)."""
    root = tmp_path / "root"
    root.mkdir()
    data = root / "data"
    engine = Engine(data)
    engine.remember("alice", "I adopted a grey cat named Miso")
    turn = engine.turn("alice", "What is my cat called?", k=4)
    engine.index.close()
    for p in data.glob("index.sqlite*"):
        p.unlink()
    (data / "sessions" / "alice" / "tail.json").unlink()  # a reading command must not write it back
    (root / "pub.json").write_text(format_public_key(engine.key.public_key))
    return root, data, turn.receipt_path


READS = [
    ["ledger", "verify", "{d}"],
    ["ledger", "verify", "{d}", "alice"],
    ["ledger", "verify", "{d}", "alice", "--since", "{root}/kept.json", "--trust", "{root}/pub.json"],
    ["receipts", "pubkey", "{d}"],
    ["receipts", "checkpoint", "{d}", "alice"],
    ["receipts", "verify", "{receipt}", "--data", "{d}", "--trust", "{root}/pub.json"],
    ["receipts", "show", "{receipt}"],
    ["retrieval", "search", "{d}", "alice", "cat"],
    ["ledger", "list", "{d}"],
    ["ledger", "list", "{d}", "--json"],
]
MAINS = {"ledger": ledger_main, "receipts": receipts_main, "retrieval": retrieval_main, "chat": chat_main}


def call(argv: list[str], **fmt: str) -> int:
    cli, *rest = argv
    return MAINS[cli]([a.format(**fmt) for a in rest])


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a[:2]) + (" " + a[3] if len(a) > 3 else "") for a in READS])
def test_a_reading_command_creates_nothing_in_or_beside_the_data_directory(
    populated: tuple[Path, Path, Path], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, data, receipt = populated
    cp = checkpoints_files.latest(data, "alice")
    (root / "kept.json").write_text(json.dumps(cp))
    before = tree(root)
    code = call(argv, d=str(data), root=str(root), receipt=str(receipt))
    assert code == 0, capsys.readouterr().err
    after = tree(root)
    if argv[:2] == ["retrieval", "search"]:  # the one thing a search keeps: the index it had to build (issue 30)
        made = {p for p in set(after) - set(before)}
        assert made and all(p.startswith("data/index.sqlite") for p in made), made
        after = {p: v for p, v in after.items() if p in before}
        before = {p: v for p, v in before.items() if p != "data"}  # the folder's mtime: it gained the index
        after.pop("data")
    else:
        assert not (data / "index.sqlite").exists()
    assert after == before


@pytest.mark.parametrize("missing", ["missing", "missing/deep/dir"])
@pytest.mark.parametrize("argv", READS[:6] + READS[7:], ids=lambda a: " ".join(a[:2]) if isinstance(a, list) else a)
def test_a_reading_command_on_a_missing_data_directory_is_one_line_and_creates_nothing(
    populated: tuple[Path, Path, Path], argv: list[str], missing: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root, data, receipt = populated
    (root / "kept.json").write_text(json.dumps(checkpoints_files.latest(data, "alice")))
    before = tree(root)
    code = call(argv, d=str(root / missing), root=str(root), receipt=str(receipt))
    assert code == 2
    one_error_line(capsys.readouterr().err)
    assert tree(root) == before


def test_import_into_a_missing_folder_without_create_is_one_line_naming_it_and_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = import_file(tmp_path)
    before = tree(tmp_path)
    assert ledger_main(["import", str(tmp_path / "new"), "s1", str(src)]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert str(tmp_path / "new") in err and "--create" in err and "nothing was created" in err
    assert tree(tmp_path) == before


def test_import_with_create_makes_the_folder_once_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = import_file(tmp_path)
    assert ledger_main(["import", str(tmp_path / "new"), "s1", str(src), "--create"]) == 0
    out, err = capsys.readouterr()
    assert err == f"created data directory {tmp_path / 'new'}\n"
    assert out.startswith("imported 2 events into session s1")
    assert Ledger(tmp_path / "new").verify("s1").events == 2
    assert ledger_main(["import", str(tmp_path / "new"), "s2", str(src)]) == 0  # it exists now: no flag needed
    assert "created" not in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["data", "./data", "{cwd}/data"])
def test_the_default_data_directory_is_made_without_the_flag(
    spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    src = import_file(tmp_path)
    assert ledger_main(["import", spelling.format(cwd=tmp_path), "s1", str(src)]) == 0
    assert "created data directory" in capsys.readouterr().err
    assert Ledger(tmp_path / "data").verify("s1").events == 2


def test_data_dir_in_the_environment_is_the_default_and_data_is_then_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "mine"))
    src = import_file(tmp_path)
    assert ledger_main(["import", "data", "s1", str(src)]) == 2
    assert "--create" in one_error_line(capsys.readouterr().err)
    assert ledger_main(["import", str(tmp_path / "mine"), "s1", str(src)]) == 0
    assert not (tmp_path / "data").exists() and (tmp_path / "mine").is_dir()


def test_a_typo_of_the_default_starts_no_second_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m chat ./dta alice hello` (meant ./data): no folder, no signing key, one line naming the path and --create."""
    monkeypatch.chdir(tmp_path)
    assert chat_main(["./data", "alice", "I moved to Lisbon"]) == 0
    capsys.readouterr()
    before = tree(tmp_path)
    assert chat_main(["./dta", "alice", "hello"]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert err == "error: ./dta: no such data directory; nothing was created (pass --create to start a new one there)\n"
    assert tree(tmp_path) == before


def test_import_into_a_path_whose_parent_is_missing_is_refused_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = import_file(tmp_path)
    before = tree(tmp_path)
    assert ledger_main(["import", str(tmp_path / "nonexistent" / "deep" / "dir"), "s1", str(src)]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "does not exist" in err and "--create" in err and "nothing was created" in err
    assert tree(tmp_path) == before


def test_import_with_create_makes_the_whole_path_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = import_file(tmp_path)
    target = tmp_path / "a" / "b" / "data"
    assert ledger_main(["import", str(target), "s1", str(src), "--create"]) == 0
    assert capsys.readouterr().err == f"created data directory {target}\n"
    assert Ledger(target).verify("s1").ok
    assert all((p.stat().st_mode & 0o777) == 0o700 for p in (tmp_path / "a", tmp_path / "a" / "b", target))


def test_a_refused_import_creates_no_data_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('{"role": "user", "text": "ok"}\n{"role": "user"}\n')
    before = tree(tmp_path)
    assert ledger_main(["import", str(tmp_path / "new"), "s1", str(src), "--create"]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "line 2" in err and "nothing was imported" in err and "created" not in err
    assert tree(tmp_path) == before


def test_import_into_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = import_file(tmp_path)
    assert ledger_main(["import", str(src), "s1", str(src)]) == 2
    assert "not a directory" in one_error_line(capsys.readouterr().err)


def test_chat_into_a_new_folder_says_it_created_the_folder_and_a_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "fresh"
    assert chat_main([str(data), "alice", "I moved to Lisbon", "--create"]) == 0
    out, err = capsys.readouterr()
    key = load_or_create(data)
    lines = err.splitlines()
    assert lines[0] == f"created data directory {data}"
    assert lines[1].startswith(f"created a new receipt signing key {key.key_id} in {tmp_path / 'fresh.keys'}")
    assert "receipt: " in out
    assert chat_main([str(data), "alice", "Where do I live?"]) == 0
    assert "created" not in capsys.readouterr().err


def test_chat_into_an_existing_folder_without_a_key_says_it_made_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    Ledger(data).append("alice", "user", "imported earlier")
    assert chat_main([str(data), "alice", "hello"]) == 0
    err = capsys.readouterr().err
    assert "created data directory" not in err and "created a new receipt signing key" in err


def test_chat_into_a_path_whose_parent_is_missing_is_refused_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp_path)
    assert chat_main([str(tmp_path / "typo" / "data"), "alice", "hello"]) == 2
    err = one_error_line(capsys.readouterr().err)
    assert "does not exist" in err and "--create" in err
    assert tree(tmp_path) == before


def test_chat_with_create_makes_the_whole_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "x" / "y"
    assert chat_main([str(data), "alice", "hello", "--create"]) == 0
    assert f"created data directory {data}" in capsys.readouterr().err
    assert Ledger(data).verify("alice").ok


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review6_chat_answer_bad_token_writes.py):
# Reviewer finding (`python -m chat answer` / `mre chat answer`): a malformed turn token is refused with exit 2
# ("unusable input, nothing changed") only after the command has created a receipt signing key in DATA_DIR.keys — for
# any folder given as DATA_DIR, even one that is no data directory (`/tmp` made `/tmp.keys`). The first run prints the
# key's creation line above the error, so the twins' stderr also differ by which ran first.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["python -m", "mre"])
def test_a_malformed_token_changes_nothing(spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "not-a-data-dir"
    folder.mkdir()
    argv = ["answer", str(folder), "not-a-token"]
    code = chat_cli.main(argv) if spelling == "python -m" else mre_main(["chat", *argv])
    err = capsys.readouterr().err
    assert code == 2 and "token" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-data-dir"], "a signing key folder was created"
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("cancel", [False, True])
def test_a_well_formed_token_not_issued_here_changes_nothing(cancel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same for a token of the right shape whose proposal is not in DATA_DIR (chat.consent.check_issued runs
    before the signing key is loaded or created): exit 2, nothing written, for an answer and for --cancel."""
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "not-a-data-dir"
    folder.mkdir()
    token = f"ct1.{'a' * 32}.4102444800.{'b' * 64}"
    code = chat_cli.main(["answer", str(folder), token, *(["--cancel"] if cancel else [])])
    err = capsys.readouterr().err
    assert code == 2 and "token: unknown" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-data-dir"], "a signing key folder was created"
    assert list(folder.iterdir()) == []
