"""The erased line (FORMAT.md §4.4) and the erasure record (§4.5): every verifier path reads them the same way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest
import rfc8785

import ledger.chunks
from ledger.event import (
    ERASED_KEYS,
    Event,
    content_commitment,
    erased_form,
    erasure_record_meta,
    erasure_record_text,
    event_from_dict,
    is_erasure_record,
    make_event,
    recompute_digest,
)
from ledger.verify import BAD_ERASURE_RECORD, ERASED_UNRECORDED, MALFORMED_EVENT, NON_CANONICAL, verify_stream
from receipts.merkle import leaf_hash, root_from_leaf_hashes
from storage.files.ledger.parallel import verify_file_parallel_erased
from storage.files.ledger.store import Ledger
from storage.files.receipts.audit import Auditor

S = "erase-s"


def build(n: int, session: str = S) -> list[Event]:
    prev = bytes(32)
    out = []
    for i in range(n):
        ev = make_event(
            session=session,
            seq=i,
            prev=prev,
            role="user" if i % 2 == 0 else "assistant",
            text=f"message {i} with the marker zebrafish{i}",
            meta={"i": i, "nested": {"k": [i, "v"]}},
            ts=f"2026-01-01T00:00:{i % 60:02d}.000000Z",
            event_id="evt_" + hashlib.sha256(f"id{i}".encode()).hexdigest()[:32],
            salt=hashlib.sha256(f"salt{i}".encode()).digest(),
        )
        out.append(ev)
        prev = bytes.fromhex(ev.chain)
    return out


def extend(events: list[Event], role: str = "user", text: str = "more", meta: dict | None = None) -> Event:
    last = events[-1]
    ev = make_event(
        session=last.session,
        seq=last.seq + 1,
        prev=bytes.fromhex(last.chain),
        role=role,
        text=text,
        meta=meta if meta is not None else {},
        ts="2026-01-02T00:00:00.000000Z",
        event_id="evt_" + hashlib.sha256(f"x{last.seq}".encode()).hexdigest()[:32],
        salt=hashlib.sha256(f"xs{last.seq}".encode()).digest(),
        validated=True,
    )
    events.append(ev)
    return ev


def erase(events: list[Event], seqs: list[int], reason: str | None = None) -> list[Event]:
    """What Ledger.erase writes, built by hand: the erased lines, and a record appended after them."""
    out = list(events)
    gone = []
    for s in seqs:
        out[s] = erased_form(out[s])
        gone.append(out[s])
    extend(out, "system", erasure_record_text(len(gone)), erasure_record_meta(gone, reason))
    return out


def blob(events: list[Event]) -> bytes:
    return b"".join(e.to_line() for e in events)


def verify(data: bytes, session: str = S):  # noqa: ANN201 - a SessionReport
    return verify_stream(session, [data])


class TestTheErasedForm:
    def test_erasing_keeps_digest_chain_and_every_other_field(self) -> None:
        ev = build(3)[1]
        er = erased_form(ev)
        assert er.erased and not ev.erased
        assert (er.text, er.meta, er.salt) == ("", {}, "")
        assert er.commit == content_commitment(bytes.fromhex(ev.salt), ev.text, ev.meta).hex()
        same = ("session", "seq", "id", "role", "ts", "digest", "prev", "chain", "v")
        assert [getattr(er, k) for k in same] == [getattr(ev, k) for k in same]
        assert erased_form(er) is er

    def test_the_erased_line_is_jcs_of_exactly_ten_keys_and_no_text(self) -> None:
        ev = build(2)[1]
        line = erased_form(ev).to_line()
        obj = orjson.loads(line)
        assert sorted(obj) == sorted(ERASED_KEYS) and len(obj) == 10
        assert line == rfc8785.dumps(obj) + b"\n"
        assert b"zebrafish" not in line and b"salt" not in line and b"meta" not in line

    def test_the_digest_recomputed_from_commit_equals_the_original(self) -> None:
        ev = build(2)[1]
        obj = orjson.loads(erased_form(ev).to_line())
        assert recompute_digest(obj).hex() == ev.digest == recompute_digest(orjson.loads(ev.to_line())).hex()
        back = event_from_dict(obj, 2)
        assert back.erased and back.to_line() == erased_form(ev).to_line() and back.to_dict() == obj

    def test_an_erasure_record_is_recognised_and_an_ordinary_system_event_is_not(self) -> None:
        events = erase(build(3), [1])
        assert is_erasure_record(events[-1]) and events[-1].text == "[erasure record: 1 event(s) erased]"
        assert not any(is_erasure_record(e) for e in events[:-1])
        assert not is_erasure_record(extend(build(1), "system", "note", {"x": 1}))
        assert b"zebrafish1" not in events[-1].to_line()


class TestTheSerialWalk:
    def test_a_ledger_with_an_erased_line_and_its_record_verifies_and_lists_it(self) -> None:
        events = erase(build(5), [1, 3], reason="asked to forget")
        report = verify(blob(events))
        assert report.ok, report.brk
        assert report.events == 6 and report.head == events[-1].chain and report.erased == (1, 3)
        assert report.to_dict()["erased"] == [1, 3]

    def test_an_erased_line_no_record_lists_is_a_named_break(self) -> None:
        events = build(5)
        events[2] = erased_form(events[2])
        report = verify(blob(events))
        assert not report.ok and report.brk is not None
        assert (report.brk.kind, report.brk.line, report.brk.seq) == (ERASED_UNRECORDED, 3, 2)
        assert report.events == 2 and report.head == events[1].chain  # it stops before that line

    def test_a_second_erasure_later_on_still_verifies(self) -> None:
        events = erase(build(6), [0])
        extend(events)
        events = erase(events, [4, 7])
        report = verify(blob(events))
        assert report.ok, report.brk
        assert report.erased == (0, 4, 7)

    @pytest.mark.parametrize(
        "mutate, problem",
        [
            (lambda rec, ev: rec["erased"][0].update(commit="0" * 64), "does not match"),
            (lambda rec, ev: rec["erased"][0].update(id="evt_" + "0" * 32), "does not match"),
            (lambda rec, ev: rec["erased"][0].update(seq=0), "not in erased form"),
            (lambda rec, ev: rec["erased"].append(dict(rec["erased"][0])), "already listed"),
            (lambda rec, ev: rec.update(v=2), "unknown"),
            (lambda rec, ev: rec.update(extra=1), "exactly v, erased and reason"),
            (lambda rec, ev: rec["erased"][0].update(seq=99), "not an earlier seq"),
            (lambda rec, ev: rec.update(erased=[]), "non-empty"),
        ],
        ids=["wrong-commit", "wrong-id", "not-erased-seq", "listed-twice", "version", "extra-key", "later-seq", "empty"],
    )
    def test_an_erasure_record_that_does_not_match_is_a_named_break(self, mutate, problem: str) -> None:  # noqa: ANN001
        events = build(4)
        gone = [erased_form(events[2])]
        events[2] = gone[0]
        meta = erasure_record_meta(gone, None)
        mutate(meta["erasure"], events)
        n = len(meta["erasure"]["erased"])
        extend(events, "system", erasure_record_text(n), meta)
        report = verify(blob(events))
        assert report.brk is not None and report.brk.kind == BAD_ERASURE_RECORD, report.brk
        assert report.brk.line == 5 and problem in report.brk.message

    def test_a_record_whose_text_is_not_the_count_is_a_named_break(self) -> None:
        events = build(3)
        gone = [erased_form(events[1])]
        events[1] = gone[0]
        extend(events, "system", "[erasure record: zebrafish1]", erasure_record_meta(gone, None))
        report = verify(blob(events))
        assert report.brk is not None and report.brk.kind == BAD_ERASURE_RECORD

    def test_a_later_record_cannot_list_an_already_recorded_seq(self) -> None:
        events = erase(build(3), [1])
        extend(events, "system", erasure_record_text(1), erasure_record_meta([events[1]], None))
        report = verify(blob(events))
        assert report.brk is not None and report.brk.kind == BAD_ERASURE_RECORD and "already listed" in report.brk.message

    @pytest.mark.parametrize(
        "change",
        [
            lambda o: o.update(text=""),  # 11 keys: erased, with text left in
            lambda o: o.update(salt="0" * 64),
            lambda o: o.pop("digest"),
            lambda o: o.update(commit="ABC"),
            lambda o: o.update(commit=1),
        ],
        ids=["eleven-keys-text", "eleven-keys-salt", "nine-keys", "commit-not-hex", "commit-not-string"],
    )
    def test_anything_but_the_twelve_or_ten_key_form_is_malformed(self, change) -> None:  # noqa: ANN001
        events = erase(build(3), [1])
        obj = orjson.loads(events[1].to_line())
        change(obj)
        data = events[0].to_line() + rfc8785.dumps(obj) + b"\n" + b"".join(e.to_line() for e in events[2:])
        report = verify(data)
        assert report.brk is not None and (report.brk.kind, report.brk.line) == (MALFORMED_EVENT, 2), report.brk

    def test_a_wrong_commit_is_a_digest_mismatch(self) -> None:
        events = erase(build(3), [1])
        obj = orjson.loads(events[1].to_line())
        obj["commit"] = "1" * 64
        data = events[0].to_line() + rfc8785.dumps(obj) + b"\n" + b"".join(e.to_line() for e in events[2:])
        report = verify(data)
        assert report.brk is not None and report.brk.kind == "digest_mismatch"

    @pytest.mark.parametrize("edit", [lambda b: b.replace(b'","', b'", "', 1), lambda b: b[:-1] + b"\r\n"], ids=["space", "crlf"])
    def test_non_canonical_bytes_of_an_erased_line_are_non_canonical(self, edit) -> None:  # noqa: ANN001
        events = erase(build(3), [1])
        data = events[0].to_line() + edit(events[1].to_line()) + b"".join(e.to_line() for e in events[2:])
        report = verify(data)
        assert report.brk is not None and (report.brk.kind, report.brk.line) == (NON_CANONICAL, 2)

    def test_the_ledger_refuses_to_append_a_forged_erasure_record(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append(S, "user", "hi")
        with pytest.raises(ValueError, match="reserved for erasure records"):
            led.append(S, "system", erasure_record_text(1), {"erasure": {"v": 1, "erased": [], "reason": None}})


class TestTheParallelWalk:
    def test_it_lists_erased_seqs_even_when_the_record_is_in_another_range(self, tmp_path: Path) -> None:
        events = erase(build(300), [3, 150])
        path = tmp_path / "events.jsonl"
        path.write_bytes(blob(events))
        serial = verify(path.read_bytes())
        assert serial.ok and serial.erased == (3, 150)
        for workers in (2, 3, 7):
            assert verify_file_parallel_erased(path, S, workers=workers, min_bytes=1) == (301, serial.head, (3, 150))

    @pytest.mark.parametrize("workers", [2, 5])
    def test_an_unrecorded_erased_line_defers_to_the_serial_walk(self, tmp_path: Path, workers: int) -> None:
        events = build(300)
        events[5] = erased_form(events[5])
        path = tmp_path / "events.jsonl"
        path.write_bytes(blob(events))
        assert verify_file_parallel_erased(path, S, workers=workers, min_bytes=1) is None

    def test_a_record_in_a_later_range_that_does_not_match_defers_to_the_serial_walk(self, tmp_path: Path) -> None:
        events = build(300)
        gone = erased_form(events[5])
        events[5] = gone
        extend(events, "system", erasure_record_text(1), erasure_record_meta([gone._replace(commit="2" * 64)], None))
        path = tmp_path / "events.jsonl"
        path.write_bytes(blob(events))
        assert verify_file_parallel_erased(path, S, workers=3, min_bytes=1) is None
        assert verify(path.read_bytes()).brk.kind == BAD_ERASURE_RECORD  # type: ignore[union-attr]

    def test_ledger_verify_reports_erased_seqs(self, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        led.append(S, "user", "x")
        led.log_path(S).write_bytes(blob(erase(build(8), [2])))
        report = led.verify(S)
        assert report.ok and report.erased == (2,)


def write_ledger(data: Path, events: list[Event]) -> Path:
    path = data / "sessions" / S / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("tmp")
    tmp.write_bytes(blob(events))
    os.replace(tmp, path)
    return path


class TestTheAuditorsCache:
    def test_an_erasure_is_re_walked_from_its_chunk_not_from_genesis(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        events = build(12)
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.verified == 12 and facts.erased == ()
        events = erase(events, [9])  # line 10: in the chunk of lines 9-12
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None and facts.verified == 13
            assert facts.erased == (9,)
            assert facts.changed_from_line == 9 and facts.cached_lines == 8 and facts.rewalked_from_line == 13
            assert "only the changed chunk(s) were walked again (lines 9–12)" in "; ".join(facts.notes)
            assert facts.root_at(13) == _root(events)
            assert "1 event erased (seq 9)" in "; ".join(facts.notes)
            assert facts.event_at(9) == orjson.loads(events[9].to_line())
        with Auditor(tmp_path).facts(S) as facts:  # warm: nothing re-walked
            assert facts.rewalked_from_line is None and facts.erased == (9,)

    def test_after_an_erasure_only_the_changed_chunk_is_walked_and_later_chunks_come_from_the_cache(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        events = erase(build(13), [2])  # an earlier erasure: seq 2 (chunk 1), its record seq 13 (chunk 4)
        extend(events)
        write_ledger(tmp_path, events)  # 15 lines: chunks 1-4, 5-8, 9-12, 13-15
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None and facts.erased == (2,)
        events = erase(events, [5])  # line 6, chunk 5-8: every later chunk moves, unchanged
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            notes = "; ".join(facts.notes)
            assert facts.first_break is None and facts.verified == 16 and facts.erased == (2, 5)
            assert "(lines 5–8); 7 lines after them re-hashed equal at their new offsets" in notes, notes
            assert facts.cached_lines == 11 and facts.rewalked_from_line == 16
            assert facts.root_at(16) == _root(events) and facts.root_at(15) == _root(events[:15])
            assert [facts.event_at(i) for i in range(16)] == [orjson.loads(e.to_line()) for e in events]
        with Auditor(tmp_path).facts(S) as warm:
            assert warm.rewalked_from_line is None and warm.erased == (2, 5) and warm.verified == 16
        with Auditor(tmp_path, full=True).facts(S) as full:
            assert full.erased == (2, 5) and full.root_at(16) == _root(events)

    def test_a_line_restored_under_a_cached_record_is_still_caught(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        original = build(10)
        events = erase(original, [1])  # seq 1 (chunk 1-4) erased; its record is seq 10 (chunk 9-12)
        extend(events)
        extend(events)
        extend(events)  # 14 lines
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None
        restored = list(events)
        restored[1] = original[1]  # the text put back: same digest and chain, but the record says erased
        write_ledger(tmp_path, restored)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is not None
            assert (facts.first_break.kind, facts.first_break.line) == (BAD_ERASURE_RECORD, 11), facts.first_break
        with Auditor(tmp_path, full=True).facts(S) as full:
            assert full.first_break == facts.first_break and full.verified == facts.verified

    def test_a_resumed_walk_knows_what_the_cached_prefix_erased(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        events = erase(build(10), [1])  # its record is seq 10, line 11, in the chunk of lines 9-12
        extend(events)
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None and facts.erased == (1,)
        events = erase(events, [9])  # the walk restarts at line 9 and meets the record of seq 1 again
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None, facts.first_break
            assert facts.cached_lines == 8 and facts.erased == (1, 9) and facts.verified == 13
        with Auditor(tmp_path, full=True).facts(S) as full:
            assert full.erased == (1, 9) and full.root_at(13) == _root(events)

    def test_a_record_removed_after_the_cache_is_caught_in_the_cached_prefix(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        events = erase(build(10), [1])  # seq 1 erased (chunk 1), its record at seq 10 (chunk 3)
        extend(events)
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is None
        forged = events[:10]  # the record replaced by an ordinary event, every later hash recomputed
        extend(forged, "user", "nothing to see")
        extend(forged)
        write_ledger(tmp_path, forged)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is not None
            assert (facts.first_break.kind, facts.first_break.line) == (ERASED_UNRECORDED, 2)
            assert facts.verified == 1 and facts.cached_lines == 8  # re-walked from line 9 only, then cut to line 1
        with Auditor(tmp_path).facts(S) as again:  # the cut cache is consistent: same answer warm
            assert again.first_break is not None and again.first_break.kind == ERASED_UNRECORDED and again.verified == 1
        with Auditor(tmp_path, full=True).facts(S) as full:
            assert full.first_break == facts.first_break and full.verified == 1

    def test_an_unrecorded_erased_line_after_the_cache_cuts_it_there(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        events = build(11)
        events[6] = erased_form(events[6])
        write_ledger(tmp_path, events)
        with Auditor(tmp_path).facts(S) as facts:
            assert facts.first_break is not None and facts.first_break.kind == ERASED_UNRECORDED
            assert facts.verified == 6 and facts.root_at(6) == _root(events[:6])
        with Auditor(tmp_path).facts(S) as again:
            assert again.verified == 6 and again.first_break == facts.first_break


def _root(events: list[Event]) -> bytes:
    return root_from_leaf_hashes([leaf_hash(e.leaf_data) for e in events])


class TestProveSince:
    def test_a_checkpoint_kept_before_an_erasure_is_still_extended_and_the_row_names_the_erased(self, tmp_path: Path) -> None:
        from receipts.keys import SigningKey
        from storage.files.receipts import checkpoint_files as checkpoints_files

        key = SigningKey.generate()
        events = build(6)
        write_ledger(tmp_path, events)
        led = Ledger(tmp_path)
        kept = checkpoints_files.issue(tmp_path, led, S, key)
        events = erase(events, [2])
        write_ledger(tmp_path, events)
        led = Ledger(tmp_path)
        checkpoints_files.issue(tmp_path, led, S, key)
        report = checkpoints_files.prove_since(tmp_path, S, kept, [key.public_key])
        assert report.ok and report.verdict == "verified", report.to_dict()
        chain = next(c for c in report.checks if c.name == "ledger.chain")
        assert "1 event erased (seq 2)" in chain.message
