"""`ledger.states` runs for every format-2 receipt checked with the ledger, and reads the auditor's list of
supersession records, never the ledger lines between a cited memory and the answer (docs/FORMAT.md §20).

A receipt without `states` is checked as claiming every cited memory live: dropping the member from a receipt
whose session superseded a cited memory, and signing again, no longer slips past the ledger check."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import ledger.chunks
from chat.engine import Engine
from control.forget import forget
from control.supersession import supersede
from receipts.keys import parse_public_key
from receipts.prompt import TEMPLATE_V1, build_messages, prompt_hash
from receipts.states import check_ledger_states
from receipts.supersession_walk import NEEDLE, RecordScan
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.audit import Auditor, cache_dir

from ..services.test_supersede_engine import BEFORE, BRISTOL, DOG, LEEDS, NOW, changed, offline, resign, row, verify

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
PUB = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())


@pytest.fixture
def eng(tmp_path: Path) -> Iterator[Engine]:
    e = offline(tmp_path / "data")
    changed(e)  # seqs 0 Leeds, 1 dog, 2 Bristol; the record superseding seq 0 at seq 3
    yield e
    e.index.close()
    e.ledger.close()


def without_states(question: str, texts: list[str]) -> Any:
    """A change to a signed body: drop `states` and rebuild the prompt hash as template v1 over `texts`."""

    def change(body: dict[str, Any]) -> None:
        del body["states"]
        body["prompt"]["template"] = TEMPLATE_V1
        memories = [{**m["event"], "text": text} for m, text in zip(body["memories"], texts, strict=True)]
        body["prompt"]["sha256"] = prompt_hash(build_messages(TEMPLATE_V1, question, memories))

    return change


def cited_texts(t: Any) -> list[str]:
    return [m["event"]["text"] for m in t.body["memories"]]


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestEveryFormat2Receipt:
    def test_a_receipt_with_its_states_dropped_and_signed_again_fails_ledger_states_naming_the_seq_and_the_record(self, eng: Engine) -> None:
        t = eng.turn("alice", BEFORE)
        assert [x["seq"] for x in t.body["states"]["superseded"]] == [0]
        forged = resign(eng, t, without_states(BEFORE, cited_texts(t)))
        alone = verify(eng, forged, ledger=False)
        assert alone.verdict == "verified"  # nothing offline shows it: the prompt was rebuilt without the mark
        report = verify(eng, forged, ledger=True)
        failed = row(report, "ledger.states")
        assert failed.status == FAIL and report.verdict == "failed"
        assert "cited memory seq 0 is claimed live (the receipt carries no states" in failed.message
        assert "record at seq 3 superseded it" in failed.message

    def test_a_receipt_from_a_session_that_never_superseded_anything_passes_ledger_states(self, tmp_path: Path) -> None:
        e = offline(tmp_path / "d")
        for text in (LEEDS, DOG, "I also have a cat"):
            e.remember("bob", text)
        t = e.turn("bob", NOW)
        assert "states" not in t.body
        report = verify(e, t.receipt_path.read_bytes(), ledger=True)
        assert report.verdict == "verified" and row(report, "ledger.states").status == PASS
        assert "carries no states" in row(report, "ledger.states").message

    def test_a_format_2_vector_written_before_supersessions_verifies_with_a_passing_ledger_states_row(self, tmp_path: Path) -> None:
        folder = tmp_path / "sessions" / "vector-consent"
        folder.mkdir(parents=True)
        shutil.copy(VECTORS / "receipt_v2_consent_ledger.jsonl", folder / "events.jsonl")
        report = verify_bytes((VECTORS / "receipt_v2_consent.json").read_bytes(), trusted=[PUB], data_dir=tmp_path)
        assert report.verdict == "verified" and row(report, "ledger.states").status == PASS

    def test_a_record_after_the_answer_does_not_touch_an_earlier_receipt_without_states(self, tmp_path: Path) -> None:
        e = offline(tmp_path / "d")
        e.remember("erin", LEEDS)
        t = e.turn("erin", NOW)
        assert "states" not in t.body and 0 in [m["event"]["seq"] for m in t.body["memories"]]
        e.remember("erin", BRISTOL)  # supersedes seq 0 after that answer
        assert row(verify(e, t.receipt_path.read_bytes(), ledger=True), "ledger.states").status == PASS

    def test_offline_a_receipt_without_states_has_no_ledger_states_row(self, tmp_path: Path) -> None:
        e = offline(tmp_path / "d")
        e.remember("bob", DOG)
        report = verify(e, e.turn("bob", NOW).receipt_path.read_bytes(), ledger=False)
        assert "ledger.states" not in {c.name for c in report.checks}


class TestTheCheckReadsTheList:
    """check_ledger_states over the states vector's body: the ledger is asked only for the records it names."""

    body: dict[str, Any] = json.loads((VECTORS / "receipt_v2_states_body.json").read_text(encoding="utf-8"))
    lines = ledger_lines(VECTORS / "receipt_v2_states_ledger.jsonl")

    def named_only(self) -> Any:
        named = {e["by"]["event"]["seq"] for e in [*self.body["states"]["superseded"], *self.body["states"]["excluded"]]}
        asked: list[int] = []

        def event_at(seq: int) -> dict[str, Any]:
            asked.append(seq)
            if seq not in named:
                raise AssertionError(f"read ledger line seq {seq}, which the receipt does not name")
            return self.lines[seq]

        return event_at, asked

    def records(self) -> list[tuple[int, int]]:
        return [(ev["seq"], ev["meta"]["supersession"]["old"]["seq"]) for ev in self.lines if "supersession" in ev.get("meta", {})]

    def test_the_vector_passes_reading_only_the_named_records(self) -> None:
        event_at, asked = self.named_only()
        name, ok, message, _exp, _found = check_ledger_states(self.body, len(self.lines), event_at, self.records())
        assert (name, ok) == ("ledger.states", True), message
        assert sorted(asked) == sorted({e["by"]["event"]["seq"] for e in [*self.body["states"]["superseded"], *self.body["states"]["excluded"]]})

    def test_without_states_only_the_contradicting_record_and_its_new_statement_are_read(self) -> None:
        """The list names the superseded cited memory; the check reads that record and the statement it names as `new`
        (issue 28: a record whose `new` is not a user statement supersedes nothing), no other line."""
        body = {k: v for k, v in self.body.items() if k != "states"}
        [cited] = self.body["states"]["superseded"]
        record = cited["by"]["event"]
        allowed = {record["seq"], record["meta"]["supersession"]["new"]["seq"]}
        asked: list[int] = []

        def event_at(seq: int) -> dict[str, Any]:
            asked.append(seq)
            if seq not in allowed:
                raise AssertionError(f"read ledger line seq {seq}")
            return self.lines[seq]

        _name, ok, message, _exp, _found = check_ledger_states(body, len(self.lines), event_at, self.records())
        assert not ok and f"cited memory seq {cited['seq']} is claimed live" in message
        assert f"record at seq {record['seq']} superseded it" in message
        assert set(asked) == allowed

    def test_a_record_whose_new_is_not_a_user_statement_does_not_contradict_a_live_claim(self) -> None:
        body = {k: v for k, v in self.body.items() if k != "states"}
        [cited] = self.body["states"]["superseded"]
        new_seq = cited["by"]["event"]["meta"]["supersession"]["new"]["seq"]
        lines = list(self.lines)
        lines[new_seq] = {**lines[new_seq], "role": "assistant"}
        check = check_ledger_states(body, len(lines), lines.__getitem__, self.records())
        assert f"cited memory seq {cited['seq']} is claimed live" not in check[2]

    def test_the_list_decides_a_live_claim(self) -> None:
        body = {k: v for k, v in self.body.items() if k != "states"}
        answer = body["response"]["event"]["seq"]
        cited = body["memories"][-1]["event"]["seq"]

        def event_at(seq: int) -> dict[str, Any]:
            if seq != answer - 1:  # the listed record's own line (not a record here: the list is believed)
                raise AssertionError(f"read ledger line seq {seq}")
            return self.lines[seq]

        assert check_ledger_states(body, len(self.lines), event_at, [])[1] is True
        assert check_ledger_states(body, len(self.lines), event_at, [(answer - 1, cited)])[1] is False
        # a record at or after the answer, or beyond the verified events, is not in force at the turn
        assert check_ledger_states(body, len(self.lines), event_at, [(answer, cited)])[1] is True
        short = check_ledger_states(body, answer - 1, event_at, [(answer - 1, cited)])
        assert not short[1] and "claimed live" not in short[2] and "lies after the ledger's verified events" in short[2]


