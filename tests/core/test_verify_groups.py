"""The check table grouped by what it is about (receipts.groups), one numbering, and the tamper demo's words."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from receipts.body import parse_receipt
from receipts.groups import group_of, group_report
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS, Report
from storage.files.receipts.api import verify_bytes
from webui.render_verify import groups_markdown, tamper_markdown, verdict_markdown
from webui.tamper import tamper

from .test_receipts import World, make_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(tmp_path_factory.mktemp("groups") / "data")


def memory_seqs(raw: bytes) -> list[int]:
    return [m["event"]["seq"] for m in parse_receipt(raw).body["memories"]]


class TestGrouping:
    def test_every_row_is_in_exactly_one_group_in_reading_order(self, world: World) -> None:
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=world.data)
        groups = group_report(report)
        k = len(memory_seqs(world.raw(0)))
        assert [g.key for g in groups] == ["signature", "receipt", "question", *[f"memory#{i}" for i in range(1, k + 1)], "answer", "ledger"]
        names = [n for g in groups for n in g.checks]
        assert sorted(names) == sorted(c.name for c in report.checks) and len(names) == len(set(names))

    def test_a_verified_receipt_reads_as_sentences_naming_rank_and_seq(self, world: World) -> None:
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=world.data)
        by_key = {g.key: g for g in group_report(report)}
        assert all(g.status == PASS for g in by_key.values())
        for rank, seq in enumerate(memory_seqs(world.raw(0)), start=1):
            assert by_key[f"memory#{rank}"].sentence == f"memory {rank} (seq {seq}) is exactly what is in the signed ledger"
        assert world.key.key_id in by_key["signature"].sentence
        assert "extends the signed checkpoint" in by_key["ledger"].sentence

    def test_offline_memories_pass_but_say_they_were_not_compared_with_a_ledger(self, world: World) -> None:
        by_key = {g.key: g for g in group_report(verify_bytes(world.raw(0), trusted=world.trusted))}
        assert by_key["memory#1"].status == PASS and "not compared with a ledger here" in by_key["memory#1"].sentence
        assert by_key["ledger"].status == NOT_VERIFIABLE and "--data" in by_key["ledger"].sentence
        assert by_key["answer"].status == PASS  # ledger.response sits in the ledger group, not the answer's

    def test_a_changed_memory_fails_its_own_group_in_plain_words(self, world: World) -> None:
        t = tamper(world.raw(0), "memory")
        report = verify_bytes(t.raw, trusted=world.trusted)
        by_key = {g.key: g for g in group_report(report)}
        seq = memory_seqs(world.raw(0))[0]
        assert by_key["memory#1"].status == FAIL
        assert by_key["memory#1"].sentence.startswith(f"memory 1 (seq {seq}) does not verify: its text or fields were changed")
        assert by_key["signature"].status == FAIL  # the payload changed under the signature
        assert all(by_key[k].status == PASS for k in by_key if k.startswith("memory#") and k != "memory#1")

    def test_group_of_names_each_row_by_its_subject(self) -> None:
        cases = {
            "envelope.signature": "signature",
            "checkpoint.signature": "signature",
            "receipt.structure": "receipt",
            "prompt.hash": "receipt",
            "query.inclusion": "question",
            "memory#12.chain_link": "memory#12",
            "response.hash": "answer",
            "checkpoint.chain_head": "answer",
            "ledger.response": "ledger",
            "ledger.chain": "ledger",
        }
        assert {name: group_of(name) for name in cases} == cases

    def test_the_json_report_carries_the_groups(self, world: World) -> None:
        d = verify_bytes(world.raw(1), trusted=world.trusted).to_dict()
        assert [g["group"] for g in d["groups"]][:3] == ["signature", "receipt", "question"]
        assert all(set(g) == {"group", "title", "status", "sentence", "checks"} for g in d["groups"])
        json.dumps(d)  # plain data


class TestOneNumbering:
    def test_check_names_and_where_paths_name_memories_by_rank(self, world: World) -> None:
        raw = world.raw(0)
        body = json.loads(json.dumps(parse_receipt(raw).body))
        report = verify_bytes(tamper(raw, "memory").raw, trusted=world.trusted)
        digest = next(c for c in report.checks if c.name == "memory#1.digest")
        assert digest.status == FAIL and digest.where == "memory#1.event.digest"
        assert not any("memory[" in c.name or "memories[" in (c.where or "") for c in report.checks)
        assert body["memories"][0]["rank"] == 1

    def test_the_tamper_demo_says_what_it_changed_the_way_the_checks_name_it(self, world: World) -> None:
        t = tamper(world.raw(0), "memory")
        assert t.where.startswith("memory#1.event.text, character ")
        report = verify_bytes(t.raw, trusted=world.trusted)
        text = tamper_markdown(t, report, "other_session")
        assert "memory#1.event.text" in text and "`memory#1.digest`" in text and "memories[0]" not in text

    def test_format_md_writes_a_body_path_into_memories_only_as_memory_n_minus_one(self) -> None:
        """docs/FORMAT.md: a memory is memory#N; where it must write a body path, `memories[N−1]` says how they
        map (`memories[i]` left the reader to guess), and the one 0-based example names memory#1 beside it."""
        doc = (Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md").read_text(encoding="utf-8")
        paths = re.findall(r"memories\[([^\]]*)\]", doc)
        assert paths and set(paths) <= {"N−1", "0"}, paths
        assert "`memories[0].event.v` is memory#1's" in doc


class TestVerifyTab:
    def test_the_verdict_holds_the_grouped_summary_with_untrusted_text_escaped(self, world: World) -> None:
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=world.data)
        text = verdict_markdown(report, "ledger")
        table = groups_markdown(report)
        assert table in text and table.count("\n") == len(group_report(report)) + 1
        assert "| ✅ pass | **memory 1 \\(seq" in table  # md() escapes the parenthesis

    def test_a_report_with_a_markdown_breaking_message_stays_one_table_row_per_group(self, world: World) -> None:
        report = verify_bytes(world.raw(0), trusted=world.trusted)
        evil = report.checks[0].__class__("prompt.hash", FAIL, "x | ![img](http://e) \n next", "a", "b")
        bad = Report(report.receipt_id, report.session, report.mode, (*report.checks[:-1], evil), report.cited)
        table = groups_markdown(bad)
        assert table.count("\n") == len(group_report(bad)) + 1 and "![" not in table


def test_a_receipt_with_no_memories_has_no_memory_groups(tmp_path: Path) -> None:
    w = make_world(tmp_path / "data")
    raw = w.engine.turn("fresh", "hello there", k=8).receipt_path.read_bytes()
    assert memory_seqs(raw) == []
    keys = [g.key for g in group_report(verify_bytes(raw, trusted=w.trusted))]
    assert keys == ["signature", "receipt", "question", "answer", "ledger"]
