"""`python -m receipts show` on format-2 receipts: golden output on the committed vectors.

receipt_v2.json discloses every cited event; receipt_v2_redacted.json is the same receipt with
memory#2 (seq 2) withheld; receipt_v2_ledger_erased.jsonl is the vector's ledger after that memory
was erased, whose erased seqs make the same row read "erased" (show never reads a ledger itself:
the caller passes them, as the Verify tab does).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.prog_receipts import main
from receipts.body import parse_receipt
from receipts.show import render_text, summarize

VECTORS = Path(__file__).parents[1] / "vectors"
FULL = VECTORS / "receipt_v2.json"
REDACTED = VECTORS / "receipt_v2_redacted.json"
ERASED_LEDGER = VECTORS / "receipt_v2_ledger_erased.jsonl"
WITHHELD_WORDS = "I moved to Lisbon in March"  # memory#2's text, disclosed only in receipt_v2.json


def _erased_seqs() -> list[int]:
    """Seqs whose line in the committed erased ledger is in erased form (a `commit`, no `text`)."""
    lines = [json.loads(line) for line in ERASED_LEDGER.read_text().splitlines()]
    return [line["seq"] for line in lines if "commit" in line and "text" not in line]


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["show", *args]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


class TestGoldenText:
    @pytest.mark.parametrize("name", ["receipt_v2", "receipt_v2_redacted"])
    def test_text_matches_committed(self, capsys: pytest.CaptureFixture[str], name: str) -> None:
        out = _show(capsys, str(VECTORS / f"{name}.json"))
        assert out == (VECTORS / f"{name}_show.txt").read_text()

    def test_full_copy_reads_like_format_1_but_says_format_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        out = _show(capsys, str(FULL))
        v1 = (VECTORS / "receipt_v1_show.txt").read_text()
        assert out.splitlines()[0].endswith("(format 2), issued 2026-01-02T03:04:05.000000Z")
        assert out.splitlines()[1:] == v1.splitlines()[1:]
        assert f"“{WITHHELD_WORDS}”" in out

    def test_withheld_row_says_withheld_and_prints_no_text(self, capsys: pytest.CaptureFixture[str]) -> None:
        out = _show(capsys, str(REDACTED))
        lines = out.splitlines()
        at = lines.index("  memory#2  seq 2, user, 2026-01-02T03:04:05.000000Z, digest 3a4d27d676d8")
        assert lines[at + 1].strip().startswith("[withheld from this copy:")
        assert "421c3b7ab41b8635…" in lines[at + 1]
        assert "Lisbon" not in out and "March" not in out
        assert "“I adopted a grey cat named Miso”" in out  # memory#1 is still disclosed


class TestGoldenJson:
    @pytest.mark.parametrize("name", ["receipt_v2", "receipt_v2_redacted"])
    def test_json_matches_committed(self, capsys: pytest.CaptureFixture[str], name: str) -> None:
        out = _show(capsys, str(VECTORS / f"{name}.json"), "--json")
        assert out == (VECTORS / f"{name}_show.json").read_text()

    def test_full_copy_every_row_cited_with_its_commit(self, capsys: pytest.CaptureFixture[str]) -> None:
        s = json.loads(_show(capsys, str(FULL), "--json"))
        assert s["format"] == 2 and s["verified"] is False
        rows = [s["question"], *s["memories"], s["answer"]]
        assert [r["state"] for r in rows] == ["cited"] * 4
        assert all(isinstance(r["text"], str) and len(r["commit"]) == 64 for r in rows)
        assert s["memories"][1]["text"] == WITHHELD_WORDS

    def test_withheld_row_has_null_text_and_the_same_commit(self, capsys: pytest.CaptureFixture[str]) -> None:
        full = json.loads(_show(capsys, str(FULL), "--json"))
        out = _show(capsys, str(REDACTED), "--json")
        s = json.loads(out)
        assert [m["state"] for m in s["memories"]] == ["cited", "withheld"]
        withheld = s["memories"][1]
        assert withheld["text"] is None and withheld["seq"] == 2 and withheld["rank"] == 2
        assert withheld["commit"] == full["memories"][1]["commit"]
        assert withheld["digest"] == full["memories"][1]["digest"]
        assert s["question"]["state"] == s["answer"]["state"] == "cited"
        assert "Lisbon" not in out


class TestGoldenErased:
    """The redacted copy summarised with the erased ledger's seqs: the withheld row reads "erased"."""

    def _summary(self) -> dict:
        erased = _erased_seqs()
        assert erased == [2]
        return summarize(parse_receipt(REDACTED.read_bytes()).body, erased=erased)

    def test_text_matches_committed(self) -> None:
        text = render_text(self._summary()) + "\n"
        assert text == (VECTORS / "receipt_v2_erased_show.txt").read_text()
        assert "[erased from the ledger:" in text and "withheld" not in text and "Lisbon" not in text

    def test_json_matches_committed(self) -> None:
        s = self._summary()
        assert json.dumps(s, indent=2, ensure_ascii=True) + "\n" == (VECTORS / "receipt_v2_erased_show.json").read_text()
        assert [m["state"] for m in s["memories"]] == ["cited", "erased"] and s["memories"][1]["text"] is None

    def test_erased_seqs_do_not_touch_a_disclosed_row(self) -> None:
        s = summarize(parse_receipt(FULL.read_bytes()).body, erased=_erased_seqs())
        assert [m["state"] for m in s["memories"]] == ["cited", "cited"]
        assert s["memories"][1]["text"] == WITHHELD_WORDS
