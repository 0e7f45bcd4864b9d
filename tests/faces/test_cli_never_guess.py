"""Commands that never guess (issue 31): a folder that is not a data directory, another project file handed to
`receipts verify`, `bundle import` into a missing folder, the forms `python -m chat` really takes, plurals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bundle import export_session
from chat.engine import Engine
from cli.main import main as mre_main
from cli.prog_bundle import main as bundle_main
from cli.prog_ledger import main as ledger_main
from cli.prog_receipts import main as receipts_main
from cli.support import count
from receipts.keys import format_public_key

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATA_DIR", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)


def one_error_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err, err
    return err


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(data dir with one session `alice` of a turn, its exported bundle, its public key file)."""
    data = tmp_path / "data"
    engine = Engine(data)
    engine.turn("alice", "I adopted a grey cat named Miso", k=4)
    pub = tmp_path / "pub.json"
    pub.write_text(format_public_key(engine.key.public_key))
    engine.index.close()
    out = tmp_path / "alice.mre.zip"
    export_session(data, "alice", out)
    return data, out, pub


class TestNotADataDirectory:
    @pytest.mark.parametrize("what", ["empty", "keys"])
    def test_ledger_verify_of_a_folder_with_no_sessions_is_exit_2_asking_if_it_is_a_data_directory(
        self, what: str, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        folder = {"empty": tmp_path / "empty", "keys": tmp_path / "data.keys"}[what]
        folder.mkdir(exist_ok=True)
        assert ledger_main(["verify", str(folder)]) == 2
        err = one_error_line(capsys.readouterr().err)
        assert err == f"error: {folder}: no sessions here: is this a data directory?\n"
        assert capsys.readouterr().out == ""

    def test_a_data_directory_still_verifies_and_says_one_session_in_the_singular(
        self, session: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        data, _, _ = session
        assert ledger_main(["verify", str(data)]) == 0
        out = capsys.readouterr().out
        assert out.endswith("1 of 1 session verified\n") and " 2 events, head" in out


class TestOtherFilesHandedToReceiptsVerify:
    def test_a_bundle_is_named_with_the_command_that_checks_it(
        self, session: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, bundle, _ = session
        assert receipts_main(["verify", str(bundle)]) == 2
        err = one_error_line(capsys.readouterr().err)
        assert "a session bundle" in err and "python -m bundle verify FILE" in err and "UTF-8" not in err

    def test_a_checkpoint_is_named_with_the_command_that_checks_it(
        self, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data, _, _ = session
        assert receipts_main(["checkpoint", str(data), "alice"]) == 0
        kept = tmp_path / "kept.json"
        kept.write_text(capsys.readouterr().out)
        assert receipts_main(["verify", str(kept)]) == 2
        err = one_error_line(capsys.readouterr().err)
        assert "a signed checkpoint" in err and "python -m ledger verify DATA_DIR SESSION --since FILE" in err
        assert ledger_main(["verify", str(data), "alice", "--since", str(kept)]) in (0, 3)  # the command it names takes it

    def test_anything_else_is_still_a_malformed_receipt(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        junk = tmp_path / "junk.json"
        junk.write_text('{"hello": 1}')
        assert receipts_main(["verify", str(junk)]) == 2
        assert "malformed receipt" in one_error_line(capsys.readouterr().err)


class TestBundleImportCreate:
    def test_import_into_a_missing_folder_is_refused_naming_it_and_the_flag(
        self, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, bundle, pub = session
        target = tmp_path / "dta"
        assert bundle_main(["import", str(target), str(bundle), "--trust", str(pub)]) == 2
        err = one_error_line(capsys.readouterr().err)
        assert str(target) in err and "--create" in err
        assert not target.exists()

    def test_import_with_create_makes_the_folder_and_imports(
        self, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, bundle, pub = session
        target = tmp_path / "a" / "b"
        assert bundle_main(["import", str(target), str(bundle), "--trust", str(pub), "--create"]) == 0
        out, err = capsys.readouterr()
        assert f"created data directory {target}" in err and "imported session alice" in out
        assert mre_main(["bundle", "import", str(tmp_path / "c"), str(bundle), "--trust", str(pub), "--create"]) == 0

    def test_a_refused_import_with_create_leaves_no_folder_behind(
        self, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, bundle, _ = session
        target = tmp_path / "new" / "data"
        assert bundle_main(["import", str(target), str(bundle), "--create"]) == 3  # no --trust: unverified, refused
        assert "refused" in capsys.readouterr().err
        assert not (tmp_path / "new").exists()

    def test_export_counts_in_the_singular_and_plural(self, session: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data, _, _ = session
        assert bundle_main(["export", str(data), "alice", str(tmp_path / "again.zip")]) == 0
        assert "2 events, 1 receipt, 0 certificates" in capsys.readouterr().out


def test_count_says_one_noun_in_the_singular() -> None:
    assert [count(0, "receipt"), count(1, "receipt"), count(2, "receipt"), count(1234, "event")] == [
        "0 receipts", "1 receipt", "2 receipts", "1,234 events"]
    assert count(1, "memory", "memories") == "1 memory" and count(3, "memory", "memories") == "3 memories"


def test_chat_help_shows_the_three_forms_it_reads() -> None:
    """`propose` and `answer` are first words `python -m chat` dispatches on: the usage shows each form with its own
    arguments, and each step's own --help answers."""
    r = subprocess.run([sys.executable, "-m", "chat", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0
    usage = r.stdout.split("\n\n")[0].splitlines()
    assert usage == [
        "usage: python -m chat [-h] [-k K] [--create] DATA_DIR SESSION MESSAGE",
        "       python -m chat propose [-h] [-k K] DATA_DIR SESSION MESSAGE",
        "       python -m chat answer [-h] [--session SESSION] [--cancel] DATA_DIR TOKEN [ID ...]",
    ]
    for step in ("propose", "answer"):
        r = subprocess.run([sys.executable, "-m", "chat", step, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"usage: python -m chat {step} ")
