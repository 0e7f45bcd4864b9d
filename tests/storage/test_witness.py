"""Asking witnesses to cosign (storage/witness.py) and `receipts cosign` / `receipts verify-note`, against a witness written
from c2sp.org/tlog-witness (tests/witness_support.py) on 127.0.0.1: the first cosignature, the next one after the
ledger grew (the 409 round trip and a consistency proof the witness checks), a rewritten history the witness refuses,
and every way a witness can fail the caller, each one line and never a stop."""

from __future__ import annotations

import base64
import os
import socket
from pathlib import Path

import pytest

from chat.engine import Engine
from cli import prog_receipts as receipts_cli
from receipts.cosignature import check_cosigned, parse_policy, witness_key
from receipts.keys import SigningKey
from receipts.merkle import consistency_proof, leaf_hash, root_from_leaf_hashes
from receipts.note import CheckpointText, parse_note, sign_note, verifier
from storage.witness import ask, request_body

from ..witness_support import Witness, serving

LOG = SigningKey.from_seed(bytes([7]) * 32)
LEAVES = [leaf_hash(bytes([i]) * 32) for i in range(40)]
ORIGIN = f"{verifier(LOG.public_key).name}/s"


def note_of(size: int, leaves: list[bytes] = LEAVES) -> tuple[CheckpointText, str]:
    cp = CheckpointText(ORIGIN, size, root_from_leaf_hashes(leaves[:size]))
    return cp, sign_note(cp.encode(), LOG)


def witness(mode: str = "honest") -> Witness:
    return Witness("w1.example/w", SigningKey.from_seed(bytes([8]) * 32), {ORIGIN: verifier(LOG.public_key)}, mode=mode)


def proof_to(size: int, leaves: list[bytes] = LEAVES) -> object:
    return lambda m: consistency_proof(leaves[:size], m, size)


class TestTheProtocol:
    def test_the_request_body_is_old_size_proof_lines_blank_line_note(self) -> None:
        _, n = note_of(3)
        body = request_body(parse_note(n), 2, [bytes(32)])
        assert body == b"old 2\n" + b"A" * 43 + b"=\n\n" + n.encode()

    def test_a_first_checkpoint_is_cosigned_from_the_empty_tree(self) -> None:
        with serving(witness()) as w:
            _, n = note_of(10)
            got = ask(parse_note(n), 10, w.public, proof_to(10))  # type: ignore[arg-type]
        assert got.ok and got.sizes == (0,), got.problem
        assert w.state[ORIGIN][0] == 10

    def test_a_grown_ledger_is_cosigned_after_the_witness_says_its_size(self) -> None:
        with serving(witness()) as w:
            _, first = note_of(10)
            assert ask(parse_note(first), 10, w.public, proof_to(10)).ok  # type: ignore[arg-type]
            _, n = note_of(33)
            got = ask(parse_note(n), 33, w.public, proof_to(33))  # type: ignore[arg-type]
        assert got.ok and got.sizes == (0, 10), got.problem  # 409 with its size 10, then a proof from 10
        assert w.state[ORIGIN][0] == 33

    def test_a_rewritten_history_is_refused_by_the_witness(self) -> None:
        """The log re-signs a tree whose early leaves differ: no consistency proof from what the witness cosigned
        leads to it, so the witness answers 422 and nothing is cosigned."""
        other = [leaf_hash(b"\xff" * 32), *LEAVES[1:]]
        with serving(witness()) as w:
            _, first = note_of(10)
            assert ask(parse_note(first), 10, w.public, proof_to(10)).ok  # type: ignore[arg-type]
            _, n = note_of(20, other)
            got = ask(parse_note(n), 20, w.public, proof_to(20, other))  # type: ignore[arg-type]
        assert not got.ok and got.problem is not None and got.problem.startswith("HTTP 422")

    def test_a_smaller_tree_than_the_witness_cosigned_is_named_a_rollback(self) -> None:
        with serving(witness()) as w:
            _, big = note_of(30)
            assert ask(parse_note(big), 30, w.public, proof_to(30)).ok  # type: ignore[arg-type]
            _, small = note_of(12)
            got = ask(parse_note(small), 12, w.public, proof_to(12))  # type: ignore[arg-type]
        assert not got.ok and "rollback or a fork" in (got.problem or "")


