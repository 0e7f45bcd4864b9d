"""`search(explain=True)` and `python -m retrieval search --explain`: why each hit ranked where it did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.messages import Message
from retrieval.explain import IDF_FLOOR, idf, marked_words
from storage.files.ledger.store import Ledger
from storage.files.retrieval.db import Index

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = {"kind": "chat", "provider": "offline", "model": "offline", "receipt_id": "rcpt_x"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("explain")
    texts = [f"filler number {i} about the weather" for i in range(30)]
    texts[10] = "I moved to Lisbon last year"
    texts[20] = "my kayak is red"
    msgs = [Message("user", t, {}) for t in texts]
    msgs.append(Message("assistant", "- (seq 10, user) I moved to Lisbon last year", STAND_IN))
    Ledger(tmp).append_many("s1", msgs)
    return tmp


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT
    )


def test_idf_is_fts5s_and_floored() -> None:
    assert idf(100, 1) == pytest.approx(4.1947, rel=1e-3)  # log(99.5 / 1.5)
    assert idf(5, 3) == IDF_FLOOR


def test_marked_words_reads_highlight_marks() -> None:
    assert marked_words("I \x02sailed\x03 and \x02Sailed\x03 and \x02sailed\x03") == ["sailed", "Sailed"]


def test_each_hit_names_its_matched_terms_and_where(data_dir: Path) -> None:
    resp = Index(data_dir).search("s1", "Lisbon kayak", k=5, explain=True)
    top = next(h for h in resp.results if h.seq == 10)
    assert not top.context_only and top.explain is not None
    terms = {t["term"]: t for t in top.explain["terms"]}
    assert terms["lisbon"]["in"] == ["text"] and terms["lisbon"]["idf"] > 1
    assert top.explain["words_in_text"] == ["Lisbon"]
    ctx = [h for h in resp.results if h.context_only]
    assert ctx and all(
        all(t["in"] == ["context"] for t in h.explain["terms"]) for h in ctx if h.explain is not None
    )


def test_the_collapse_parts_multiply_back_to_the_score(data_dir: Path) -> None:
    for h in Index(data_dir).search("s1", "Lisbon weather", k=8, explain=True).results:
        assert h.explain is not None
        c, s = h.explain["collapse"], h.explain["score"]
        assert c["value"] == pytest.approx(c["role_weight"] * (c["novelty_floor"] + (1 - c["novelty_floor"]) * c["novelty"]))
        assert s["value"] == pytest.approx(-h.bm25 * s["factor"] * s["rules_factor"]) and s["value"] == pytest.approx(h.score)


def test_the_echo_rule_is_named_when_it_fires(data_dir: Path) -> None:
    hits = Index(data_dir).search("s1", "Lisbon", k=8, explain=True).results
    echo = [h for h in hits if h.echo]
    assert echo and echo[0].explain is not None
    assert any("echo" in r for r in echo[0].explain["rules"]) and any("stand-in" in r for r in echo[0].explain["rules"])
    assert hits[0].explain is not None and hits[0].explain["rules"] == []


def test_without_explain_hits_carry_none(data_dir: Path) -> None:
    assert all(h.explain is None for h in Index(data_dir).search("s1", "Lisbon", k=3).results)


def test_cli_explain_prints_terms_weights_and_rules(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "Lisbon", "--explain")
    assert r.returncode == 0, r.stderr
    assert "matched: lisbon (idf " in r.stdout and "collapse " in r.stdout and "rule: echo" in r.stdout
    assert "context only" in r.stdout and "own text" in r.stdout


def test_cli_table_shows_a_share_of_the_best_score(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "Lisbon")
    first = r.stdout.splitlines()[1].split()
    assert first[:2] == ["1", "10"] and first[3] == "1.00"
    assert "bm25" not in r.stdout.splitlines()[0]


def test_cli_json_explain_carries_the_explanation(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "Lisbon", "--json", "--explain")
    obj = json.loads(r.stdout)
    assert obj["results"][0]["explain"]["terms"][0]["term"] == "lisbon"
    assert {"context_only", "echo", "relative"} <= set(obj["results"][0])


def test_a_context_only_hit_reads_own_text_alone_0_not_minus_0(data_dir: Path) -> None:
    from retrieval.explain import explain_lines

    resp = Index(data_dir).search("s1", "Lisbon kayak", k=5, explain=True)
    ctx = [h for h in resp.results if h.context_only and h.explain is not None]
    assert ctx
    text = "\n".join(line for h in ctx for line in explain_lines(h.explain))
    assert "own text alone 0;" in text and "-0;" not in text
