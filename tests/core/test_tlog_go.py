"""Checked by code nobody here wrote: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (Debian's
golang-golang-x-mod-dev) read our checkpoint notes, tlog-proofs and consistency proofs (docs/FORMAT.md §22).

tests/go/tlogcheck is built offline in GOPATH mode (GO111MODULE=off, GOPATH=/usr/share/gocode, GOPROXY=off);
the module is skipped, with one line, where `go` or Debian's x/mod source is absent (.ci/run installs both).
Every byte of each artefact is flipped (XOR 1, all of them, no sampling) and Go must refuse every mutant.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from receipts.body import sign_checkpoint
from receipts.keys import SigningKey
from receipts.merkle import consistency_proof, leaf_hash, root_from_leaf_hashes
from receipts.note import sign_checkpoint_note

TESTS = Path(__file__).resolve().parents[1]
VECTORS = TESTS / "vectors"
PROGRAM = TESTS / "go" / "tlogcheck"
GOPATH = Path("/usr/share/gocode")
XMOD = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb"
KEY = SigningKey.from_seed(hashlib.sha256(b"mre test vector signing key").digest())  # the receipt vector's
TS = "2026-01-02T03:04:05.000000Z"

if shutil.which("go") is None or not (XMOD / "note").is_dir() or not (XMOD / "tlog").is_dir():
    pytest.skip("go or Debian's golang.org/x/mod source is absent (apt-get install golang-go golang-golang-x-mod-dev)", allow_module_level=True)

LEDGER = [json.loads(line) for line in (VECTORS / "receipt_v1_ledger.jsonl").read_text().splitlines()]
LEAVES = [leaf_hash(bytes.fromhex(e["digest"])) for e in LEDGER]


@pytest.fixture(scope="module")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOCACHE": str(out / "cache"), "GOFLAGS": "", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    built = subprocess.run(["go", "build", "-o", str(out / "tlogcheck"), "."], cwd=PROGRAM, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr
    yield out / "tlogcheck"


def _go(binary: Path, *args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=60, check=False)


def _refused_mutants(binary: Path, tmp: Path, raw: bytes, argv: list[object], slot: int) -> list[int]:
    """Positions whose flipped byte Go still accepts (argv[slot] is replaced by the mutant's file)."""
    mutant = tmp / "mutant"
    slipped = []
    for i in range(len(raw)):
        mutant.write_bytes(raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :])
        args = list(argv)
        args[slot] = mutant
        if _go(binary, *args).returncode != 1:
            slipped.append(i)
    return slipped


def _checkpoint_note(size: int) -> str:
    cp = sign_checkpoint(session="vector-receipts", tree_size=size, root=root_from_leaf_hashes(LEAVES[:size]), chain_head=LEDGER[size - 1]["chain"], issued_at=TS, key=KEY)
    return sign_checkpoint_note(cp, KEY)


def _consistency_files(tmp: Path, m: int, n: int) -> tuple[Path, Path, Path]:
    old, new, proof = tmp / f"cp{m}", tmp / f"cp{n}", tmp / f"cons{m}-{n}"
    old.write_text(_checkpoint_note(m))
    new.write_text(_checkpoint_note(n))
    proof.write_text("".join(base64.b64encode(h).decode() + "\n" for h in consistency_proof(LEAVES, m, n)))
    return old, new, proof