class TestAWitnessNeverStopsTheCaller:
    def test_a_witness_that_is_down_is_one_line(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        down = witness_key(SigningKey.generate().public_key, "down.example", url=f"http://127.0.0.1:{port}/w")
        _, n = note_of(5)
        got = ask(parse_note(n), 5, down, proof_to(5), timeout=2)  # type: ignore[arg-type]
        assert not got.ok and got.problem is not None and got.problem.startswith("unreachable")

    def test_a_slow_witness_times_out(self) -> None:
        with serving(witness("slow")) as w:
            _, n = note_of(5)
            got = ask(parse_note(n), 5, w.public, proof_to(5), timeout=0.5)  # type: ignore[arg-type]
        assert not got.ok and "unreachable" in (got.problem or "")

    @pytest.mark.parametrize(("mode", "said"), [("garbage", "not signature lines"), ("wrong-key", "no cosignature by this witness's key"), ("bad-sig", "does not verify")])
    def test_an_answer_that_is_not_its_cosignature_is_not_kept(self, mode: str, said: str) -> None:
        with serving(witness(mode)) as w:
            _, n = note_of(5)
            got = ask(parse_note(n), 5, w.public, proof_to(5))  # type: ignore[arg-type]
        assert not got.ok and got.cosignatures == () and said in (got.problem or "")

    def test_an_unknown_log_is_the_witness_404(self) -> None:
        w0 = witness()
        w0.logs = {}
        with serving(w0) as w:
            _, n = note_of(5)
            got = ask(parse_note(n), 5, w.public, proof_to(5))  # type: ignore[arg-type]
        assert not got.ok and (got.problem or "").startswith("HTTP 404")

    def test_no_url_is_said_not_tried(self) -> None:
        _, n = note_of(5)
        got = ask(parse_note(n), 5, witness_key(SigningKey.generate().public_key, "x.example"), proof_to(5))  # type: ignore[arg-type]
        assert got.problem == "no http(s) submission URL in the policy"


# --- the commands, on a data directory the engine wrote --------------------------------------------------------------
@pytest.fixture
def data(tmp_path: Path) -> Path:
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        engine = Engine(tmp_path / "data")
        engine.remember("alice", "a red kayak for Sunday")
        engine.turn("alice", "which kayak do I have?", k=2)
        engine.index.close()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    return tmp_path / "data"


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = receipts_cli.main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def _policy(tmp_path: Path, data: Path, w: Witness, capsys: pytest.CaptureFixture[str], quorum: str = "w1") -> Path:
    code, vkey, _ = _run(capsys, "pubkey", data, "--vkey")
    assert code == 0
    p = tmp_path / "policy"
    p.write_text(f"log {vkey.strip()}\nwitness w1 {w.public.vkey()} {w.url}\nquorum {quorum}\n")
    return p


def test_cosign_prints_a_note_that_verify_note_accepts_under_the_policy(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w0 = witness()
    with serving(w0) as w:
        _, vkey, _ = _run(capsys, "pubkey", data, "--vkey")
        w.logs = {f"{vkey.split('+')[0]}/alice": parse_vkey_line(vkey)}
        policy = _policy(tmp_path, data, w, capsys)
        code, out, err = _run(capsys, "cosign", data, "alice", "--policy", policy)
        assert code == 0, err
        assert "witness w1: cosigned" in err
        (tmp_path / "cp.note").write_text(out)
        code, text, _ = _run(capsys, "verify-note", tmp_path / "cp.note", "--policy", policy)
        assert code == 0 and "VERIFIED" in text
        report = check_cosigned(out, parse_policy(policy.read_bytes()))
        assert report.status_of("witness.w1") == "pass" and report.status_of("checkpoint.origin") == "pass"
        # the same note without its cosignature: the quorum fails, exit 1
        bare = out[: out.index("\u2014 w1.example")]
        (tmp_path / "bare.note").write_text(bare)
        code, text, _ = _run(capsys, "verify-note", tmp_path / "bare.note", "--policy", policy)
        assert code == 1 and "quorum does not hold" in text


def test_cosign_with_the_witness_down_still_prints_the_note_and_exits_1(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serving(witness()) as w:
        policy = _policy(tmp_path, data, w, capsys)
    code, out, err = _run(capsys, "cosign", data, "alice", "--policy", policy, "--timeout", "2")
    assert code == 1 and out.count("\u2014 ") == 1  # the log's own signature only
    assert "witness w1: no cosignature (unreachable" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ("cosign", "{data}", "alice", "--policy", "{missing}"),
        ("cosign", "{data}", "../x", "--policy", "{policy}"),
        ("cosign", "{data}", "nobody", "--policy", "{policy}"),
        ("verify-note", "{missing}", "--policy", "{policy}"),
        ("verify-note", "{policy}", "--policy", "{policy}"),
        ("verify-note", "{policy}", "--policy", "{bad}"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    policy = tmp_path / "ok.policy"
    policy.write_text("quorum none\n")
    bad = tmp_path / "bad.policy"
    bad.write_text("quorum\n")
    paths = {"data": data, "missing": tmp_path / "nope", "policy": policy, "bad": bad}
    code, out, err = _run(capsys, *(a.format(**paths) for a in argv))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err


def parse_vkey_line(line: str):  # type: ignore[no-untyped-def]
    from receipts.note import parse_vkey

    return parse_vkey(line.strip())


def test_verify_note_with_a_receipt_says_whether_the_witnessed_tree_head_is_that_receipts(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cosigned checkpoint of the session as the turn left it is the receipt's own checkpoint (its tree size is the
    answer's seq + 1): `--receipt` passes. After another turn the session's latest checkpoint is a later one: the
    same receipt's row fails, naming both sizes."""
    receipt = sorted((data / "sessions" / "alice" / "receipts").glob("rcpt_*.json"))[0]
    with serving(witness()) as w:
        _, vkey, _ = _run(capsys, "pubkey", data, "--vkey")
        w.logs = {f"{vkey.split('+')[0]}/alice": parse_vkey_line(vkey)}
        policy = _policy(tmp_path, data, w, capsys)
        code, out, err = _run(capsys, "cosign", data, "alice", "--policy", policy)
        assert code == 0, err
        (tmp_path / "cp.note").write_text(out)
        code, text, _ = _run(capsys, "verify-note", tmp_path / "cp.note", "--policy", policy, "--receipt", receipt)
        assert code == 0 and "the note is the receipt's checkpoint" in text, text
        saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
        try:
            engine = Engine(data)
            engine.turn("alice", "and my sister?", k=2)
            engine.index.close()
        finally:
            os.environ.update({k: v for k, v in saved.items() if v is not None})
        code, out, err = _run(capsys, "cosign", data, "alice", "--policy", policy)
        assert code == 0, err
        (tmp_path / "later.note").write_text(out)
        code, text, _ = _run(capsys, "verify-note", tmp_path / "later.note", "--policy", policy, "--receipt", receipt)
        assert code == 1 and "the note is not the receipt's checkpoint" in text, text
    code, out, err = _run(capsys, "verify-note", tmp_path / "cp.note", "--policy", policy, "--receipt", tmp_path / "cp.note")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


# --- witnessed turns: the receipt carries the cosignatures (docs/FORMAT.md §22, format 2 `witnesses`) ----------------
import copy  # noqa: E402

from receipts import body as rbody  # noqa: E402
from receipts.body import MalformedReceipt, parse_receipt  # noqa: E402
from receipts.cosignature import Policy  # noqa: E402
from receipts.verify import verify_receipt  # noqa: E402
from storage.local import load_existing  # noqa: E402


def _witnessed_engine(data: Path, policy: Policy) -> Engine:
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        engine = Engine(data)
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    engine.witnesses = policy
    engine.witness_timeout = 2.0
    return engine


def _resigned(raw: bytes, key: SigningKey, edit: object) -> bytes:
    """The receipt re-signed by its own key after `edit(body)`: a producer's receipt whose member is what we say."""
    r = parse_receipt(raw)
    body = copy.deepcopy(r.signed_body)
    edit(body)  # type: ignore[operator]
    return rbody.dump_file(rbody.sign_receipt(body, key, list(r.disclosures.values())))


def test_a_witnessed_turn_carries_the_cosignature_and_verify_checks_it_under_the_policy(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a policy, each turn's checkpoint is cosigned before its receipt is signed; `receipts verify --policy`
    passes the witness and the quorum; without --policy the carried cosignature is said, not judged; the second turn
    sends the size the witness cosigned last (one request, no 409)."""
    with serving(witness()) as w:
        _, vkey, _ = _run(capsys, "pubkey", data, "--vkey")
        w.logs = {f"{vkey.split('+')[0]}/alice": parse_vkey_line(vkey)}
        policy_file = _policy(tmp_path, data, w, capsys)
        engine = _witnessed_engine(data, parse_policy(policy_file.read_bytes()))
        first = engine.turn("alice", "which kayak do I have?", k=2)
        sent = len(w.requests)
        second = engine.turn("alice", "and on Sunday?", k=2)
        assert len(w.requests) == sent + 1  # the size it cosigned last was sent: no 409 round trip
        engine.index.close()
    for turn in (first, second):
        body = parse_receipt(Path(turn.receipt_path).read_bytes()).signed_body
        assert [c["name"] for c in body["witnesses"]["cosignatures"]] == ["w1.example/w"]
    pub = tmp_path / "pub"
    code, text, _ = _run(capsys, "pubkey", data)
    pub.write_text(text)
    code, text, _ = _run(capsys, "verify", second.receipt_path, "--trust", pub, "--policy", policy_file, "--rows")
    assert code == 0 and "witness.w1" in text and "witness.quorum" in text and "FAIL" not in text, text
    code, text, _ = _run(capsys, "verify", second.receipt_path, "--trust", pub, "--rows")
    assert code == 0 and "give --policy FILE" in text


def test_a_witness_down_never_stops_a_turn_and_the_receipt_names_no_cosignature(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(witness()) as w:
        policy_file = _policy(tmp_path, data, w, capsys)
    engine = _witnessed_engine(data, parse_policy(policy_file.read_bytes()))  # its URL answers nothing now
    turn = engine.turn("alice", "which kayak do I have?", k=2)
    engine.index.close()
    assert "witnesses" not in parse_receipt(Path(turn.receipt_path).read_bytes()).signed_body
    code, text, _ = _run(capsys, "verify", turn.receipt_path, "--policy", policy_file, "--rows")
    assert code == 1 and "quorum does not hold" in text


def test_a_forged_or_misplaced_cosignature_fails_its_row(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Re-signed by the log's own key (a producer lying): a cosignature with one bit flipped fails `witness.w1`; the
    same cosignature moved onto another receipt's checkpoint fails too (it signed another tree head)."""
    with serving(witness()) as w:
        _, vkey, _ = _run(capsys, "pubkey", data, "--vkey")
        w.logs = {f"{vkey.split('+')[0]}/alice": parse_vkey_line(vkey)}
        policy = parse_policy(_policy(tmp_path, data, w, capsys).read_bytes())
        engine = _witnessed_engine(data, policy)
        one = Path(engine.turn("alice", "which kayak do I have?", k=2).receipt_path).read_bytes()
        engine.witnesses = None
        two = Path(engine.turn("alice", "and on Sunday?", k=2).receipt_path).read_bytes()
        engine.index.close()
    key = load_existing(data)
    assert key is not None
    trusted = [key.public_key]
    assert verify_receipt(parse_receipt(one), trusted, policy=policy).status_of("witness.w1") == "pass"

    def flip(body: dict) -> None:  # type: ignore[type-arg]
        c = body["witnesses"]["cosignatures"][0]
        raw = bytearray(base64.b64decode(c["sig"]))
        raw[-1] ^= 1
        c["sig"] = base64.b64encode(bytes(raw)).decode()

    forged = verify_receipt(parse_receipt(_resigned(one, key, flip)), trusted, policy=policy)
    assert forged.status_of("witness.w1") == "fail" and forged.verdict == "failed"
    carried = parse_receipt(one).signed_body["witnesses"]
    moved = verify_receipt(parse_receipt(_resigned(two, key, lambda b: b.update(witnesses=carried))), trusted, policy=policy)
    assert moved.status_of("witness.w1") == "fail" and moved.verdict == "failed"


@pytest.mark.parametrize(
    ("member", "said"),
    [
        ({"v": 2, "cosignatures": [{"name": "w", "sig": "A" * 102 + "=="}]}, "witnesses version"),
        ({"v": 1, "cosignatures": []}, "1 to 16"),
        ({"v": 1, "cosignatures": [{"name": "w", "sig": "short"}]}, "does not match"),
        ({"v": 1, "cosignatures": [{"name": "w x", "sig": "A" * 102 + "=="}]}, "does not match"),
        ({"v": 1, "cosignatures": [{"name": "w", "sig": "A" * 102 + "==", "extra": 1}]}, "unexpected"),
        ({"v": 1}, "witnesses"),
        ([], "witnesses"),
    ],
)
def test_a_malformed_witnesses_member_is_refused_at_parse_time(data: Path, member: object, said: str) -> None:
    raw = next((data / "sessions" / "alice" / "receipts").glob("rcpt_*.json")).read_bytes()
    key = load_existing(data)
    assert key is not None
    with pytest.raises(MalformedReceipt, match=said):
        parse_receipt(_resigned(raw, key, lambda b: b.update(witnesses=member)))


def test_a_bad_witness_policy_stops_the_app_and_chat_with_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.prog_chat import main as chat_main
    from webui.config import ConfigError, witness_policy

    assert witness_policy({}) is None
    with pytest.raises(ConfigError, match="WITNESS_POLICY=.*nope"):
        witness_policy({"WITNESS_POLICY": str(tmp_path / "nope")})
    bad = tmp_path / "bad.policy"
    bad.write_text("quorum nobody\n")
    with pytest.raises(ConfigError, match="line 1"):
        witness_policy({"WITNESS_POLICY": str(bad)})
    good = tmp_path / "good.policy"
    good.write_text("quorum none\n")
    assert witness_policy({"WITNESS_POLICY": str(good)}) is not None
    os.environ["WITNESS_POLICY"] = str(bad)
    try:
        code = chat_main([str(tmp_path / "fresh"), "alice", "hello", "--create"])
    finally:
        del os.environ["WITNESS_POLICY"]
    err = capsys.readouterr().err
    assert code == 2 and "bad.policy" in err and "line 1" in err and err.count("\n") == 1, err
    assert not (tmp_path / "fresh").exists()
