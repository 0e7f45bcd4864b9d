"""Bundles of a witnessed session (docs/FORMAT.md §21.1, bundle/notes.py): the export carries each witnessed tree
head as a signed note with its cosignature lines, `bundle verify --policy` (and `mre bundle verify --policy`) checks
them as rows, and a bundle of a session no witness cosigned is what it was."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle import verify_file
from bundle.export import export_session
from bundle.notes import NoteCollector, check_notes
from chat.engine import Engine
from cli import prog_bundle as bundle_cli
from receipts.cosignature import parse_policy
from receipts.keys import SigningKey
from receipts.merkle import leaf_hash, root_from_leaf_hashes
from receipts.note import parse_note, verifier
from receipts.report import FAIL, PASS, Rows
from storage.local import load_existing

from ..witness_support import Witness, serving

W_KEY = SigningKey.from_seed(bytes([8]) * 32)


@pytest.fixture
def env() -> Iterator[None]:
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        yield
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def _policy_text(data: Path, w: Witness, quorum: str = "w1") -> str:
    log = verifier(load_existing(data).public_key)
    return f"log {log.vkey()}\nwitness w1 {w.public.vkey()} {w.url}\nquorum {quorum}\n"


@pytest.fixture
def witnessed(tmp_path: Path, env: None) -> dict[str, Path]:
    return build_witnessed(tmp_path)


def build_witnessed(tmp_path: Path, *, remember_after: bool = True) -> dict[str, Path]:
    """A session with two witnessed turns (and, with `remember_after`, a memory remembered after the last one, so the
    latest checkpoint is one no witness saw), exported, and its policy."""
    data = tmp_path / "data"
    engine = Engine(data)
    engine.remember("alice", "a red kayak for Sunday")
    w = Witness("w1.example/w", W_KEY, {})
    with serving(w):
        log = verifier(engine.key.public_key)
        w.logs = {f"{log.name}/alice": log}
        policy = tmp_path / "w.policy"
        policy.write_text(_policy_text(data, w))
        engine.witnesses = parse_policy(policy.read_bytes())
        engine.witness_timeout = 2.0
        engine.turn("alice", "which kayak do I have?", k=2)
        engine.turn("alice", "and on Sunday?", k=2)
    if remember_after:
        engine.remember("alice", "my sister lives in Lyon")  # the latest checkpoint is then one no witness saw
    engine.index.close()
    out = tmp_path / "alice.mre.zip"
    export_session(data, "alice", out)
    pub = tmp_path / "pub.json"
    from receipts.keys import format_public_key

    pub.write_text(format_public_key(load_existing(data).public_key))
    return {"data": data, "bundle": out, "policy": policy, "pub": pub, "root": tmp_path}


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    capsys.readouterr()
    code = bundle_cli.main([str(a) for a in argv])
    return (code, *capsys.readouterr())


def test_the_bundle_carries_each_witnessed_tree_head_as_a_note_with_its_cosignature(witnessed: dict[str, Path]) -> None:
    with zipfile.ZipFile(witnessed["bundle"]) as z:
        notes = sorted(n for n in z.namelist() if n.startswith("notes/"))
        assert len(notes) == 2  # one per witnessed turn
        for n in notes:
            note = parse_note(z.read(n))
            assert [s.name for s in note.signatures][1:] == ["w1.example/w"]
            assert note.text.split("\n")[1] == n.removeprefix("notes/").removesuffix(".note")


def test_verify_with_the_policy_passes_a_row_per_cosignature(witnessed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "verify", witnessed["bundle"], "--trust", witnessed["pub"], "--policy", witnessed["policy"])
    assert code == 0 and "VERIFIED" in out, out
    report = verify_file(witnessed["bundle"], _trust(witnessed), policy=parse_policy(witnessed["policy"].read_bytes()))
    rows = [c.name for c in report.checks if c.name.startswith("note ")]
    assert len([r for r in rows if r.endswith(".witness.w1")]) == 2 and len([r for r in rows if r.endswith(".witness.quorum")]) == 2
    assert all(report.status_of(r) == PASS for r in rows)


def test_without_a_policy_the_cosignatures_are_said_not_judged(witnessed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "verify", witnessed["bundle"], "--trust", witnessed["pub"])
    assert code == 0 and "give --policy FILE" in out and "witness.w1" not in out, out


def test_a_policy_of_another_witness_fails_its_quorum(witnessed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    other = Witness("w1.example/w", SigningKey.from_seed(bytes([9]) * 32), {})
    bad = witnessed["root"] / "other.policy"
    bad.write_text(_policy_text(witnessed["data"], other))
    code, out, _ = _run(capsys, "verify", witnessed["bundle"], "--trust", witnessed["pub"], "--policy", bad)
    assert code == 1 and "FAILED" in out and ".witness.quorum" in out, out


def test_the_mre_twin_takes_the_policy(witnessed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    capsys.readouterr()
    code = main(["bundle", "verify", str(witnessed["bundle"]), "--trust", str(witnessed["pub"]), "--policy", str(witnessed["policy"])])
    out = capsys.readouterr().out
    assert code == 0 and ".witness.w1" in out and out == _run(capsys, "verify", witnessed["bundle"], "--trust", witnessed["pub"], "--policy", witnessed["policy"])[1]


def test_a_bad_policy_file_is_one_line_exit_2(witnessed: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    junk = witnessed["root"] / "junk.policy"
    junk.write_text("witness\n")
    code, out, err = _run(capsys, "verify", witnessed["bundle"], "--policy", junk)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


def test_a_bundle_no_witness_cosigned_has_no_note_and_fails_a_policy_that_needs_one(tmp_path: Path, env: None, capsys: pytest.CaptureFixture[str]) -> None:
    engine = Engine(tmp_path / "data")
    engine.remember("bob", "a green tent")
    engine.turn("bob", "which tent?", k=1)
    engine.index.close()
    out = tmp_path / "bob.mre.zip"
    export_session(tmp_path / "data", "bob", out)
    with zipfile.ZipFile(out) as z:
        assert not [n for n in z.namelist() if n.startswith("notes/")]
    w = Witness("w1.example/w", W_KEY, {})
    policy = tmp_path / "p"
    policy.write_text(_policy_text(tmp_path / "data", w))
    report = verify_file(out, policy=parse_policy(policy.read_bytes()))
    assert report.status_of("witness.quorum") == FAIL and report.verdict == "failed"
    policy.write_text(_policy_text(tmp_path / "data", w, quorum="none"))
    assert verify_file(out, policy=parse_policy(policy.read_bytes())).status_of("witness.quorum") == PASS


def _trust(w: dict[str, Path]) -> list:  # type: ignore[type-arg]
    from storage.offline import load_trust

    return load_trust([w["pub"]])


# --- the checks, pure: a flipped byte in a note fails the row naming it ------------------------------------------------
LOG = SigningKey.from_seed(bytes([1]) * 32)
DIGESTS = [bytes([i]) * 32 for i in range(5)]
CHAINS = [f"{i:064x}" for i in range(5)]


def _cosigned_note(size: int = 3) -> bytes:
    """A note over the first `size` of DIGESTS, as the exporter makes one from a receipt's checkpoint."""
    from receipts.body import sign_checkpoint
    from receipts.cosignature import cosign
    from receipts.note import checkpoint_text

    root = root_from_leaf_hashes([leaf_hash(d) for d in DIGESTS[:size]])
    cp = sign_checkpoint(session="s1", tree_size=size, root=root, chain_head=CHAINS[size - 1], issued_at="2026-01-02T03:04:05.000000Z", key=LOG)
    line = cosign(checkpoint_text(cp).encode(), W_KEY, "w1.example/w", 1_767_323_045)
    c = NoteCollector(LOG)
    c._by_size[size] = (cp, [line])
    [(name, raw)] = c.members()
    assert name == f"notes/{size}.note"
    return raw


