"""The Verify tab's "What this receipt says" panel: every field of the receipt, hostile text inert, rows
without text (format 2's withheld and forgotten memories) shown as such."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ledger.canonical import canonical_json
from receipts.body import parse_receipt
from receipts.show import summarize
from webui import render_receipt as rr
from webui.text import md, short

VECTORS = Path(__file__).parents[1] / "vectors"
RECEIPT = VECTORS / "receipt_v1.json"
HOSTILE = (
    "<img src=x onerror=alert(1)> [click](javascript:alert(1)) ![i](http://e/x.png) | a | b |\n"
    "# heading\n**bold** `code` <script>alert(2)</script> &amp;"
)


def vector_summary() -> dict[str, Any]:
    return summarize(parse_receipt(RECEIPT.read_bytes()).body)


def with_body(tmp_path: Path, edit: Any) -> bytes:
    """The committed receipt with its body edited (the signature no longer matches: the panel only reads)."""
    env = json.loads(RECEIPT.read_text())
    body = json.loads(base64.b64decode(env["payload"]))
    edit(body)
    env["payload"] = base64.b64encode(canonical_json(body)).decode("ascii")
    return json.dumps(env).encode()


def assert_inert(panel: str) -> None:
    """No HTML tag, link, image or table row can come out of what the receipt said."""
    assert not re.search(r"<\s*(img|script|a|iframe)\b", panel, re.I), panel
    assert "](" not in panel.replace("\\]\\(", "") and "![" not in panel.replace("!\\[", "")
    assert not any(line.startswith(("# ", "|")) for line in panel.splitlines()), panel
    assert "**bold**" not in panel and "`code`" not in panel


class TestEveryField:
    def test_the_panel_names_every_field_of_the_receipt(self) -> None:
        s = vector_summary()
        panel = rr.panel_markdown(s)
        assert panel.startswith(f"### {rr.PANEL_TITLE}")
        for value in (s["receipt_id"], s["issued_at"], s["session"]):
            assert md(value) in panel, value
        q, a, cp = s["question"], s["answer"], s["checkpoint"]
        assert f"seq {q['seq']}, {q['role']}, {md(q['ts'])}" in panel and f"“{md(q['text'])}”" in panel
        assert f"({len(s['memories'])} of up to {s['k']})" in panel
        for m in s["memories"]:
            line = next(ln for ln in panel.splitlines() if ln.startswith(f"{m['rank']}. memory\\#{m['rank']} "))
            assert f"seq {m['seq']}, {m['role']}, {md(m['ts'])}" in line
            assert f"digest {md(short(m['digest']))}" in line and f"“{md(m['text'])}”" in line
        assert f"from {md(a['provider'])}/{md(a['model'])}" in panel and f"sha256 {md(short(a['sha256']))}" in panel
        assert f"“{md(a['text'])}”" in panel and f"seq {a['seq']}, {a['role']}" in panel
        assert f"**Checkpoint:** {cp['tree_size']} events, root {md(short(cp['root']))}" in panel
        assert f"signed by {md(cp['key_id'])} at {md(cp['issued_at'])}" in panel

    def test_panel_for_reads_the_file_and_ends_with_a_rule(self) -> None:
        raw = RECEIPT.read_bytes()
        assert rr.panel_for(raw) == rr.panel_markdown(vector_summary()) + "\n\n---\n\n"
        assert rr.panel_for(raw, rr.TAMPERED_TITLE).startswith(f"### {rr.TAMPERED_TITLE}\n")

    def test_an_offline_answer_says_why(self) -> None:
        s = vector_summary()
        s["answer"] = {**s["answer"], "provider": "offline", "model": "stand-in", "fallback_reason": "no key set"}
        assert "from offline/stand\\-in (offline fallback: no key set)" in rr.panel_markdown(s)

    def test_no_memories_says_none(self) -> None:
        s = vector_summary()
        s["memories"] = []
        assert "**Memories handed to the model:** none" in rr.panel_markdown(s)

    def test_long_texts_are_cut(self) -> None:
        s = vector_summary()
        s["memories"][0]["text"] = "word " * 1000
        line = next(ln for ln in rr.panel_markdown(s).splitlines() if ln.startswith("1. memory"))
        assert len(line) < rr.TEXT_LIMIT + 200


class TestHostileText:
    def test_every_visitor_text_is_escaped(self) -> None:
        s = vector_summary()
        s["question"]["text"] = s["answer"]["text"] = HOSTILE
        for m in s["memories"]:
            m["text"] = m["role"] = HOSTILE
        s["answer"]["model"] = s["answer"]["provider"] = HOSTILE
        s["answer"]["fallback_reason"] = HOSTILE
        s["session"] = s["receipt_id"] = s["issued_at"] = HOSTILE
        s["checkpoint"]["key_id"] = s["checkpoint"]["issued_at"] = HOSTILE
        panel = rr.panel_markdown(s)
        assert_inert(panel)
        assert "&lt;img src\\=x onerror\\=alert\\(1\\)&gt;" in panel  # shown as text, not dropped
        assert "&amp;amp;" in panel

    def test_a_hostile_receipt_file_is_inert_end_to_end(self, tmp_path: Path) -> None:
        def edit(body: dict[str, Any]) -> None:
            body["memories"][0]["event"]["text"] = HOSTILE
            body["query"]["event"]["text"] = HOSTILE
            body["response"]["event"]["text"] = HOSTILE

        panel = rr.panel_for(with_body(tmp_path, edit))
        assert panel.startswith(f"### {rr.PANEL_TITLE}")
        assert_inert(panel)
        # one line per part: a newline in a text never starts a new Markdown block
        assert len(panel.splitlines()) == len(rr.panel_for(RECEIPT.read_bytes()).splitlines())


class TestRowsWithoutText:
    """Format 2 (the erasure issue) marks rows withheld or erased, with no text: shown as such, never a crash."""

    @pytest.mark.parametrize(("state", "shown"), [("withheld", "[withheld]"), ("erased", "[forgotten]")])
    def test_a_memory_without_text_is_shown_by_its_state(self, state: str, shown: str) -> None:
        s = vector_summary()
        del s["memories"][0]["text"]
        s["memories"][0]["state"] = state
        s["memories"][1]["text"] = None
        s["memories"][1]["state"] = state
        panel = rr.panel_markdown(s)
        rows = [ln for ln in panel.splitlines() if re.match(r"\d+\. memory", ln)]
        assert len(rows) == 2
        for row in rows:
            assert row.endswith(f"**{shown}**") and f"— {state}" in row and "“" not in row
        assert "seq 0, user" in rows[0]  # everything but the text is still there

    def test_the_committed_redacted_format_2_receipt_shows_its_withheld_memory(self) -> None:
        raw = (VECTORS / "receipt_v2_redacted.json").read_bytes()
        summary = summarize(parse_receipt(raw).body)
        withheld = [m["rank"] for m in summary["memories"] if m["state"] == "withheld"]
        assert withheld  # the vector withholds at least one memory's text
        rows = [ln for ln in rr.panel_for(raw).splitlines() if re.match(r"\d+\. memory", ln)]
        assert len(rows) == len(summary["memories"])
        for m, row in zip(summary["memories"], rows, strict=True):
            if m["state"] == "withheld":
                assert row.endswith("— withheld): **[withheld]**") and "“" not in row
            else:
                assert row.endswith(f"“{md(m['text'])}”")

    def test_a_memory_the_ledger_erased_is_shown_as_forgotten(self) -> None:
        body = parse_receipt((VECTORS / "receipt_v2_redacted.json").read_bytes()).body
        summary = summarize(body, erased={m["event"]["seq"] for m in body["memories"]})
        panel = rr.panel_markdown(summary)
        assert "**[forgotten]**" in panel and "— erased" in panel

    def test_a_cited_row_shows_no_state_tag(self) -> None:
        row = next(ln for ln in rr.panel_markdown(vector_summary()).splitlines() if ln.startswith("1. memory"))
        assert "— cited" not in row and row.endswith("”")

    def test_a_question_or_answer_without_text_does_not_crash(self) -> None:
        s = vector_summary()
        s["question"] = {**s["question"], "text": None, "state": "erased"}
        del s["answer"]["text"]
        panel = rr.panel_markdown(s)
        assert "**The question** (seq 4, user" in panel and "**[forgotten]**" in panel
        assert "**[no text]**" in panel

    def test_missing_fields_show_a_question_mark(self) -> None:
        s = vector_summary()
        m = copy.deepcopy(s["memories"][0])
        for f in ("ts", "role", "digest", "text"):
            m.pop(f)
        m["state"] = "withheld"
        s["memories"] = [m]
        row = next(ln for ln in rr.panel_markdown(s).splitlines() if ln.startswith("1. memory"))
        assert "seq 0, ?, ?" in row and "digest" not in row and row.endswith("**[withheld]**")


class TestNotAReceipt:
    @pytest.mark.parametrize("raw", [b"", b"{}", b"not json", b'{"payload": 1}'])
    def test_a_malformed_upload_gets_no_panel(self, raw: bytes) -> None:
        assert rr.panel_for(raw) == ""

    def test_a_receipt_the_panel_cannot_lay_out_gets_a_note_not_an_error(self, monkeypatch, caplog) -> None:
        def boom(_body: Any) -> Any:
            raise KeyError("text")

        monkeypatch.setattr(rr, "summarize", boom)
        assert rr.panel_for(RECEIPT.read_bytes()) == rr.UNREADABLE
        assert "could not lay out" in caplog.text