def test_go_opens_our_checkpoint_note_with_our_verifier_key(tlogcheck: Path) -> None:
    done = _go(tlogcheck, "note", VECTORS / "note_v1_vkey.txt", VECTORS / "note_v1_checkpoint.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok: 3ba5875cba953c72/mre/vector-receipts size 6\n"


def test_go_checks_our_tlog_proofs_inclusion_under_our_checkpoint(tlogcheck: Path) -> None:
    done = _go(tlogcheck, "proof", VECTORS / "note_v1_vkey.txt", VECTORS / "note_v1_seq2.tlog-proof", LEDGER[2]["digest"])
    assert done.returncode == 0, done.stderr


def test_go_refuses_the_proof_for_another_events_leaf(tlogcheck: Path) -> None:
    done = _go(tlogcheck, "proof", VECTORS / "note_v1_vkey.txt", VECTORS / "note_v1_seq2.tlog-proof", LEDGER[3]["digest"])
    assert done.returncode == 1 and "inclusion" in done.stderr


@pytest.mark.parametrize(("m", "n"), [(1, 6), (3, 6), (4, 6), (5, 6), (6, 6), (2, 5)])
def test_go_checks_a_consistency_proof_between_two_of_our_checkpoints(tlogcheck: Path, tmp_path: Path, m: int, n: int) -> None:
    done = _go(tlogcheck, "consistency", VECTORS / "note_v1_vkey.txt", *_consistency_files(tmp_path, m, n))
    assert done.returncode == 0, done.stderr


def test_every_byte_flipped_of_our_checkpoint_note_is_refused_by_go(tlogcheck: Path, tmp_path: Path) -> None:
    raw = (VECTORS / "note_v1_checkpoint.txt").read_bytes()
    argv: list[object] = ["note", VECTORS / "note_v1_vkey.txt", None]
    assert _refused_mutants(tlogcheck, tmp_path, raw, argv, 2) == []


def test_every_byte_flipped_of_our_tlog_proof_is_refused_by_go(tlogcheck: Path, tmp_path: Path) -> None:
    raw = (VECTORS / "note_v1_seq2.tlog-proof").read_bytes()
    argv: list[object] = ["proof", VECTORS / "note_v1_vkey.txt", None, LEDGER[2]["digest"]]
    assert _refused_mutants(tlogcheck, tmp_path, raw, argv, 2) == []


def test_every_byte_flipped_of_a_consistency_proof_is_refused_by_go(tlogcheck: Path, tmp_path: Path) -> None:
    old, new, proof = _consistency_files(tmp_path, 3, 6)
    argv: list[object] = ["consistency", VECTORS / "note_v1_vkey.txt", old, new, None]
    assert _refused_mutants(tlogcheck, tmp_path, proof.read_bytes(), argv, 4) == []


def test_go_refuses_a_consistency_proof_between_checkpoints_of_two_histories(tlogcheck: Path, tmp_path: Path) -> None:
    old, new, proof = _consistency_files(tmp_path, 3, 6)
    forked = LEAVES[:1] + [leaf_hash(bytes(32))] + LEAVES[2:]
    cp = sign_checkpoint(session="vector-receipts", tree_size=3, root=root_from_leaf_hashes(forked[:3]), chain_head=LEDGER[2]["chain"], issued_at=TS, key=KEY)
    old.write_text(sign_checkpoint_note(cp, KEY))
    done = _go(tlogcheck, "consistency", VECTORS / "note_v1_vkey.txt", old, new, proof)
    assert done.returncode == 1 and "consistency" in done.stderr


def test_go_reads_what_the_commands_print_for_a_session_the_engine_wrote(tlogcheck: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chat.engine import Engine
    from cli import prog_receipts as receipts_cli
    from receipts.body import parse_receipt

    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        engine = Engine(tmp_path / "data")
        engine.remember("alice", "a red kayak for Sunday")
        turn = engine.turn("alice", "which kayak do I have?", k=2)
        engine.index.close()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    seq = parse_receipt(turn.receipt_path.read_bytes()).signed_body["memories"][0]["event"]["seq"]
    printed = {}
    for name, argv in {
        "vkey": ["pubkey", tmp_path / "data", "--vkey"],
        "note": ["checkpoint", tmp_path / "data", "alice", "--note"],
        "proof": ["tlog-proof", turn.receipt_path, seq],
    }.items():
        capsys.readouterr()
        assert receipts_cli.main([str(a) for a in argv]) == 0
        printed[name] = tmp_path / name
        printed[name].write_text(capsys.readouterr().out)
    digest = json.loads((tmp_path / "data" / "sessions" / "alice" / "events.jsonl").read_text().splitlines()[seq])["digest"]
    for args in (["note", printed["vkey"], printed["note"]], ["proof", printed["vkey"], printed["proof"], digest]):
        done = _go(tlogcheck, *args)
        assert done.returncode == 0, done.stderr


def test_go_reads_a_witnessed_tlog_proof_and_a_bundles_witnessed_note(tlogcheck: Path, tmp_path: Path) -> None:
    """Issue 33: the cosignature line a witnessed receipt's tlog-proof (and a bundle's note) carries is a signature
    of a key Go's note.Open does not know: it opens the note all the same, and the inclusion still checks."""
    from receipts.body import parse_receipt
    from receipts.tlog_proof import tlog_proof_for

    witnessed = parse_receipt((VECTORS / "receipt_v2_witnessed.json").read_bytes())
    proof = tmp_path / "w.tlog-proof"
    proof.write_text(tlog_proof_for(witnessed, 0, KEY))
    assert "\u2014 witness.example/w1 " in proof.read_text()
    digest = json.loads((VECTORS / "receipt_v2_witnessed_ledger.jsonl").read_text().splitlines()[0])["digest"]
    done = _go(tlogcheck, "proof", VECTORS / "note_v1_vkey.txt", proof, digest)
    assert done.returncode == 0, done.stderr
    done = _go(tlogcheck, "note", VECTORS / "note_v1_vkey.txt", VECTORS / "bundle_v1_witnessed.note")
    assert done.returncode == 0 and done.stdout == "ok: 3ba5875cba953c72/mre/vector-witnessed size 5\n", done.stderr