def _rows(raw: bytes, size: int = 3) -> Rows:
    w = Witness("w1.example/w", W_KEY, {})
    policy = parse_policy(f"log {verifier(LOG.public_key).vkey()}\nwitness w1 {w.public.vkey()}\nquorum w1\n")
    r = Rows()
    check_notes(
        r, [(f"notes/{size}.note", raw)], session="s1", verified=5,
        root_at=lambda n: root_from_leaf_hashes([leaf_hash(d) for d in DIGESTS[:n]]), chain_at=lambda n: CHAINS[n - 1],
        trusted=[LOG.public_key], own=[], policy=policy,
    )
    return r


def test_a_good_note_passes_every_row() -> None:
    rows = _rows(_cosigned_note()).rows
    assert [c.name for c in rows] == ["note 3.tree_head", "note 3.signature", "note 3.witness.log", "note 3.witness.w1", "note 3.witness.quorum"]
    assert all(c.status == PASS for c in rows), rows


def test_every_byte_flipped_of_a_note_fails_a_row_that_names_it() -> None:
    raw = _cosigned_note()
    slipped = []
    for i in range(len(raw)):
        bad = raw[:i] + bytes([raw[i] ^ 1]) + raw[i + 1 :]
        rows = _rows(bad).rows
        failed = [c for c in rows if c.status == FAIL]
        if not failed or not all(c.name.startswith("note 3.") for c in failed):
            slipped.append(i)
    assert slipped == []


def test_a_note_of_another_history_fails_its_tree_head() -> None:
    r = Rows()
    raw = _cosigned_note()
    check_notes(
        r, [("notes/3.note", raw)], session="s1", verified=5, root_at=lambda n: bytes(32), chain_at=lambda n: CHAINS[n - 1],
        trusted=[LOG.public_key], own=[], policy=None,
    )
    assert r.rows[0].name == "note 3.tree_head" and r.rows[0].status == FAIL and "root" in r.rows[0].message