class TestTheWalkCollectsThem:
    def test_the_scan_finds_a_record_text_straddling_two_read_blocks(self) -> None:
        data = b"x" * 5 + NEEDLE + b"y" * 3 + NEEDLE + b"z"
        want = [5, 5 + len(NEEDLE) + 3]
        for size in (1, 2, 7, len(NEEDLE) - 1, len(NEEDLE), len(NEEDLE) + 1, 1000):
            scan = RecordScan(100)
            blocks = [data[i : i + size] for i in range(0, len(data), size)]
            assert b"".join(scan.tee(blocks)) == data
            assert scan.hits == [100 + w for w in want], size

    def test_the_auditors_facts_list_each_record_and_the_seq_it_superseded(self, eng: Engine) -> None:
        supersede(eng.data_dir, "alice", 2, 1, reason="a test", ledger=eng.ledger, key=eng.key)  # a visitor's record at seq 4
        eng.remember("alice", "I play the cello")
        with Auditor(eng.data_dir, full=True).facts("alice") as facts:
            lines = [facts.event_at(s) for s in range(facts.verified)]
            want = tuple((ev["seq"], ev["meta"]["supersession"]["old"]["seq"]) for ev in lines if "supersession" in ev["meta"])
            assert want == ((3, 0), (4, 1)) and facts.supersessions == want

    def test_a_warm_cache_gives_the_same_ledger_states_and_sees_a_record_appended_after_it(self, tmp_path: Path) -> None:
        e = offline(tmp_path / "d")
        e.remember("alice", LEEDS)
        e.remember("alice", DOG)
        first = e.turn("alice", NOW).receipt_path.read_bytes()  # no record yet: no states
        cold = verify(e, first, ledger=True)
        assert "no audit cache" in row(cold, "ledger.chain").message and row(cold, "ledger.states").status == PASS
        warm = verify(e, first, ledger=True)
        assert "re-hashed" in row(warm, "ledger.chain").message
        assert (row(warm, "ledger.states").status, row(warm, "ledger.states").message) == (PASS, row(cold, "ledger.states").message)
        e.remember("alice", BRISTOL)  # appended after the cache was built: supersedes seq 0
        t = e.turn("alice", BEFORE)
        assert [x["seq"] for x in t.body["states"]["superseded"]] == [0]
        forged = resign(e, t, without_states(BEFORE, cited_texts(t)))
        report = verify(e, forged, ledger=True)
        assert "re-hashed" in row(report, "ledger.chain").message  # the cache was used, the appended lines walked
        failed = row(report, "ledger.states")
        assert failed.status == FAIL and "cited memory seq 0 is claimed live" in failed.message
        again = verify(e, forged, ledger=True)  # and once more, with the cache now covering the record
        assert "nothing new to walk" in row(again, "ledger.chain").message
        assert (row(again, "ledger.states").status, row(again, "ledger.states").message) == (FAIL, failed.message)
        assert verify(e, t.receipt_path.read_bytes(), ledger=True).verdict == "verified"
        assert row(verify(e, first, ledger=True), "ledger.states").status == PASS  # the record lies after its answer

    def test_a_cache_of_the_format_before_supersessions_is_re_walked_and_says_why(self, eng: Engine) -> None:
        t = eng.turn("alice", BEFORE)
        forged = resign(eng, t, without_states(BEFORE, cited_texts(t)))
        assert row(verify(eng, forged, ledger=True), "ledger.states").status == FAIL
        path = cache_dir(eng.data_dir, "alice") / "state.json"
        state = orjson.loads(path.read_bytes())
        del state["supersessions"]
        path.write_bytes(orjson.dumps({**state, "format": 3}))
        report = verify(eng, forged, ledger=True)
        assert "predates supersession records" in row(report, "ledger.chain").message
        assert row(report, "ledger.states").status == FAIL

    def test_an_erasure_that_re_walks_the_chunk_holding_a_record_keeps_it(self, eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        for text in ("I play the cello", "My sister is Ana", "I work as a nurse", "I like trams", "I read at night"):
            eng.remember("alice", text)  # seqs 4-8: chunks of lines 1-4 (the record at seq 3), 5-8, 9
        with Auditor(eng.data_dir, full=True).facts("alice") as facts:
            assert facts.supersessions == ((3, 0),)
        forget(eng.data_dir, "alice", [1], ledger=eng.ledger, index=eng.index, key=eng.key)  # rewrites line 2 in place
        with Auditor(eng.data_dir).facts("alice") as facts:
            notes = "; ".join(facts.notes)
            assert "only the changed chunk(s) were walked again" in notes, notes
            assert facts.erased == (1,) and facts.supersessions == ((3, 0),)
        with Auditor(eng.data_dir, full=True).facts("alice") as facts:
            assert facts.supersessions == ((3, 0),)

    def test_facts_without_collected_records_make_ledger_states_not_verifiable(self, eng: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
        from receipts import verify as rverify

        t = eng.turn("alice", BEFORE)
        real = rverify.verify_receipt

        def uncollected(receipt: Any, trusted: Any, led: Any = None, **kw: Any) -> Any:
            return real(receipt, trusted, None if led is None else rverify.LedgerFacts(**{**{n: getattr(led, n) for n in rverify.LedgerFacts.__dataclass_fields__}, "supersessions": None}), **kw)

        monkeypatch.setattr("storage.files.receipts.api.verify_receipt", uncollected)
        assert row(verify(eng, t.receipt_path.read_bytes(), ledger=True), "ledger.states").status == NOT_VERIFIABLE
