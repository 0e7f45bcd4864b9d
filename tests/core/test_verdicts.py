"""Verdicts that say what happened: a missing session, an edited ledger's first break, and the exit-code table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli.prog_receipts import main
from receipts.body import parse_receipt
from receipts.keys import format_public_key
from receipts.verify import FAIL, NOT_VERIFIABLE
from storage.files.receipts.api import verify_bytes
from webui.tamper import tamper

from .test_receipts import World, make_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("verdicts") / "data")


@pytest.fixture(scope="module")
def pub(world: World, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trust") / "signing.pub"
    path.write_text(format_public_key(world.key.public_key))
    return path


def edited_copy(world: World, dest: Path, line: int) -> Path:
    """A copy of the data directory whose ledger has `line` (1-based) changed in place."""
    shutil.copytree(world.data, dest)
    log = dest / "sessions" / "alice" / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(b'"text":"', b'"text":"X', 1)
    log.write_bytes(b"".join(lines))
    return dest


class TestAnEditedLedger:
    def test_the_rows_name_the_ledgers_own_first_break_not_a_short_ledger(self, world: World, tmp_path: Path) -> None:
        data = edited_copy(world, tmp_path / "edited", line=3)
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=data)
        rows = {c.name: c for c in report.checks}
        assert report.verdict == "failed"
        for name in ("ledger.chain", "ledger.root", "ledger.consistency", "ledger.response"):
            assert rows[name].status == FAIL and "line 3, seq 2, digest_mismatch" in rows[name].message, rows[name]
        assert "shorter" not in rows["ledger.root"].message
        events = rows["ledger.events"].found or ""
        assert "not in the verified ledger" not in events and "first break (line 3, seq 2, digest_mismatch)" in events

    def test_the_cited_event_on_the_edited_line_is_named_as_the_break(self, world: World, tmp_path: Path) -> None:
        body = parse_receipt(world.raw(0)).body
        rank, mem = next((m["rank"], m) for m in body["memories"] if m["event"]["seq"] >= 1)
        seq = mem["event"]["seq"]
        data = edited_copy(world, tmp_path / "edited", line=seq + 1)
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=data)
        group = next(g for g in report.groups() if g.key == f"memory#{rank}")
        assert group.status == FAIL
        assert f"is where the ledger first breaks (line {seq + 1}, seq {seq}, digest_mismatch)" in group.sentence
        before = {c.name for c in report.cited if c.seq < seq}
        assert before and all(g.status != FAIL for g in report.groups() if g.key in before)  # before the break: intact


class TestAMissingSession:
    def test_the_ledger_rows_are_not_verifiable_with_their_own_message(self, world: World, tmp_path: Path) -> None:
        (tmp_path / "other").mkdir()
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=tmp_path / "other")
        ledger_rows = [c for c in report.checks if c.name.startswith("ledger.")]
        assert {c.status for c in ledger_rows} == {NOT_VERIFIABLE}
        assert all(c.message.startswith("this data directory has no session alice") for c in ledger_rows)
        assert report.verdict == "unverified" and not report.failed


class TestExitCodes:
    """The whole table, through main(argv): 0 verified, 1 failed, 3 unverified, 2 unusable input."""

    def test_the_exit_code_table(self, world: World, pub: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        receipt = str(world.receipts[0])
        forged = tmp_path / "tampered.json"
        forged.write_bytes(tamper(world.raw(0), "memory").raw)
        garbage = tmp_path / "garbage.json"
        garbage.write_text("{not a receipt")
        (tmp_path / "empty").mkdir()
        table = [
            (["verify", receipt, "--trust", str(pub)], 0),
            (["verify", receipt, "--trust", str(pub), "--data", str(world.data)], 0),
            (["verify", str(forged), "--trust", str(pub)], 1),
            (["verify", str(forged)], 1),  # a failed check outranks a missing key
            (["verify", receipt], 3),
            (["verify", receipt, "--data", str(world.data)], 3),  # the data directory's own key is not trusted
            (["verify", receipt, "--trust", str(pub), "--data", str(tmp_path / "empty")], 3),  # no such session there
            (["verify", str(garbage)], 2),
            (["verify", str(tmp_path / "missing.json")], 2),
            (["verify", ""], 2),
            (["verify", str(tmp_path)], 2),
            (["verify", receipt, "--data", ""], 2),
            (["verify", receipt, "--data", str(tmp_path / "nowhere")], 2),
            (["verify", receipt, "--trust", str(garbage)], 2),
        ]
        got = []
        for argv, _want in table:
            capsys.readouterr()
            got.append((argv, main(argv)))
            out, err = capsys.readouterr()
            if got[-1][1] == 2:
                assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert [code for _, code in got] == [want for _, want in table], got

    def test_an_empty_path_and_a_directory_say_what_was_expected(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["verify", ""]) == 2
        assert "an empty path; expected a receipt file" in capsys.readouterr().err
        assert main(["verify", str(tmp_path)]) == 2
        assert f"{tmp_path}: is a directory; expected a receipt file" in capsys.readouterr().err

    def test_help_documents_the_exit_codes(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit):
            main(["verify", "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for part in ("0 VERIFIED", "1 FAILED", "3 UNVERIFIED", "2 unusable input"):
            assert part in text

    def test_text_output_is_grouped_and_rows_lists_every_check(self, world: World, pub: Path, capsys: pytest.CaptureFixture[str]) -> None:
        receipt = str(world.receipts[0])
        assert main(["verify", receipt, "--trust", str(pub)]) == 0
        short = capsys.readouterr().out
        assert "memory 1 (seq" in short and "memory#1.digest" not in short and "--rows lists all" in short
        assert main(["verify", receipt, "--trust", str(pub), "--rows"]) == 0
        full = capsys.readouterr().out
        assert "ok    memory#1.digest:" in full and "verdict: VERIFIED" in full
