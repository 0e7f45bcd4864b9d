"""Receipt format 2: detached disclosures checked against the signed commitment; redaction keeps the signature.

docs/FORMAT.md §15. The committed vector (tests/vectors/receipt_v2.json, the same turn as receipt_v1.json)
and its redacted copy; generated attacks on the disclosures, each caught by a named check or refused as
malformed, never verified.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import receipts
from cli.prog_receipts import main as receipts_main
from receipts.body import PAYLOAD_TYPE, MalformedReceipt, dump_file, parse_receipt
from receipts.dsse import sign_envelope
from receipts.keys import PublicKey, SigningKey, parse_public_key
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS, WITHHELD, Report
from storage.files.receipts.api import verify_bytes

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
V1 = (VECTORS / "receipt_v1.json").read_bytes()
V2 = (VECTORS / "receipt_v2.json").read_bytes()
REDACTED = (VECTORS / "receipt_v2_redacted.json").read_bytes()
PUB: PublicKey = parse_public_key((VECTORS / "receipt_v1_pubkey.json").read_text())
SESSION = "vector-receipts"


def statuses(report: Report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def with_ledger(tmp: Path) -> Path:
    folder = tmp / "sessions" / SESSION
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "receipt_v1_ledger.jsonl", folder / "events.jsonl")
    return tmp


def file_of(raw: bytes) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(raw)
    return obj


class TestTheVector:
    def test_the_format_2_vector_verifies_offline_and_with_its_ledger_every_row_passing(self, tmp_path: Path) -> None:
        offline = verify_bytes(V2, trusted=[PUB])
        assert offline.verdict == "verified" and not offline.failed and not offline.withheld
        report = verify_bytes(V2, trusted=[PUB], data_dir=with_ledger(tmp_path))
        assert report.verdict == "verified"
        assert all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
        names = {c.name for c in report.checks}
        assert {"query.content", "memory#1.content", "memory#2.content", "response.content"} <= names

    def test_the_signed_body_holds_no_text_meta_or_salt_of_any_cited_event(self) -> None:
        receipt = parse_receipt(V2)
        payload = receipt.envelope.payload.decode("utf-8")
        for d in receipt.disclosures.values():
            assert d["text"] not in payload and d["salt"] not in payload
        body = receipt.signed_body
        for ev in [body["query"]["event"], *(m["event"] for m in body["memories"]), body["response"]["event"]]:
            assert set(ev) == {"chain", "commit", "digest", "id", "prev", "role", "seq", "session", "ts", "v"}

    def test_format_2_signs_the_same_events_as_format_1_same_digests_same_checkpoint(self) -> None:
        one, two = parse_receipt(V1).body, parse_receipt(V2).body
        assert one["checkpoint"] == two["checkpoint"] and one["prompt"] == two["prompt"]
        for a, b in zip(one["memories"], two["memories"], strict=True):
            assert {k: b["event"][k] for k in a["event"]} == a["event"]  # the view carries the disclosed fields back

    def test_the_redacted_vector_keeps_the_envelope_byte_for_byte(self) -> None:
        a, b = file_of(V2), file_of(REDACTED)
        assert {k: a[k] for k in ("payload", "payloadType", "signatures")} == {k: b[k] for k in ("payload", "payloadType", "signatures")}
        assert [d["seq"] for d in a["disclosures"]] == [0, 2, 4, 5] and [d["seq"] for d in b["disclosures"]] == [0, 4, 5]

    def test_a_redacted_receipt_verifies_with_the_withheld_memory_named_and_nothing_passed_in_its_place(self, tmp_path: Path) -> None:
        for data_dir in (None, with_ledger(tmp_path)):
            report = verify_bytes(REDACTED, trusted=[PUB], data_dir=data_dir)
            st_ = statuses(report)
            assert report.verdict == "verified" and not report.failed
            assert st_["memory#2.content"] == WITHHELD
            assert {st_[f"memory#2.{n}"] for n in ("digest", "chain_link", "inclusion")} == {PASS}
            assert st_["envelope.signature"] == PASS and st_["checkpoint.signature"] == PASS
            prompt = next(c for c in report.checks if c.name == "prompt.hash")
            assert prompt.status == NOT_VERIFIABLE and "memory 2 (seq 2)" in prompt.message and "withheld" in prompt.message
            assert [c.name for c in report.withheld] == ["memory#2.content"]
            assert st_["memory#1.content"] == PASS and st_["response.hash"] == PASS

    def test_against_the_erased_ledger_vector_the_redacted_copy_says_erased_and_verifies(self, tmp_path: Path) -> None:
        from receipts.verify import ERASED

        folder = tmp_path / "sessions" / SESSION
        folder.mkdir(parents=True)
        shutil.copy(VECTORS / "receipt_v2_ledger_erased.jsonl", folder / "events.jsonl")
        report = verify_bytes(REDACTED, trusted=[PUB], data_dir=tmp_path)
        st_ = statuses(report)
        assert report.verdict == "verified" and st_["memory#2.content"] == ERASED
        assert all(st_[n] == PASS for n in ("ledger.events", "ledger.chain", "ledger.root", "ledger.consistency", "ledger.response"))
        whole = verify_bytes(V2, trusted=[PUB], data_dir=tmp_path)  # an unredacted copy still opens seq 2's commitment
        assert whole.verdict == "verified" and statuses(whole)["memory#2.content"] == PASS
        assert b"I moved to Lisbon" not in (VECTORS / "receipt_v2_ledger_erased.jsonl").read_bytes()

    def test_a_format_1_receipt_still_verifies_against_the_erased_ledger(self, tmp_path: Path) -> None:
        folder = tmp_path / "sessions" / SESSION
        folder.mkdir(parents=True)
        shutil.copy(VECTORS / "receipt_v2_ledger_erased.jsonl", folder / "events.jsonl")
        report = verify_bytes(V1, trusted=[PUB], data_dir=tmp_path)
        assert report.verdict == "verified" and all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]

    def test_the_groups_say_which_memory_was_withheld(self) -> None:
        groups = {g.key: g for g in verify_bytes(REDACTED, trusted=[PUB]).groups()}
        g = groups["memory#2"]
        assert g.status == WITHHELD and g.sentence.startswith("memory 2 (seq 2) was withheld from this copy")
        assert "commitment" in g.sentence
        assert groups["memory#1"].status == PASS and groups["receipt"].status == NOT_VERIFIABLE
        assert "memory 2 (seq 2)" in groups["receipt"].sentence

    def test_the_json_report_counts_withheld_rows_apart_from_passes_and_failures(self) -> None:
        d = verify_bytes(REDACTED, trusted=[PUB]).to_dict()
        assert d["withheld"] == 1 and d["erased"] == 0 and d["failed"] == 0
        assert {c["status"] for c in d["checks"] if c["name"] == "memory#2.content"} == {"withheld"}


class TestPublicFunctions:
    def test_receipt_format_names_both_formats(self) -> None:
        assert receipts.receipt_format(V1) == 1 and receipts.receipt_format(V2) == 2 and receipts.receipt_format(REDACTED) == 2

    def test_cited_seqs_maps_every_cited_seq_to_its_name(self) -> None:
        expected = {4: "query", 0: "memory#1", 2: "memory#2", 5: "response"}
        assert receipts.cited_seqs(V1) == expected and receipts.cited_seqs(V2) == expected

    def test_redact_reproduces_the_committed_redacted_copy(self) -> None:
        assert receipts.redact(V2, [2]) == REDACTED

    def test_redact_is_idempotent_and_ignores_seqs_the_receipt_does_not_cite(self) -> None:
        assert receipts.redact(REDACTED, [2]) == REDACTED
        assert receipts.redact(V2, [2, 1, 3, 99]) == REDACTED
        assert receipts.withheld_seqs(receipts.redact(V2, [0, 2, 4, 5])) == [0, 2, 4, 5]

    def test_every_disclosure_withheld_still_verifies_the_signature_digests_and_proofs(self) -> None:
        report = verify_bytes(receipts.redact(V2, [0, 2, 4, 5]), trusted=[PUB])
        st_ = statuses(report)
        assert report.verdict == "verified" and not report.failed
        assert {st_[f"{p}.content"] for p in ("query", "memory#1", "memory#2", "response")} == {WITHHELD}
        assert st_["response.hash"] == WITHHELD
        assert all(st_[f"{p}.{n}"] == PASS for p in ("query", "memory#1", "memory#2", "response") for n in ("digest", "chain_link", "inclusion"))

    def test_a_format_1_receipt_cannot_be_redacted(self) -> None:
        with pytest.raises(receipts.RedactError, match="format 1"):
            receipts.redact(V1, [2])

    def test_redact_refuses_what_is_not_a_receipt(self) -> None:
        with pytest.raises(MalformedReceipt):
            receipts.redact(b"{}", [1])


# ------------------------------------------------------------------ generated attacks on the disclosures
def mutated(change: Any) -> bytes:
    obj = file_of(V2)
    change(obj["disclosures"])
    return dump_file(obj)


def _swap_contents(ds: list[dict[str, Any]], i: int, j: int) -> None:
    for key in ("salt", "text", "meta"):
        ds[i][key], ds[j][key] = ds[j][key], ds[i][key]


def _flip(h: str) -> str:
    return ("1" if h[0] == "0" else "0") + h[1:]


# (name, change to the disclosures list, the check rows that must fail)
CAUGHT: list[tuple[str, Any, set[str]]] = [
    ("swap two memories' disclosures", lambda ds: _swap_contents(ds, 0, 1), {"memory#1.content", "memory#2.content"}),
    ("swap the question's and the answer's", lambda ds: _swap_contents(ds, 2, 3), {"query.content", "response.content"}),
    ("alter a memory's text", lambda ds: ds[0].update(text=ds[0]["text"].replace("Miso", "Rex")), {"memory#1.content"}),
    ("alter a memory's salt", lambda ds: ds[1].update(salt=_flip(ds[1]["salt"])), {"memory#2.content"}),
    ("alter a memory's meta", lambda ds: ds[0].update(meta={"kind": "note"}), {"memory#1.content"}),
    ("add a meta key", lambda ds: ds[0]["meta"].update(extra=1), {"memory#1.content"}),
    ("a float in a disclosed meta", lambda ds: ds[0].update(meta={"x": 1.5}), {"memory#1.content"}),
    ("alter the answer's text", lambda ds: ds[3].update(text="Your cat is called Rex."), {"response.content", "response.hash"}),
    ("alter the question's text", lambda ds: ds[2].update(text="What is my dog called?"), {"query.content", "prompt.hash"}),
    ("a zero salt", lambda ds: ds[0].update(salt="00" * 32), {"memory#1.content"}),
]
MALFORMED: list[tuple[str, Any, str]] = [
    ("a disclosure for an uncited seq", lambda ds: ds.insert(1, {**ds[0], "seq": 1}), "not an event this receipt cites"),
    ("a disclosure duplicated", lambda ds: ds.insert(1, copy.deepcopy(ds[0])), "disclosed twice"),
    ("a duplicate with other content", lambda ds: ds.insert(1, {**ds[0], "text": "forged"}), "disclosed twice"),
    ("two disclosures out of order", lambda ds: ds.reverse(), "ascending seq order"),
    ("a disclosure with an extra field", lambda ds: ds[0].update(rank=1), "fields differ"),
    ("a disclosure without its salt", lambda ds: ds[0].pop("salt"), "fields differ"),
    ("a seq that is not an integer", lambda ds: ds[0].update(seq="0"), "expected an integer"),
    ("a text that is not a string", lambda ds: ds[0].update(text=5), "expected a string"),
    ("a meta that is not an object", lambda ds: ds[0].update(meta=[]), "expected an object"),
    ("a salt that is not hex", lambda ds: ds[0].update(salt="zz" * 32), "does not match"),
]


class TestGeneratedAttacks:
    @pytest.mark.parametrize(("name", "change", "checks"), CAUGHT, ids=[c[0] for c in CAUGHT])
    def test_a_changed_disclosure_fails_a_named_check(self, name: str, change: Any, checks: set[str]) -> None:
        report = verify_bytes(mutated(change), trusted=[PUB])
        failed = {c.name for c in report.failed}
        assert report.verdict == "failed" and checks <= failed, (name, failed)
        assert statuses(report)["envelope.signature"] == PASS  # the signature never covered the disclosures

    @pytest.mark.parametrize(("name", "change", "words"), MALFORMED, ids=[c[0] for c in MALFORMED])
    def test_a_disclosure_bound_to_no_single_cited_event_is_malformed(self, name: str, change: Any, words: str) -> None:
        with pytest.raises(MalformedReceipt, match=words):
            parse_receipt(mutated(change))

    @given(seq_index=st.integers(0, 3), field=st.sampled_from(["text", "salt", "meta"]), data=st.data())
    @settings(max_examples=60, deadline=None)
    def test_no_change_to_any_disclosure_field_ever_verifies(self, seq_index: int, field: str, data: st.DataObject) -> None:
        obj = file_of(V2)
        d = obj["disclosures"][seq_index]
        if field == "text":
            new: Any = data.draw(st.text(max_size=40).filter(lambda t: t != d["text"]))
        elif field == "salt":
            new = data.draw(st.binary(min_size=32, max_size=32).map(bytes.hex).filter(lambda s: s != d["salt"]))
        else:
            new = data.draw(st.dictionaries(st.sampled_from(["kind", "x", "receipt_id"]), st.integers(0, 9) | st.text(max_size=5)).filter(lambda m: m != d["meta"]))
        d[field] = new
        report = verify_bytes(dump_file(obj), trusted=[PUB])
        assert report.verdict == "failed"
        name = {0: "memory#1", 1: "memory#2", 2: "query", 3: "response"}[seq_index]
        assert statuses(report)[f"{name}.content"] == FAIL

    def test_a_file_beside_the_envelope_must_hold_exactly_the_disclosures(self) -> None:
        for change in (lambda o: o.update(extra=1), lambda o: o.pop("disclosures"), lambda o: o.update(disclosures={})):
            obj = file_of(V2)
            change(obj)
            with pytest.raises(MalformedReceipt):
                parse_receipt(dump_file(obj))

    def test_a_format_2_body_under_the_format_1_payload_type_fails_the_payload_type_check(self) -> None:
        key = SigningKey.from_seed(__import__("hashlib").sha256(b"mre test vector signing key").digest())
        obj = file_of(V2)
        env = sign_envelope(parse_receipt(V2).envelope.payload, PAYLOAD_TYPE, key)
        obj.update(payloadType=env["payloadType"], signatures=env["signatures"])
        report = verify_bytes(dump_file(obj), trusted=[PUB])
        assert report.verdict == "failed" and statuses(report)["envelope.payload_type"] == FAIL

    def test_a_format_1_file_is_read_exactly_as_before_a_disclosures_member_is_ignored(self) -> None:
        obj = file_of(V1)
        obj["disclosures"] = [{"seq": 0, "salt": "00" * 32, "text": "x", "meta": {}}]
        receipt = parse_receipt(json.dumps(obj).encode())
        assert receipt.format == 1 and not receipt.disclosures and receipt.body == parse_receipt(V1).body
        assert verify_bytes(json.dumps(obj).encode(), trusted=[PUB]).verdict == "verified"


class TestCli:
    def test_a_redacted_receipt_exits_0_and_the_verdict_line_counts_what_was_withheld(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "r.json"
        path.write_bytes(REDACTED)
        trust = str(VECTORS / "receipt_v1_pubkey.json")
        assert receipts_main(["verify", str(path), "--trust", trust]) == 0
        out = capsys.readouterr().out
        assert "held  memory 2 (seq 2)" in out and "verdict: VERIFIED (0 failed, 6 not verifiable here, 1 withheld;" in out
        assert receipts_main(["verify", str(path)]) == 3  # no trusted key: unverified, as for any receipt
        capsys.readouterr()
        path.write_bytes(mutated(lambda ds: ds[0].update(text="forged")))
        assert receipts_main(["verify", str(path), "--trust", trust]) == 1

    def test_show_prints_no_text_for_a_withheld_memory(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "r.json"
        path.write_bytes(REDACTED)
        assert receipts_main(["show", str(path), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        rows = {m["seq"]: m for m in summary["memories"]}
        assert rows[2]["state"] == "withheld" and rows[2]["text"] is None and rows[0]["state"] == "cited"
        assert summary["question"]["state"] == "cited" and summary["answer"]["state"] == "cited"
        assert receipts_main(["show", str(path)]) == 0
        text = capsys.readouterr().out
        assert "Lisbon" not in text and "[withheld from this copy" in text


# ------------------------------------------------------------------ the engine writes format 2; erasure
@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def turned(tmp_path: Path) -> tuple[Any, Any, Path]:
    from chat.engine import Engine
    from chat.llm import LLM

    engine = Engine(tmp_path, llm=LLM(api_key=""))
    engine.remember("alice", "my parrot is called Zanzibar and he whistles")
    engine.remember("alice", "I keep the spare key under the blue pot")
    turn = engine.turn("alice", "what is my parrot called?", k=8)
    return engine, turn, tmp_path


class TestTheEngine:
    def test_the_engine_writes_format_2_and_it_verifies_with_the_ledger_every_row_passing(self, turned: tuple[Any, Any, Path]) -> None:
        engine, turn, data = turned
        raw = turn.receipt_path.read_bytes()
        assert receipts.receipt_format(raw) == 2 and turn.envelope["disclosures"]
        assert raw == dump_file(turn.envelope)
        report = verify_bytes(raw, trusted=[engine.key.public_key], data_dir=data)
        assert report.verdict == "verified" and all(c.status == PASS for c in report.checks), [c.to_dict() for c in report.checks if c.status != PASS]
        assert any("Zanzibar" in m["event"]["text"] for m in turn.body["memories"])  # Turn.body: what the receipt says
        assert b"Zanzibar" not in parse_receipt(raw).envelope.payload  # ...but the signature covers only the commitment

    def test_a_redacted_stored_receipt_says_withheld_while_the_ledger_still_holds_the_memory(self, turned: tuple[Any, Any, Path]) -> None:
        engine, turn, data = turned
        raw = turn.receipt_path.read_bytes()
        seq = next(m["event"]["seq"] for m in turn.body["memories"] if "Zanzibar" in m["event"]["text"])
        copy_ = receipts.redact(raw, [seq, turn.assistant_event.seq])  # the stand-in's answer quotes the memory
        assert b"Zanzibar" not in copy_
        report = verify_bytes(copy_, trusted=[engine.key.public_key], data_dir=data)
        name = receipts.cited_seqs(raw)[seq]
        assert report.verdict == "verified" and statuses(report)[f"{name}.content"] == WITHHELD
        assert statuses(report)["response.content"] == WITHHELD and statuses(report)["response.hash"] == WITHHELD
        assert statuses(report)["ledger.events"] == PASS and statuses(report)["ledger.response"] == PASS

    def test_after_erasure_a_redacted_receipt_says_erased_and_every_other_check_still_passes(self, turned: tuple[Any, Any, Path]) -> None:
        from receipts.verify import ERASED
        from storage.files.ledger.store import Ledger

        engine, turn, data = turned
        raw = turn.receipt_path.read_bytes()
        seqs = receipts.cited_seqs(raw)
        memory = next(m["event"]["seq"] for m in turn.body["memories"] if "Zanzibar" in m["event"]["text"])
        answer = turn.assistant_event.seq
        Ledger(data).erase("alice", [memory, answer], reason="test")
        redacted = receipts.redact(raw, [memory, answer])
        assert b"Zanzibar" not in redacted
        report = verify_bytes(redacted, trusted=[engine.key.public_key], data_dir=data, full=True)
        st_ = statuses(report)
        assert report.verdict == "verified" and not report.failed, [c.to_dict() for c in report.failed]
        assert st_[f"{seqs[memory]}.content"] == ERASED and st_["response.content"] == ERASED
        assert st_["response.hash"] == ERASED and st_["ledger.response"] == ERASED
        assert all(st_[n] == PASS for n in ("ledger.events", "ledger.chain", "ledger.root", "ledger.consistency"))
        assert st_["prompt.hash"] == NOT_VERIFIABLE and "erased" in next(c.message for c in report.checks if c.name == "prompt.hash")
        groups = {g.key: g for g in report.groups()}
        assert groups[seqs[memory]].status == ERASED and "was erased" in groups[seqs[memory]].sentence
        summary = __import__("receipts.show", fromlist=["summarize"]).summarize(parse_receipt(redacted).body, erased=[memory, answer])
        assert {m["seq"]: m["state"] for m in summary["memories"]}[memory] == "erased" and summary["answer"]["text"] is None
        # the visitor's own copy, never redacted, still opens every commitment: its texts pass
        whole = verify_bytes(raw, trusted=[engine.key.public_key], data_dir=data)
        assert whole.verdict == "verified" and statuses(whole)[f"{seqs[memory]}.content"] == PASS
        assert statuses(whole)["ledger.response"] == ERASED  # the ledger no longer holds the answer's text

    def test_format_1_is_still_written_on_request_and_cannot_be_redacted(self, tmp_path: Path) -> None:
        from chat.engine import Engine
        from chat.llm import LLM

        engine = Engine(tmp_path, llm=LLM(api_key=""), receipt_format=1)
        engine.remember("bob", "the boat is moored at pier nine")
        raw = engine.turn("bob", "where is the boat?").receipt_path.read_bytes()
        assert receipts.receipt_format(raw) == 1
        assert verify_bytes(raw, trusted=[engine.key.public_key], data_dir=tmp_path).verdict == "verified"
        with pytest.raises(receipts.RedactError):
            receipts.redact(raw, [0])
        with pytest.raises(ValueError, match="not a known receipt format"):
            Engine(tmp_path, llm=LLM(api_key=""), receipt_format=3)

    def test_the_chat_stamps_of_a_redacted_stored_receipt_show_withheld_not_an_error(self, turned: tuple[Any, Any, Path]) -> None:
        from webui import render

        _engine, turn, _data = turned
        raw = turn.receipt_path.read_bytes()
        seqs = [m["event"]["seq"] for m in turn.body["memories"]]
        stamps = render.stamps_from_body(parse_receipt(receipts.redact(raw, seqs)).body)
        assert [s.text for s in stamps.memories] == ["[withheld]"] * len(seqs)
        assert "Zanzibar" not in render.stamps_markdown(stamps)


class TestSize:
    @staticmethod
    def _event(seq: int, text: str, meta: dict[str, Any], role: str = "user") -> Any:
        from ledger.event import GENESIS, make_event

        return make_event(
            session="s", seq=seq, prev=GENESIS, role=role, text=text, meta=meta, ts="2026-01-02T03:04:05.000000Z",
            event_id=f"evt_{seq:032x}", salt=bytes(32),
        )

    @pytest.mark.parametrize("shape", ["escaped-text-and-deep-meta", "meta-of-many-small-items-indented-deep"])
    def test_as_many_memories_as_citable_counts_fit_in_the_file_and_one_more_would_not(self, shape: str) -> None:
        from ledger.event import MAX_META_BYTES, MAX_TEXT_BYTES
        from receipts import body as rbody

        if shape == "escaped-text-and-deep-meta":
            meta: Any = "x"
            for _ in range(31):
                meta = {"a": meta}
            meta = {"a": meta, "pad": "y" * (MAX_META_BYTES - 400)}
        else:  # json.dumps(indent=2) puts each item on its own line, indented to its depth
            items: Any = [0] * ((MAX_META_BYTES - 200) // 2)
            for _ in range(20):
                items = [items]
            meta = {"a": items}
        text = "zebra " + "\x01" * (MAX_TEXT_BYTES - 6)
        mems = [self._event(i, text, meta) for i in range(rbody.MAX_MEMORIES)]
        query = self._event(60, "q", {})
        n = rbody.citable(query, mems, 2)
        assert 1 <= n < rbody.MAX_MEMORIES
        answer = self._event(61, "\x01" * MAX_TEXT_BYTES, {"kind": "chat", "receipt_id": "rcpt_" + "0" * 32}, "assistant")
        key = SigningKey.from_seed(bytes(32))
        cp = rbody.sign_checkpoint(session="s", tree_size=62, root=bytes(32), chain_head=answer.chain, issued_at=answer.ts, key=key)

        def size(k: int) -> int:
            body = rbody.build_body(
                receipt_id="rcpt_" + "0" * 32, issued_at=answer.ts, session="s", k=50, retrieval="r", query=query,
                query_proof=[bytes(32)] * 6, memories=[(m, [bytes(32)] * 6) for m in mems[:k]], response=answer,
                response_proof=[bytes(32)] * 6, provider="offline", model="m", fallback_reason="x" * 2000,
                template="mre-prompt/v1", prompt_sha256="0" * 64, checkpoint=cp, receipt_format=2,
            )
            return len(rbody.dump_file(rbody.sign_receipt(body, key, rbody.disclosures_for([query, *mems[:k], answer]))))

        assert size(n) <= rbody.MAX_RECEIPT_BYTES
        assert size(n + 1) > rbody.MAX_RECEIPT_BYTES  # with an answer of the largest size the reserve is not slack
