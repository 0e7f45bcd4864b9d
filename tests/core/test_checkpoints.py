"""Checkpoints the visitor can hold us to: one signed after every append, and proofs from a kept one.

The ledger alone is only self-consistent: rewriting an old event and
recomputing every digest and chain hash after it, or dropping the last events,
passes `ledger verify`. A checkpoint kept from before catches both.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from chat.engine import Engine, TurnError
from chat.llm import LLM, Completion
from cli import prog_ledger as ledger_cli
from cli import prog_receipts as receipts_cli
from ledger.event import GENESIS, chain_link, event_from_dict, recompute_digest
from receipts import checkpoints as C
from receipts.keys import SigningKey, format_public_key
from receipts.merkle import leaf_hash, root_from_leaf_hashes
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS
from storage.common.keyfiles import load_or_create
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as C_files

ROOT = Path(__file__).resolve().parents[2]
FACTS = ["My cat is called Miso", "I live in Lisbon", "My sister Ana marries in Porto in October"]


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECEIPT_SIGNING_KEY", raising=False)


@dataclass
class World:
    data: Path
    engine: Engine

    @property
    def key(self) -> SigningKey:
        return self.engine.key

    @property
    def trusted(self) -> list[Any]:
        return [self.key.public_key]


def make_world(tmp: Path, session: str = "alice", turns: int = 1) -> World:
    engine = Engine(tmp, llm=LLM(api_key=""))
    for fact in FACTS:
        engine.remember(session, fact)
    for i in range(turns):
        engine.turn(session, f"What is my cat called? ({i})")
    return World(tmp, engine)


def recomputed_root(data: Path, session: str) -> tuple[int, str, str]:
    """(events, Merkle root over digests recomputed from the stored lines, last chain hash)."""
    lines = (data / "sessions" / session / "events.jsonl").read_bytes().splitlines()
    objs = [orjson.loads(line) for line in lines]
    leaves = [leaf_hash(recompute_digest(o)) for o in objs]
    return len(objs), root_from_leaf_hashes(leaves).hex(), objs[-1]["chain"]


def assert_latest_covers_everything(data: Path, session: str, key: SigningKey) -> dict[str, Any]:
    cp = C_files.latest(data, session)
    assert cp is not None, "no checkpoint after an acknowledged append"
    n, root, head = recomputed_root(data, session)
    body = cp["body"]
    assert (body["tree_size"], body["root"], body["chain_head"]) == (n, root, head)
    from receipts.body import checkpoint_bytes, decode_sig

    sig = decode_sig(cp["sig"])
    assert sig is not None and key.public_key.verify(sig, checkpoint_bytes(body))
    assert cp["key_id"] == key.key_id
    return cp


# -- the operator's attacks (each keeps `ledger verify` passing) -----------------
def rewrite_and_recompute(data: Path, session: str, seq: int, text: str, key: SigningKey) -> None:
    """Rewrite an old event's text, recompute every digest and chain hash from it, re-sign a checkpoint."""
    path = data / "sessions" / session / "events.jsonl"
    objs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    objs[seq]["text"] = text
    prev = GENESIS if seq == 0 else bytes.fromhex(objs[seq - 1]["chain"])
    for obj in objs[seq:]:
        obj["prev"] = prev.hex()
        obj["digest"] = recompute_digest(obj).hex()
        prev = chain_link(prev, bytes.fromhex(obj["digest"]))
        obj["chain"] = prev.hex()
    path.write_bytes(b"".join(event_from_dict(o).to_line() for o in objs))
    resign(data, session, key)


def truncate(data: Path, session: str, drop: int, key: SigningKey) -> None:
    """Drop the last `drop` events and re-sign a checkpoint over what is left."""
    path = data / "sessions" / session / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-drop]))
    resign(data, session, key)


def resign(data: Path, session: str, key: SigningKey) -> None:
    """A thorough operator: rebuilds the producer's Merkle tree too, so the fresh checkpoint matches the ledger."""
    shutil.rmtree(data / "merkle" / session)
    ledger = Ledger(data)
    report = ledger.verify(session)
    assert report.ok, f"the attack should leave `ledger verify` passing: {report.to_dict()}"
    C_files.issue(data, ledger, session, key)


