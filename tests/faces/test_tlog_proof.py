"""A tlog-proof per memory (receipts/tlog_proof.py; docs/FORMAT.md §22), and the commands around it:
`receipts checkpoint --note`, `receipts pubkey --vkey`, `receipts tlog-proof`, `receipts verify-proof`."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from chat.engine import Engine
from cli import prog_receipts as receipts_cli
from receipts import note as N
from receipts import tlog_proof as T
from receipts.body import parse_receipt
from receipts.keys import SigningKey
from receipts.report import FAIL, NOT_VERIFIABLE, PASS

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())  # the receipt vector's key
V = N.verifier(KEY.public_key)
RECEIPT = parse_receipt((VECTORS / "receipt_v2.json").read_bytes())
LINES = (VECTORS / "receipt_v1_ledger.jsonl").read_text().splitlines()


def _check(proof: str, seq: int, trusted: list[N.NoteVerifier] | None = None) -> T.TlogProofReport:
    return T.check_tlog_proof(T.parse_tlog_proof(proof), T.parse_event_line(LINES[seq]), [V] if trusted is None else trusted)


def _accepted(raw: bytes, line: str) -> bool:
    try:
        return T.check_tlog_proof(T.parse_tlog_proof(raw), T.parse_event_line(line), [V]).verdict == "verified"
    except T.MalformedTlogProof:
        return False


class TestMaking:
    @pytest.mark.parametrize("seq", [0, 2, 4, 5])  # memory#1, memory#2, the query, the answer
    def test_each_cited_event_gets_a_proof_that_verifies(self, seq: int) -> None:
        report = _check(T.tlog_proof_for(RECEIPT, seq, KEY), seq)
        assert report.verdict == "verified" and [c.status for c in report.checks] == [PASS] * 6

    def test_a_format_1_receipt_gives_the_same_proof(self) -> None:
        v1 = parse_receipt((VECTORS / "receipt_v1.json").read_bytes())
        assert T.tlog_proof_for(v1, 2, KEY) == T.tlog_proof_for(RECEIPT, 2, KEY)

    def test_the_proof_round_trips_through_its_parser(self) -> None:
        raw = T.tlog_proof_for(RECEIPT, 2, KEY)
        assert T.parse_tlog_proof(raw).encode() == raw

    def test_the_proofs_hashes_are_the_receipts_inclusion_path(self) -> None:
        proof = T.parse_tlog_proof(T.tlog_proof_for(RECEIPT, 2, KEY))
        memory2 = RECEIPT.signed_body["memories"][1]
        assert proof.index == 2 and [h.hex() for h in proof.hashes] == memory2["proof"]

    def test_a_seq_the_receipt_does_not_cite_gets_no_proof(self) -> None:
        with pytest.raises(T.NoProof, match="cites no event at seq 1"):
            T.tlog_proof_for(RECEIPT, 1, KEY)

    def test_another_key_never_signs_the_receipts_checkpoint(self) -> None:
        with pytest.raises(N.NotSigned):
            T.tlog_proof_for(RECEIPT, 2, SigningKey.from_seed(bytes(32)))


class TestChecking:
    def test_another_events_line_fails_the_index_and_the_inclusion(self) -> None:
        report = _check(T.tlog_proof_for(RECEIPT, 2, KEY), 3)
        assert report.verdict == "failed" and {c.name for c in report.failed} == {"event.index", "proof.inclusion"}

    def test_without_a_verifier_key_it_is_unverified_not_verified(self) -> None:
        report = _check(T.tlog_proof_for(RECEIPT, 2, KEY), 2, trusted=[])
        assert report.verdict == "unverified"
        assert report.status_of("note.signature") == NOT_VERIFIABLE and report.status_of("proof.inclusion") == PASS

    def test_a_proof_signed_by_an_untrusted_key_fails_the_signature(self) -> None:
        report = _check(T.tlog_proof_for(RECEIPT, 2, KEY), 2, trusted=[N.verifier(SigningKey.from_seed(bytes(32)).public_key)])
        assert report.status_of("note.signature") == FAIL and report.verdict == "failed"

    def test_a_changed_event_text_fails_the_digest(self) -> None:
        line = LINES[2].replace("Lisbon", "Lisboa")
        report = T.check_tlog_proof(T.parse_tlog_proof(T.tlog_proof_for(RECEIPT, 2, KEY)), T.parse_event_line(line), [V])
        assert report.status_of("event.digest") == FAIL

    def test_an_erased_line_is_evidence_as_good_as_the_full_one(self) -> None:
        erased = (VECTORS / "receipt_v2_ledger_erased.jsonl").read_text().splitlines()[2]
        assert '"commit"' in erased
        report = T.check_tlog_proof(T.parse_tlog_proof(T.tlog_proof_for(RECEIPT, 2, KEY)), T.parse_event_line(erased), [V])
        assert report.verdict == "verified"

    def test_every_byte_flipped_of_a_proof_is_refused(self) -> None:
        """Every byte (all of them, no sampling), each with its lowest bit flipped: none still verifies."""
        raw = T.tlog_proof_for(RECEIPT, 2, KEY).encode()
        assert _accepted(raw, LINES[2])
        slipped = [i for i in range(len(raw)) if _accepted(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :], LINES[2])]
        assert slipped == []

    def test_every_field_of_the_event_line_replaced_by_a_wrong_type_is_refused_never_raised(self) -> None:
        """Each of the line's 12 fields set to null, a number, a list, an object, an empty string: a parse error or
        a failed report, never an exception, never a pass."""
        import json

        proof = T.parse_tlog_proof(T.tlog_proof_for(RECEIPT, 2, KEY))
        good = json.loads(LINES[2])
        slipped = []
        for field in good:
            for wrong in (None, 7, [], {}, "", 2**60):
                line = json.dumps({**good, field: wrong})
                try:
                    report = T.check_tlog_proof(proof, T.parse_event_line(line), [V])
                except T.MalformedTlogProof:
                    continue
                if report.verdict != "failed":
                    slipped.append((field, wrong))
        assert slipped == []

    def test_the_report_has_no_truth_value(self) -> None:
        with pytest.raises(TypeError):
            bool(_check(T.tlog_proof_for(RECEIPT, 2, KEY), 2))

    @pytest.mark.parametrize(
        "raw",
        ["", "c2sp.org/tlog-proof@v2\nindex 0\n\nx\n", "c2sp.org/tlog-proof@v1\nindex 01\n\nx\n", "c2sp.org/tlog-proof@v1\n\nx\n",
         "c2sp.org/tlog-proof@v1\nindex 0\nAAAA\n\nx\n", "c2sp.org/tlog-proof@v1\nindex 0\n", "c2sp.org/tlog-proof@v1\nextra !!\nindex 0\n\nx\n"],
    )
    def test_a_malformed_proof_is_a_parse_error(self, raw: str) -> None:
        with pytest.raises(T.MalformedTlogProof):
            T.parse_tlog_proof(raw)

    @pytest.mark.parametrize("line", ["", "[]", '{"seq": 1}', LINES[2][:-1], LINES[2].replace('"seq":2', '"seq":-2')])
    def test_a_malformed_event_line_is_a_parse_error(self, line: str) -> None:
        with pytest.raises(T.MalformedTlogProof):
            T.parse_event_line(line)


# --- the commands ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tlog")
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        engine = Engine(root / "data")
        engine.remember("alice", "a red kayak for Sunday")
        engine.remember("alice", "my sister lives in Lyon")
        turn = engine.turn("alice", "which kayak do I have?", k=2)
        engine.index.close()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    return {"root": root, "data": root / "data", "receipt": turn.receipt_path}


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = receipts_cli.main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def _one_line_error(result: tuple[int, str, str]) -> None:
    code, out, err = result
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err


def test_the_checkpoint_note_verifies_under_the_printed_vkey_and_matches_the_json(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    import json

    code, vkey, _ = _run(capsys, "pubkey", made["data"], "--vkey")
    assert code == 0
    code, raw, _ = _run(capsys, "checkpoint", made["data"], "alice", "--note")
    assert code == 0
    note = N.parse_note(raw)
    assert N.signed_by(note, N.parse_vkey(vkey)) is True
    cp = json.loads(_run(capsys, "checkpoint", made["data"], "alice")[1])["body"]
    text = N.parse_checkpoint_text(note.text)
    assert (text.origin, text.size, text.root.hex(), text.chain_head) == (N.parse_vkey(vkey).name + "/alice", cp["tree_size"], cp["root"], cp["chain_head"])


def test_without_the_flags_pubkey_and_checkpoint_print_what_they_did(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "pubkey", made["data"])[1].startswith('{"type": "ed25519"')
    assert _run(capsys, "checkpoint", made["data"], "alice")[1].startswith("{\n")


def test_a_memorys_tlog_proof_verifies_with_its_ledger_line(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    seq = parse_receipt(made["receipt"].read_bytes()).signed_body["memories"][0]["event"]["seq"]
    code, proof, err = _run(capsys, "tlog-proof", made["receipt"], seq)
    assert code == 0 and proof.startswith("c2sp.org/tlog-proof@v1\n") and f"seq {seq}" in err
    (made["root"] / "m.tlog-proof").write_text(proof)
    line = (made["data"] / "sessions" / "alice" / "events.jsonl").read_text().splitlines()[seq]
    (made["root"] / "ev.jsonl").write_text(line + "\n")
    vkey = _run(capsys, "pubkey", made["data"], "--vkey")[1].strip()
    code, out, _ = _run(capsys, "verify-proof", made["root"] / "m.tlog-proof", made["root"] / "ev.jsonl", "--vkey", vkey)
    assert code == 0 and "verdict: VERIFIED" in out
    assert _run(capsys, "verify-proof", made["root"] / "m.tlog-proof", made["root"] / "ev.jsonl")[0] == 3


def test_a_copied_receipt_needs_the_data_directory_and_then_gives_the_same_proof(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    copy = made["root"] / "copy.json"
    shutil.copy(made["receipt"], copy)
    seq = parse_receipt(copy.read_bytes()).signed_body["response"]["event"]["seq"]
    _one_line_error(_run(capsys, "tlog-proof", copy, seq))
    assert _run(capsys, "tlog-proof", copy, seq, "--data", made["data"])[1] == _run(capsys, "tlog-proof", made["receipt"], seq)[1]


@pytest.mark.parametrize("seq", ["x", "-1", "", "1.0", "99", "0x2", " 2"])
def test_a_bad_seq_is_one_line_exit_2(made: dict[str, Path], capsys: pytest.CaptureFixture[str], seq: str) -> None:
    _one_line_error(_run(capsys, "tlog-proof", made["receipt"], seq))


@pytest.mark.parametrize("which", ["directory", "empty", "missing", "not a receipt"])
def test_a_bad_receipt_argument_is_one_line_exit_2(made: dict[str, Path], capsys: pytest.CaptureFixture[str], which: str) -> None:
    junk = made["root"] / "junk.json"
    junk.write_text('{"payloadType": "x"}')
    arg = {"directory": made["root"], "empty": "", "missing": made["root"] / "nope.json", "not a receipt": junk}[which]
    _one_line_error(_run(capsys, "tlog-proof", arg, "0"))


def test_a_receipt_of_another_key_is_refused_in_one_line(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(_run(capsys, "tlog-proof", VECTORS / "receipt_v2.json", "2", "--data", made["data"]))


def test_verify_proof_refuses_bad_inputs_in_one_line(made: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    proof = made["root"] / "v.tlog-proof"
    proof.write_text(T.tlog_proof_for(RECEIPT, 2, KEY))
    event = made["root"] / "v.jsonl"
    event.write_text(LINES[2] + "\n")
    assert _run(capsys, "verify-proof", proof, event, "--vkey", V.vkey())[0] == 0
    _one_line_error(_run(capsys, "verify-proof", proof, event, "--vkey", "not+a+key"))
    _one_line_error(_run(capsys, "verify-proof", event, event, "--vkey", V.vkey()))
    _one_line_error(_run(capsys, "verify-proof", proof, proof, "--vkey", V.vkey()))
    _one_line_error(_run(capsys, "verify-proof", made["root"], event))
