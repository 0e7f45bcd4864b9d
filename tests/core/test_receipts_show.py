"""`python -m receipts show`: what a receipt says, golden on the committed vector; bad input; escapes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from cli.prog_receipts import main
from ledger.canonical import canonical_json
from receipts.body import parse_receipt
from receipts.show import neutralise, render_text, shorten, summarize

VECTORS = Path(__file__).parents[1] / "vectors"
RECEIPT = VECTORS / "receipt_v1.json"


def _with_body(tmp_path: Path, edit) -> Path:
    """The committed receipt with its body edited (the signature no longer matches: show does not care)."""
    env = json.loads(RECEIPT.read_text())
    body = json.loads(base64.b64decode(env["payload"]))
    edit(body)
    env["payload"] = base64.b64encode(canonical_json(body)).decode("ascii")
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(env))
    return out


class TestGolden:
    def test_text_matches_committed(self, capsys):
        assert main(["show", str(RECEIPT)]) == 0
        assert capsys.readouterr().out == (VECTORS / "receipt_v1_show.txt").read_text()

    def test_json_matches_committed(self, capsys):
        assert main(["show", str(RECEIPT), "--json"]) == 0
        out = capsys.readouterr().out
        assert out == (VECTORS / "receipt_v1_show.json").read_text()
        s = json.loads(out)
        assert s["verified"] is False
        assert [m["rank"] for m in s["memories"]] == [1, 2]
        assert [m["state"] for m in s["memories"]] == ["cited", "cited"]
        assert s["question"]["text"] == "What is my cat called?"
        assert s["checkpoint"]["tree_size"] == 6

    def test_says_it_verifies_nothing(self):
        text = render_text(summarize(parse_receipt(RECEIPT.read_bytes()).body))
        assert "does not verify anything" in text and "receipts verify" in text
        assert "memory#1  seq 0" in text and "“I adopted a grey cat named Miso”" in text


class TestBadInput:
    @pytest.mark.parametrize("content", [b"", b"{}", b"not json", b'{"payload": 1}'])
    def test_malformed_is_one_line_exit_2(self, tmp_path, capsys, content):
        f = tmp_path / "r.json"
        f.write_bytes(content)
        assert main(["show", str(f)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {f}: malformed receipt") and "\n" not in err

    def test_missing_directory_empty(self, tmp_path, capsys):
        assert main(["show", str(tmp_path / "nope.json")]) == 2
        assert main(["show", str(tmp_path)]) == 2
        assert main(["show", ""]) == 2
        err = capsys.readouterr().err
        assert "No such file" in err and "is a directory" in err and "an empty path" in err
        assert "Traceback" not in err


class TestEscapes:
    def test_neutralise_pairs(self):
        assert neutralise("a\x1b[31mred") == "a\\x1b[31mred"
        assert neutralise("x\ny\tz\\") == "x\\ny\\tz\\\\"
        assert neutralise("\x7f\x9b\u202e") == "\\x7f\\x9b\\u202e"
        assert neutralise("café ✓") == "café ✓"

    def test_memory_text_escape_is_visible_in_text_and_full_in_json(self, tmp_path, capsys):
        evil = "\x1b]0;pwned\x07\x1b[2J" + "A" * 500

        def edit(body):
            body["memories"][0]["event"]["text"] = evil

        f = _with_body(tmp_path, edit)
        assert main(["show", str(f)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in out
        assert "more characters; --json has the full text]" in out
        assert main(["show", str(f), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["memories"][0]["text"] == evil

    def test_shorten_marks_cut(self):
        assert shorten("abc", 5) == "abc"
        assert shorten("abcdefgh", 5) == "abcde… [3 more characters; --json has the full text]"

    def test_fallback_reason_shown(self, tmp_path, capsys):
        def edit(body):
            body["response"]["fallback_reason"] = "no GROQ_API_KEY\x1b[0m"
            body["response"]["provider"] = "offline"

        assert main(["show", str(_with_body(tmp_path, edit))]) == 0
        out = capsys.readouterr().out
        assert "(offline fallback: no GROQ_API_KEY\\x1b[0m)" in out