def rows(report: C.SinceReport) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


# -- a checkpoint after every append ---------------------------------------------
class TestEveryAppendIsSigned:
    def test_remember_leaves_the_latest_checkpoint_covering_the_new_event(self, tmp_path: Path) -> None:
        engine = Engine(tmp_path, llm=LLM(api_key=""))
        assert C_files.latest(tmp_path, "alice") is None
        for i, fact in enumerate(FACTS, start=1):
            engine.remember("alice", fact)
            assert assert_latest_covers_everything(tmp_path, "alice", engine.key)["body"]["tree_size"] == i

    def test_a_turn_signs_after_the_user_message_and_after_the_answer(self, tmp_path: Path) -> None:
        world = make_world(tmp_path, turns=0)
        seen: list[int] = []
        real = world.engine.llm.complete

        def complete(*args: Any, **kwargs: Any) -> Completion:
            cp = C_files.latest(tmp_path, "alice")
            assert cp is not None
            seen.append(cp["body"]["tree_size"])
            return real(*args, **kwargs)

        world.engine.llm.complete = complete  # type: ignore[method-assign]
        turn = world.engine.turn("alice", "Where do I live?")
        assert seen == [len(FACTS) + 1], "the user's message was not under a signed checkpoint while the model ran"
        cp = assert_latest_covers_everything(tmp_path, "alice", world.key)
        assert cp == turn.body["checkpoint"], "the receipt must carry the checkpoint signed after the answer"

    def test_a_failed_turn_leaves_its_note_under_a_checkpoint(self, tmp_path: Path) -> None:
        world = make_world(tmp_path, turns=0)

        def broken(*_args: Any, **_kwargs: Any) -> Any:
            raise OSError("disk full")

        world.engine.write_receipt = broken
        with pytest.raises(TurnError):
            world.engine.turn("alice", "Where do I live?")
        cp = assert_latest_covers_everything(tmp_path, "alice", world.key)
        last = orjson.loads((tmp_path / "sessions/alice/events.jsonl").read_bytes().splitlines()[-1])
        assert last["meta"]["kind"] == "receipt_failure" and cp["body"]["tree_size"] == last["seq"] + 1

    def test_the_stored_checkpoint_is_private_and_canonical(self, tmp_path: Path) -> None:
        old = os.umask(0o022)
        try:
            make_world(tmp_path, turns=0)
        finally:
            os.umask(old)
        path = C_files.checkpoint_path(tmp_path, "alice")
        assert path.stat().st_mode & 0o777 == 0o600
        cp = C_files.latest(tmp_path, "alice")
        assert cp is not None and path.read_bytes() == C.checkpoint_file_bytes(cp)
        assert not list(path.parent.glob(".*.tmp")), "a temp file was left behind"

    def test_an_import_with_a_signing_key_signs_a_checkpoint_and_says_so(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        key = load_or_create(tmp_path)
        src = tmp_path / "in.jsonl"
        src.write_text("".join(json.dumps({"role": "user", "text": f"fact {i}"}) + "\n" for i in range(5)))
        assert ledger_cli.main(["import", "--create", str(tmp_path), "bob", str(src)]) == 0
        out = capsys.readouterr().out
        assert f"signed checkpoint of 5 events by {key.key_id}" in out
        assert_latest_covers_everything(tmp_path, "bob", key)
        assert ledger_cli.main(["import", "--create", str(tmp_path), "bob", str(src), "--allow-duplicates"]) == 0
        assert assert_latest_covers_everything(tmp_path, "bob", key)["body"]["tree_size"] == 10

    def test_an_import_without_a_signing_key_signs_nothing_creates_no_key_and_says_so(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = tmp_path / "data"
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps({"role": "user", "text": "hello"}) + "\n")
        assert ledger_cli.main(["import", "--create", str(data), "bob", str(src)]) == 0
        assert "no checkpoint signed" in capsys.readouterr().out
        assert C_files.latest(data, "bob") is None
        assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "in.jsonl"], "a key was created"
        assert not (data / "keys").exists()


    def test_an_import_with_an_unusable_signing_key_imports_nothing(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from storage.common.keyfiles import keys_dir

        data = tmp_path / "data"
        load_or_create(data)
        keys_dir(data).chmod(0o755)  # loose: refused, naming the chmod
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps({"role": "user", "text": "hello"}) + "\n")
        assert ledger_cli.main(["import", "--create", str(data), "bob", str(src)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "nothing was imported" in err and "chmod" in err
        assert not Ledger(data).exists("bob")


# -- proving a kept checkpoint ---------------------------------------------------------
class TestProveSince:
    def test_an_honest_append_after_a_kept_checkpoint_is_consistent(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        world.engine.turn("alice", "Who is getting married?")
        world.engine.remember("alice", "I also play the cello")
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        m, n = kept["body"]["tree_size"], kept["body"]["tree_size"] + 3
        assert report.verdict == "verified" and report.ok and not report.failed
        assert set(rows(report).values()) == {PASS}
        assert report.message == f"history extends the checkpoint you kept ({m} → {n} events)"
        assert report.current == C_files.latest(tmp_path, "alice") and report.events == n
        assert report.proof, "a consistency proof from a smaller tree is never empty"

    def test_the_same_checkpoint_kept_and_current_is_consistent(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert report.verdict == "verified" and report.proof == ()

    def test_rewrite_and_recompute_after_a_kept_checkpoint_is_caught(self, tmp_path: Path) -> None:
        world = make_world(tmp_path, turns=2)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        world.engine.remember("alice", "one more thing")
        rewrite_and_recompute(tmp_path, "alice", 1, "I live in Madrid", world.key)
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        r = rows(report)
        assert report.verdict == "failed" and not report.ok
        assert r["kept.root"] == FAIL and r["kept.chain_head"] == FAIL and r["ledger.consistency"] == FAIL
        # everything the data alone can say still passes: only the kept checkpoint catches it
        assert r["ledger.chain"] == PASS and r["current.signature"] == PASS and r["current.ledger"] == PASS
        assert report.message == (
            f"this history changed since you last saw it: the ledger no longer extends the checkpoint of {kept['body']['tree_size']} events you kept"
        )

    def test_rewriting_an_event_after_the_kept_size_is_not_a_change_to_what_was_kept(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        world.engine.remember("alice", "a later event")
        rewrite_and_recompute(tmp_path, "alice", kept["body"]["tree_size"], "a different later event", world.key)
        assert C_files.prove_since(tmp_path, "alice", kept, world.trusted).verdict == "verified"

    def test_truncation_after_a_kept_checkpoint_is_caught(self, tmp_path: Path) -> None:
        world = make_world(tmp_path, turns=2)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        m = kept["body"]["tree_size"]
        truncate(tmp_path, "alice", 2, world.key)
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        r = rows(report)
        assert report.verdict == "failed" and report.events == m - 2
        assert r["ledger.chain"] == FAIL and r["ledger.consistency"] == FAIL and r["current.ledger"] == PASS
        assert report.message == f"this history changed since you last saw it: the ledger holds {m - 2} events, fewer than the {m} in the checkpoint you kept"

    def test_an_old_line_edited_in_place_is_named_as_a_chain_break_not_as_fewer_events(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        path = tmp_path / "sessions" / "alice" / "events.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        obj = orjson.loads(lines[1])
        obj["text"] = "I live in Madrid"  # digest not recomputed: the walk stops at line 2
        lines[1] = event_from_dict(obj).to_line()
        path.write_bytes(b"".join(lines))
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert report.verdict == "failed" and rows(report)["ledger.chain"] == FAIL
        assert report.message.startswith("this history changed since you last saw it: chain broken at line 2")

    def test_a_symlinked_ledger_is_refused_with_every_history_row_failing(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        path = tmp_path / "sessions" / "alice" / "events.jsonl"
        elsewhere = tmp_path / "elsewhere.jsonl"
        path.rename(elsewhere)
        path.symlink_to(elsewhere)
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        r = rows(report)
        assert report.verdict == "failed" and not report.ok
        assert all(r[n] == FAIL for n in ("ledger.chain", "kept.root", "kept.chain_head", "ledger.consistency", "current.ledger"))
        assert report.message.startswith("this history changed since you last saw it: the session's ledger was not read")

    def test_a_torn_tail_that_stays_torn_still_fails(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        with open(tmp_path / "sessions" / "alice" / "events.jsonl", "ab") as f:
            f.write(b'{"chain": "half a line')
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        chain = next(c for c in report.checks if c.name == "ledger.chain")
        assert report.verdict == "failed" and chain.status == FAIL and "torn_tail" in chain.message

    def test_events_appended_without_a_checkpoint_are_named(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        Ledger(tmp_path).append("alice", "user", "appended behind the engine's back")
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert rows(report)["current.ledger"] == FAIL and report.verdict == "failed" and not report.ok
        assert "1 events are under no signature" in next(c.found for c in report.checks if c.name == "current.ledger") or ""

    def test_a_kept_checkpoint_from_another_session_is_rejected(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        world.engine.remember("bob", "I am Bob")
        kept = C_files.latest(tmp_path, "bob")
        assert kept is not None
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        r = rows(report)
        assert r["kept.session"] == FAIL and r["kept.signature"] == PASS
        assert all(r[n] == NOT_VERIFIABLE for n in ("ledger.chain", "kept.root", "kept.chain_head", "ledger.consistency"))
        assert report.verdict == "failed" and report.message == "the checkpoint you kept is for session bob, not alice"

    def test_every_mutation_of_a_kept_checkpoint_is_caught(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        other = SigningKey.generate()

        def flip_hex(h: str) -> str:
            return ("0" if h[0] != "0" else "1") + h[1:]

        def resigned(cp: dict[str, Any], key: SigningKey) -> dict[str, Any]:
            from receipts.body import checkpoint_bytes

            return {"body": cp["body"], "key_id": key.key_id, "sig": base64.b64encode(key.sign(checkpoint_bytes(cp["body"]))).decode()}

        def set_body(field: str, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
            def mutate(cp: dict[str, Any]) -> dict[str, Any]:
                cp["body"][field] = value
                return cp

            return mutate

        sig = base64.b64decode(kept["sig"])
        mutations: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "sig-bit-flipped": lambda cp: {**cp, "sig": base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()},
            "sig-of-another-key": lambda cp: {**cp, "sig": resigned(cp, other)["sig"]},
            "resigned-by-an-untrusted-key": lambda cp: resigned(cp, other),
            "root-flipped": set_body("root", flip_hex(kept["body"]["root"])),
            "chain-head-flipped": set_body("chain_head", flip_hex(kept["body"]["chain_head"])),
            "tree-size-minus-one": set_body("tree_size", kept["body"]["tree_size"] - 1),
            "tree-size-plus-one": set_body("tree_size", kept["body"]["tree_size"] + 1),
            "issued-at-changed": set_body("issued_at", "2001-01-01T00:00:00.000000Z"),
            "root-flipped-and-resigned-by-the-operator": lambda cp: resigned(set_body("root", flip_hex(kept["body"]["root"]))(cp), world.key),
        }
        slipped = []
        for name, mutate in mutations.items():
            bad = mutate(copy.deepcopy(kept))
            report = C_files.prove_since(tmp_path, "alice", C.parse_checkpoint(json.dumps(bad).encode()), world.trusted)
            if report.verdict != "failed":
                slipped.append(name)
        assert not slipped, f"mutations not caught: {slipped}"

    def test_without_a_trusted_key_signatures_are_only_self_consistent(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        world.engine.remember("alice", "later")
        report = C_files.prove_since(tmp_path, "alice", kept, [])
        r = rows(report)
        assert report.ok and report.verdict == "unverified"
        assert r["kept.signature"] == NOT_VERIFIABLE and r["current.signature"] == NOT_VERIFIABLE
        assert all(C.SELF_CONSISTENT in c.message for c in report.checks if c.name.endswith(".signature"))
        assert report.message.endswith("but no signature was checked against a key you trust")

    def test_without_a_trusted_key_a_bad_signature_still_fails(self, tmp_path: Path) -> None:
        make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        sig = base64.b64decode(kept["sig"])
        bad = {**kept, "sig": base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()}
        report = C_files.prove_since(tmp_path, "alice", bad, [])
        assert rows(report)["kept.signature"] == FAIL and report.verdict == "failed"
        assert report.message == "the checkpoint you kept does not carry a valid signature by a trusted key"

    def test_a_session_without_a_current_checkpoint_is_unverified_not_verified(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        C_files.checkpoint_path(tmp_path, "alice").unlink()
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert report.ok and report.verdict == "unverified" and report.current is None
        assert "holds no signed checkpoint" in report.message

    def test_the_report_has_no_truth_value(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        with pytest.raises(TypeError):
            bool(report)
        d = report.to_dict()
        assert d["verdict"] == "verified" and d["ok"] is True and json.dumps(d)
        assert [c["name"] for c in d["checks"]] == [c.name for c in report.checks]


# -- parsing ----------------------------------------------------------------------------
class TestParse:
    def test_malformed_kept_checkpoints_are_one_line_errors(self, tmp_path: Path) -> None:
        make_world(tmp_path, turns=0)
        good = C_files.latest(tmp_path, "alice")
        assert good is not None
        text = json.dumps(good)
        b = good["body"]
        cases: dict[str, bytes] = {
            "empty": b"",
            "whitespace": b"  \n",
            "not-json": b"{nope",
            "a-list": b"[]",
            "invalid-utf8": b'{"body": "\xff"}',
            "duplicate-key": text.replace('"sig":', '"sig": "AAAA", "sig":').encode(),
            "duplicate-key-in-body": text.replace('"root":', '"root": "00", "root":').encode(),
            "extra-field": json.dumps({**good, "note": 1}).encode(),
            "missing-sig": json.dumps({"body": b, "key_id": good["key_id"]}).encode(),
            "tree-size-zero": json.dumps({**good, "body": {**b, "tree_size": 0}}).encode(),
            "tree-size-a-string": json.dumps({**good, "body": {**b, "tree_size": "3"}}).encode(),
            "tree-size-a-float": json.dumps({**good, "body": {**b, "tree_size": 3.0}}).encode(),
            "tree-size-a-bool": json.dumps({**good, "body": {**b, "tree_size": True}}).encode(),
            "tree-size-huge": text.replace(f'"tree_size": {b["tree_size"]}', '"tree_size": ' + "9" * 5000).encode(),
            "root-short": json.dumps({**good, "body": {**b, "root": "ab"}}).encode(),
            "root-uppercase": json.dumps({**good, "body": {**b, "root": b["root"].upper()}}).encode(),
            "bad-session": json.dumps({**good, "body": {**b, "session": "../x"}}).encode(),
            "unknown-type": json.dumps({**good, "body": {**b, "type": "mre/receipt"}}).encode(),
            "unknown-version": json.dumps({**good, "body": {**b, "v": 2}}).encode(),
            "sig-not-base64": json.dumps({**good, "sig": "!!!"}).encode(),
            "bad-key-id": json.dumps({**good, "key_id": "rsa:00"}).encode(),
            "nan": text.replace(f'"tree_size": {b["tree_size"]}', '"tree_size": NaN').encode(),
            "lone-surrogate": text.replace('"body": {', '"body": {"x": "\\ud800", ').encode(),
            "too-big": b" " * (C.MAX_CHECKPOINT_BYTES + 1) + text.encode(),
        }
        wrong = {}
        for name, raw in cases.items():
            try:
                C.parse_checkpoint(raw, source="kept.json")
            except C.MalformedCheckpoint as exc:
                msg = str(exc)
                if "\n" in msg or not msg.startswith("malformed checkpoint (kept.json): "):
                    wrong[name] = msg
            except Exception as exc:  # noqa: BLE001 - that is the failure being looked for
                wrong[name] = f"{type(exc).__name__}: {exc}"
            else:
                wrong[name] = "accepted"
        assert not wrong, wrong
        assert C.parse_checkpoint(text.encode()) == good
        assert C.parse_checkpoint(json.dumps(good, indent=2).encode()) == good

    def test_a_malformed_stored_checkpoint_is_an_error_naming_the_file(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        path = C_files.checkpoint_path(tmp_path, "alice")
        path.write_bytes(b'{"body": 1}')
        with pytest.raises(C.MalformedCheckpoint, match=str(path)):
            C_files.latest(tmp_path, "alice")
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert rows(report)["current.signature"] == FAIL and report.verdict == "failed"

    def test_a_stored_checkpoint_of_another_session_is_refused(self, tmp_path: Path) -> None:
        world = make_world(tmp_path)
        world.engine.remember("bob", "hi")
        C_files.checkpoint_path(tmp_path, "alice").write_bytes(C_files.checkpoint_path(tmp_path, "bob").read_bytes())
        with pytest.raises(C.MalformedCheckpoint, match="names session 'bob'"):
            C_files.latest(tmp_path, "alice")

    def test_a_symlinked_stored_checkpoint_is_not_followed(self, tmp_path: Path) -> None:
        make_world(tmp_path)
        path = C_files.checkpoint_path(tmp_path, "alice")
        target = tmp_path / "elsewhere.json"
        target.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(target)
        with pytest.raises(C.MalformedCheckpoint, match="symbolic link"):
            C_files.latest(tmp_path, "alice")


# -- the command lines --------------------------------------------------------------------
def pubkey_file(tmp: Path, key: SigningKey) -> Path:
    path = tmp / "trusted.pub"
    path.write_text(format_public_key(key.public_key))
    return path


class TestCheckpointCLI:
    def test_receipts_checkpoint_prints_the_latest_as_a_keepable_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        make_world(tmp_path / "d")
        assert receipts_cli.main(["checkpoint", str(tmp_path / "d"), "alice"]) == 0
        out = capsys.readouterr().out
        assert C.parse_checkpoint(out.encode()) == C_files.latest(tmp_path / "d", "alice")

    @pytest.mark.parametrize("case", ["not-a-dir", "unknown-session", "bad-session-id", "none-yet", "malformed"])
    def test_receipts_checkpoint_exits_2_with_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
        data = tmp_path / "d"
        make_world(data)
        session = {"unknown-session": "nobody", "bad-session-id": "../x"}.get(case, "alice")
        if case == "none-yet":
            C_files.checkpoint_path(data, "alice").unlink()
        if case == "malformed":
            C_files.checkpoint_path(data, "alice").write_bytes(b"[]")
        target = tmp_path / "missing" if case == "not-a-dir" else data
        assert receipts_cli.main(["checkpoint", str(target), session]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("error: ")

    def test_ledger_verify_since_exit_codes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        data = tmp_path / "d"
        world = make_world(data, turns=2)
        kept_file = tmp_path / "kept.json"
        assert receipts_cli.main(["checkpoint", str(data), "alice"]) == 0
        kept_file.write_text(capsys.readouterr().out)
        trust = pubkey_file(tmp_path, world.key)
        world.engine.remember("alice", "later")
        assert ledger_cli.main(["verify", str(data), "alice", "--since", str(kept_file), "--trust", str(trust)]) == 0
        out = capsys.readouterr().out
        assert "verdict: VERIFIED: history extends the checkpoint you kept" in out and "note: no --trust" not in out
        assert ledger_cli.main(["verify", str(data), "alice", "--since", str(kept_file)]) == 0
        out = capsys.readouterr().out
        assert "not independently trusted" in out and "verdict: UNVERIFIED" in out
        truncate(data, "alice", 3, world.key)
        assert ledger_cli.main(["verify", str(data), "alice"]) == 0, "truncation passes a plain ledger verify"
        capsys.readouterr()
        assert ledger_cli.main(["verify", str(data), "alice", "--since", str(kept_file), "--trust", str(trust), "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["verdict"] == "failed" and report["message"].startswith("this history changed since you last saw it")

    @pytest.mark.parametrize("case", ["malformed-file", "missing-file", "two-sessions", "no-session", "unknown-session", "bad-trust", "trust-without-since"])
    def test_ledger_verify_since_unusable_arguments_exit_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
        data = tmp_path / "d"
        make_world(data)
        kept_file = tmp_path / "kept.json"
        kept_file.write_bytes(C_files.checkpoint_path(data, "alice").read_bytes())
        if case == "malformed-file":
            kept_file.write_text('{"body": {}, "body": {}}')
        args = {
            "malformed-file": ["alice", "--since", str(kept_file)],
            "missing-file": ["alice", "--since", str(tmp_path / "nope.json")],
            "two-sessions": ["alice", "bob", "--since", str(kept_file)],
            "no-session": ["--since", str(kept_file)],
            "unknown-session": ["nobody", "--since", str(kept_file)],
            "bad-trust": ["alice", "--since", str(kept_file), "--trust", str(kept_file)],
            "trust-without-since": ["alice", "--trust", str(kept_file)],
        }[case]
        assert ledger_cli.main(["verify", str(data), *args]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err.count("\n") == 1 and cap.err.startswith("error: ")

    def test_both_commands_as_subprocesses(self, tmp_path: Path) -> None:
        data = tmp_path / "d"
        world = make_world(data)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("RECEIPT_SIGNING_KEY", None)
        got = subprocess.run([sys.executable, "-m", "receipts", "checkpoint", str(data), "alice"], capture_output=True, env=env, timeout=60)
        assert got.returncode == 0, got.stderr
        kept_file = tmp_path / "kept.json"
        kept_file.write_bytes(got.stdout)
        assert "events, root" in got.stderr.decode()
        rewrite_and_recompute(data, "alice", 0, "My cat is called Rex", world.key)
        trust = pubkey_file(tmp_path, world.key)
        cmd = [sys.executable, "-m", "ledger", "verify", str(data), "alice", "--since", str(kept_file), "--trust", str(trust)]
        got = subprocess.run(cmd, capture_output=True, env=env, timeout=60)
        assert got.returncode == 1, got.stderr
        assert b"this history changed since you last saw it" in got.stdout and b"Traceback" not in got.stderr


class TestConcurrentWriter:
    def test_a_checkpoint_signed_while_the_verifier_walked_is_picked_up_not_reported_missing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        stale = C_files.latest
        world.engine.remember("alice", "appended just before the verifier looked")
        calls = []

        def lagging(data: Any, session: str) -> dict[str, Any] | None:
            calls.append(session)
            return kept if len(calls) <= 2 else stale(data, session)  # the writer had not signed yet

        monkeypatch.setattr(C_files, "latest", lagging)
        report = C_files.prove_since(tmp_path, "alice", kept, world.trusted)
        assert report.verdict == "verified" and len(calls) > 2
        assert report.current is not None and report.current["body"]["tree_size"] == report.events

    def test_honest_appends_racing_the_verifier_never_fail_it(self, tmp_path: Path) -> None:
        import threading
        import time

        world = make_world(tmp_path)
        kept = C_files.latest(tmp_path, "alice")
        assert kept is not None
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set() and i < 200:
                world.engine.remember("alice", f"racing fact {i}")
                i += 1
                time.sleep(0.005)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            verdicts = [C_files.prove_since(tmp_path, "alice", kept, world.trusted) for _ in range(8)]
        finally:
            stop.set()
            thread.join()
        failed = [[c.to_dict() for c in r.failed] for r in verdicts if r.verdict != "verified"]
        assert not failed, failed
