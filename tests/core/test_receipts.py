"""Receipts: offline and ledger verification, generated attacks, malicious ledgers, fuzzing, end to end."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.engine import Engine, TurnError
from chat.llm import LLM
from ledger.canonical import canonical_json
from ledger.event import GENESIS, make_event
from receipts.body import MAX_RECEIPT_BYTES, PAYLOAD_TYPE, MalformedReceipt, checkpoint_bytes, parse_receipt
from receipts.dsse import sign_envelope
from receipts.keys import SigningKey, format_public_key
from receipts.verify import FAIL, NOT_VERIFIABLE, PASS, Report
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.audit import cache_dir

from ..services.test_llm import GOOD_STREAM, PIECES, FakeGroq, Reply, completion_body, refused_base_url, stream_reply

ROOT = Path(__file__).resolve().parents[2]
FACTS = [
    "I moved to Lisbon in March and I love the tram rides",
    "My cat is called Miso and she is a grey tabby",
    "I work as a nurse at the children's hospital",
    "My sister Ana is getting married in October in Porto",
    "I started learning the cello last winter",
    "Miso hates the vacuum cleaner and hides under the bed",
]
QUESTIONS = ["What is my cat called?", "Where is my sister getting married?", "Tell me about Miso and the vacuum cleaner"]


@dataclass
class World:
    data: Path
    engine: Engine
    key: SigningKey
    receipts: list[Path]

    @property
    def trusted(self) -> list[Any]:
        return [self.key.public_key]

    def raw(self, i: int) -> bytes:
        return self.receipts[i].read_bytes()


def make_world(tmp: Path, session: str = "alice", receipt_format: int = 1) -> World:
    # Format 1 here: these attacks rewrite the signed events' texts; format 2 (the engine's default)
    # has its own in tests/core/test_receipt_v2.py.
    engine = Engine(tmp, llm=LLM(api_key=""), receipt_format=receipt_format)
    for fact in FACTS:
        engine.remember(session, fact)
    receipts = [engine.turn(session, q, k=8).receipt_path for q in QUESTIONS]
    return World(tmp, engine, engine.key, receipts)


@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "data")


def statuses(report: Report) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


class TestVerifies:
    def test_a_valid_receipt_verifies_offline_with_only_the_receipt_and_the_key(self, world: World) -> None:
        for i in range(3):
            report = verify_bytes(world.raw(i), trusted=world.trusted)
            assert report.verdict == "verified", [c for c in report.checks if c.status != PASS]
            assert report.mode == "offline"
            na = {c.name for c in report.checks if c.status == NOT_VERIFIABLE}
            assert na == {"ledger.events", "ledger.chain", "ledger.root", "ledger.consistency", "ledger.response"}

    def test_a_valid_receipt_verifies_with_the_ledger_every_check_passing(self, world: World) -> None:
        for i in range(3):
            report = verify_bytes(world.raw(i), trusted=world.trusted, data_dir=world.data)
            assert report.verdict == "verified"
            assert all(c.status == PASS for c in report.checks), [c for c in report.checks if c.status != PASS]

    def test_without_a_trusted_key_nothing_is_called_verified(self, world: World) -> None:
        report = verify_bytes(world.raw(0))
        assert report.verdict == "unverified" and not report.failed
        assert statuses(report)["envelope.signature"] == NOT_VERIFIABLE

    def test_a_receipt_names_the_memories_handed_to_the_model(self, world: World) -> None:
        body = parse_receipt(world.raw(0)).body
        texts = [m["event"]["text"] for m in body["memories"]]
        assert any("Miso" in t for t in texts)
        assert body["response"]["provider"] == "offline" and body["response"]["fallback_reason"]
        assert body["query"]["event"]["text"] == QUESTIONS[0]
        assert all(m["event"]["seq"] < body["query"]["event"]["seq"] for m in body["memories"])

    def test_report_has_no_truth_value(self, world: World) -> None:
        with pytest.raises(TypeError):
            bool(verify_bytes(world.raw(0), trusted=world.trusted))


# ------------------------------------------------------------------ generated attacks
Mutator = Callable[[dict[str, Any]], None]


def resign(env: dict[str, Any], body: dict[str, Any], key: SigningKey, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """What a dishonest holder of the key could sign: any JSON, canonical or not."""
    try:
        payload = canonical_json(body)
    except ValueError:
        payload = json.dumps(body).encode()
    return sign_envelope(payload, payload_type, key)


def resign_checkpoint(body: dict[str, Any], key: SigningKey) -> None:
    cp = body["checkpoint"]
    cp["body"] = dict(cp["body"])
    cp["sig"] = base64.b64encode(key.sign(checkpoint_bytes(cp["body"]))).decode()


def flip_hex(h: str) -> str:
    return ("0" if h[0] != "0" else "1") + h[1:]


def body_attacks(world: World) -> list[tuple[str, Mutator, str]]:
    """(name, mutation of the decoded body, the check that must catch it once re-signed)."""
    key = world.key
    other_event = world.engine.ledger.read_events("alice", [0])[0].to_dict()

    def m0(b: dict[str, Any]) -> dict[str, Any]:
        return b["memories"][0]["event"]

    def set_root(b: dict[str, Any]) -> None:
        b["checkpoint"]["body"]["root"] = flip_hex(b["checkpoint"]["body"]["root"])

    def set_root_resigned(b: dict[str, Any]) -> None:
        set_root(b)
        resign_checkpoint(b, key)

    def tree_size_resigned(b: dict[str, Any]) -> None:
        b["checkpoint"]["body"]["tree_size"] += 1
        resign_checkpoint(b, key)

    def swap(b: dict[str, Any]) -> None:
        a, c = b["memories"][0], b["memories"][1]
        a["event"], c["event"] = c["event"], a["event"]
        a["proof"], c["proof"] = c["proof"], a["proof"]

    def add(b: dict[str, Any]) -> None:
        used = {m["event"]["seq"] for m in b["memories"]}
        seq = next(s for s in range(b["query"]["event"]["seq"]) if s not in used)
        ev = world.engine.ledger.read_events("alice", [seq])[0]
        from storage.files.receipts.files import synced_tree

        store = synced_tree(world.data, world.engine.ledger, "alice")
        proof = [h.hex() for h in store.inclusion_proof(seq, b["checkpoint"]["body"]["tree_size"])]
        store.close()
        b["memories"].append({"rank": len(b["memories"]) + 1, "event": ev.to_dict(), "proof": proof})

    def other_leaf_proof(b: dict[str, Any]) -> None:
        b["memories"][0]["proof"] = list(b["memories"][1]["proof"])

    def cite_the_query(b: dict[str, Any]) -> None:
        b["memories"][0] = {"rank": 1, "event": dict(b["query"]["event"]), "proof": list(b["query"]["proof"])}

    return [
        ("query text", lambda b: b["query"]["event"].update(text=b["query"]["event"]["text"] + "!"), "query.digest"),
        ("memory snippet", lambda b: m0(b).update(text=m0(b)["text"].replace("a", "o", 1)), "memory#1.digest"),
        ("memory digest", lambda b: m0(b).update(digest=flip_hex(m0(b)["digest"])), "memory#1.digest"),
        ("memory chain hash", lambda b: m0(b).update(chain=flip_hex(m0(b)["chain"])), "memory#1.chain_link"),
        ("memory seq", lambda b: m0(b).update(seq=m0(b)["seq"] + 1), "memory#1.digest"),
        ("memory salt", lambda b: m0(b).update(salt=flip_hex(m0(b)["salt"])), "memory#1.digest"),
        ("prompt hash", lambda b: b["prompt"].update(sha256=flip_hex(b["prompt"]["sha256"])), "prompt.hash"),
        ("response hash", lambda b: b["response"].update(sha256=flip_hex(b["response"]["sha256"])), "response.hash"),
        ("response text", lambda b: b["response"]["event"].update(text="something else"), "response.digest"),
        ("root (checkpoint not re-signed)", set_root, "checkpoint.signature"),
        ("root (checkpoint re-signed)", set_root_resigned, "query.inclusion"),
        ("tree size (checkpoint not re-signed)", lambda b: b["checkpoint"]["body"].update(tree_size=99), "checkpoint.signature"),
        ("tree size (checkpoint re-signed)", tree_size_resigned, "receipt.structure"),
        ("checkpoint key id", lambda b: b["checkpoint"].update(key_id="ed25519:0000000000000000"), "checkpoint.signature"),
        ("chain head", lambda b: b["checkpoint"]["body"].update(chain_head=flip_hex(b["checkpoint"]["body"]["chain_head"])), "checkpoint.signature"),
        ("drop a memory", lambda b: b["memories"].pop(), "prompt.hash"),
        ("add a memory", add, "prompt.hash"),
        ("swap two memories", swap, "prompt.hash"),
        ("truncate a proof", lambda b: b["memories"][0].update(proof=b["memories"][0]["proof"][:-1]), "memory#1.inclusion"),
        ("extend a proof", lambda b: b["memories"][0].update(proof=b["memories"][0]["proof"] + ["00" * 32]), "memory#1.inclusion"),
        ("a proof for a different leaf", other_leaf_proof, "memory#1.inclusion"),
        ("receipt claims another session", lambda b: b.update(session="mallory"), "receipt.session"),
        ("an event from another session", lambda b: m0(b).update(session="mallory"), "receipt.session"),
        ("the query cited as a memory", cite_the_query, "receipt.structure"),
        ("ranks out of order", lambda b: b["memories"][0].update(rank=2), "receipt.structure"),
        ("unknown template", lambda b: b["prompt"].update(template="mre-prompt/v0"), "prompt.hash"),
        # (a lone surrogate in a memory's text is refused by the strict parser as MalformedReceipt:
        # tests/core/test_strict_json.py)
        ("a float in a memory's meta", lambda b: m0(b).update(meta={"x": 1.5}), "memory#1.digest"),
        ("an event of this session at the wrong seq", lambda b: b["memories"][0].update(event=dict(other_event, seq=b["memories"][0]["event"]["seq"])), "memory#1.digest"),
    ]


def slipped_through(world: World, raw: bytes, attacks: list[tuple[str, dict[str, Any] | bytes, str]]) -> list[str]:
    """Every attack that was not rejected by the named check (lists all, not just the first)."""
    missed = []
    for name, obj, check in attacks:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        try:
            report = verify_bytes(data, trusted=world.trusted)
        except MalformedReceipt as exc:
            missed.append(f"{name}: refused as malformed ({exc}), expected check {check}")
            continue
        st_ = statuses(report)
        if report.verdict != "failed":
            missed.append(f"{name}: verdict {report.verdict}")
        elif st_.get(check) != FAIL:
            missed.append(f"{name}: {check} is {st_.get(check)}; failed: {[c.name for c in report.failed]}")
    return missed


class TestGeneratedAttacks:
    def _base(self, world: World) -> tuple[dict[str, Any], dict[str, Any]]:
        raw = world.raw(2)
        env = json.loads(raw)
        body = parse_receipt(raw).body
        assert len(body["memories"]) >= 2
        return env, body

    def test_every_field_change_without_resigning_breaks_the_envelope_signature(self, world: World) -> None:
        env, body = self._base(world)
        attacks: list[tuple[str, dict[str, Any] | bytes, str]] = []
        for name, mutate, _check in body_attacks(world):
            b = copy.deepcopy(body)
            mutate(b)
            forged = dict(env, payload=resign(env, b, world.key)["payload"])  # the new payload, the old signature
            attacks.append((name, forged, "envelope.signature"))
        assert slipped_through(world, world.raw(2), attacks) == []

    def test_every_field_change_resigned_by_the_key_is_caught_by_its_named_check(self, world: World) -> None:
        env, body = self._base(world)
        attacks: list[tuple[str, dict[str, Any] | bytes, str]] = []
        for name, mutate, check in body_attacks(world):
            b = copy.deepcopy(body)
            mutate(b)
            attacks.append((name, resign(env, b, world.key), check))
        assert len(attacks) >= 25
        assert slipped_through(world, world.raw(2), attacks) == []

    def test_envelope_attacks_are_caught(self, world: World) -> None:
        env, body = self._base(world)
        stranger = SigningKey.generate()
        stripped = dict(env, signatures=[])
        wrong_keyid = copy.deepcopy(env)
        wrong_keyid["signatures"][0]["keyid"] = stranger.key_id
        bad_sig = copy.deepcopy(env)
        sig = bytearray(base64.b64decode(bad_sig["signatures"][0]["sig"]))
        sig[0] ^= 1
        bad_sig["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
        attacks: list[tuple[str, dict[str, Any] | bytes, str]] = [
            ("re-signed with an unknown key", resign(env, body, stranger), "envelope.signature"),
            ("signature stripped", stripped, "envelope.signature"),
            ("keyid changed", wrong_keyid, "envelope.signature"),
            ("signature bit flipped", bad_sig, "envelope.signature"),
            ("payloadType changed", dict(env, payloadType="application/json"), "envelope.payload_type"),
            ("payloadType changed and re-signed", resign(env, body, world.key, "application/vnd.other+json"), "envelope.payload_type"),
        ]
        assert slipped_through(world, world.raw(2), attacks) == []

    def test_a_receipt_from_another_session_fails_against_this_sessions_ledger(self, tmp_path: Path) -> None:
        w = make_world(tmp_path / "a")
        other = Engine(tmp_path / "a", llm=LLM(api_key=""), receipt_format=1)
        turn = other.turn("bob", "What is my cat called?")
        body = parse_receipt(turn.receipt_path.read_bytes()).body
        body["session"] = "alice"
        forged = resign({}, body, w.key)
        report = verify_bytes(json.dumps(forged).encode(), trusted=w.trusted, data_dir=w.data)
        assert statuses(report)["receipt.session"] == FAIL and report.verdict == "failed"


# ------------------------------------------------------------------ malicious ledgers
def rewrite_from(log: Path, seq: int, edit: Callable[[dict[str, Any]], None]) -> None:
    """Fork: edit the event at `seq`, then recompute every later digest and chain hash."""
    stored = log.read_text().splitlines()
    lines = [json.loads(x) for x in stored]
    prev = GENESIS if seq == 0 else bytes.fromhex(lines[seq - 1]["chain"])
    out = stored[:seq]  # the lines before the fork, byte for byte (a ledger line must stay canonical)
    for i in range(seq, len(lines)):
        ev = lines[i]
        if i == seq:
            edit(ev)
        new = make_event(
            session=ev["session"], seq=ev["seq"], prev=prev, role=ev["role"], text=ev["text"], meta=ev["meta"],
            ts=ev["ts"], event_id=ev["id"], salt=bytes.fromhex(ev["salt"]),
        )
        out.append(new.to_line().decode().rstrip("\n"))
        prev = bytes.fromhex(new.chain)
    log.write_text("\n".join(out) + "\n")


class TestMaliciousLedger:
    def test_a_ledger_truncated_below_the_checkpoint_is_rejected(self, world: World) -> None:
        log = world.engine.ledger.log_path("alice")
        body = parse_receipt(world.raw(2)).body
        keep = body["checkpoint"]["body"]["tree_size"] - 1
        lines = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join(lines[:keep]))
        report = verify_bytes(world.raw(2), trusted=world.trusted, data_dir=world.data)
        st_ = statuses(report)
        assert st_["ledger.chain"] == FAIL and st_["ledger.root"] == FAIL and st_["ledger.consistency"] == FAIL
        assert "truncated" in next(c.message for c in report.checks if c.name == "ledger.chain")

    def test_a_forked_ledger_with_every_later_hash_recomputed_is_rejected(self, world: World) -> None:
        assert verify_bytes(world.raw(2), trusted=world.trusted, data_dir=world.data).verdict == "verified"  # builds the audit cache
        log = world.engine.ledger.log_path("alice")
        body = parse_receipt(world.raw(2)).body
        cited = body["memories"][0]["event"]["seq"]
        rewrite_from(log, cited, lambda ev: ev.update(text=ev["text"] + " (edited)"))
        assert Ledger(world.data).verify("alice").ok  # the fork is internally consistent
        report = verify_bytes(world.raw(2), trusted=world.trusted, data_dir=world.data)
        st_ = statuses(report)
        assert st_["ledger.root"] == FAIL and st_["ledger.events"] == FAIL
        assert st_["ledger.chain"] == PASS  # the chain itself re-walks: only the signed root exposes the fork

    def test_a_ledger_swapped_for_another_history_of_the_same_length_is_rejected(self, tmp_path: Path) -> None:
        w = make_world(tmp_path / "real")
        twin = make_world(tmp_path / "twin")  # same session id, same number of events, other salts/ids
        log = w.engine.ledger.log_path("alice")
        log.write_bytes(twin.engine.ledger.log_path("alice").read_bytes())
        report = verify_bytes(w.raw(2), trusted=w.trusted, data_dir=w.data)
        st_ = statuses(report)
        # (the deterministic stand-in wrote the same answer text in both, so ledger.response may pass)
        assert st_["ledger.root"] == FAIL and st_["ledger.events"] == FAIL and report.verdict == "failed"

    def test_a_data_directory_without_the_session_is_not_verifiable_not_a_forgery(self, world: World, tmp_path: Path) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=empty)
        ledger_rows = [c for c in report.checks if c.name.startswith("ledger.")]
        assert len(ledger_rows) == 5 and all(c.status == NOT_VERIFIABLE for c in ledger_rows)
        assert all("this data directory has no session alice" in c.message for c in ledger_rows)
        assert not report.failed and report.verdict == "unverified"  # asked for the ledger, and it was not there

    def test_a_ledger_emptied_below_the_checkpoint_still_fails(self, world: World) -> None:
        world.engine.ledger.log_path("alice").write_bytes(b"")  # the file exists: the events were removed
        report = verify_bytes(world.raw(0), trusted=world.trusted, data_dir=world.data)
        assert all(statuses(report)[n] == FAIL for n in ("ledger.events", "ledger.chain", "ledger.root")), statuses(report)
        assert report.verdict == "failed"


# ------------------------------------------------------------------ end to end
class TestEndToEnd:
    def test_flipping_one_byte_of_a_cited_event_fails_exactly_the_receipts_that_cite_or_follow_it(self, world: World) -> None:
        fact = world.engine.remember("alice", "Miso's vet is Doctor Costa in Alfama")
        for q in ("Who is Miso's vet?", "Is Doctor Costa in Alfama?"):
            world.receipts.append(world.engine.turn("alice", q).receipt_path)
        n = len(world.receipts)
        bodies = [parse_receipt(world.raw(i)).body for i in range(n)]
        sizes = [b["checkpoint"]["body"]["tree_size"] for b in bodies]
        # an event written after the first three receipts' checkpoints, cited by the last two
        target = fact.seq
        assert all(any(m["event"]["seq"] == target for m in b["memories"]) for b in bodies[3:])
        assert all(size <= target for size in sizes[:3])
        for i in range(n):
            assert verify_bytes(world.raw(i), trusted=world.trusted, data_dir=world.data).verdict == "verified"
        log = world.engine.ledger.log_path("alice")
        lines = log.read_bytes().splitlines(keepends=True)
        line = bytearray(lines[target])
        pos = line.index(b'"text":"') + 9
        line[pos] ^= 0x01
        lines[target] = bytes(line)
        log.write_bytes(b"".join(lines))
        for i, b in enumerate(bodies):
            report = verify_bytes(world.raw(i), trusted=world.trusted, data_dir=world.data)
            cites = any(m["event"]["seq"] == target for m in b["memories"]) or target in (b["query"]["event"]["seq"], b["response"]["event"]["seq"])
            after = sizes[i] > target
            st_ = statuses(report)
            if cites or after:
                assert report.verdict == "failed", i
                assert st_["ledger.chain"] == FAIL
                assert f"line {target + 1}" in next(c.message for c in report.checks if c.name == "ledger.chain")
                if cites:
                    assert st_["ledger.events"] == FAIL
            else:
                assert report.verdict == "verified", (i, report.failed)
            # offline, the receipt itself is still intact
            assert verify_bytes(world.raw(i), trusted=world.trusted).verdict == "verified"

    def test_three_turns_from_the_cli_verify_offline_and_with_the_ledger(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("GROQ_")}
        paths = []
        for msg in ("I adopted a cat named Miso", "I live in Lisbon", "What is my cat called?"):
            proc = subprocess.run([sys.executable, "-m", "chat", str(data), "alice", msg, "--create"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
            assert proc.returncode == 0, proc.stderr
            last = proc.stdout.strip().splitlines()[-1]
            assert last.startswith("receipt: ")
            paths.append(last.removeprefix("receipt: "))
        pub = subprocess.run([sys.executable, "-m", "receipts", "pubkey", str(data)], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert pub.returncode == 0
        (tmp_path / "pub.json").write_text(pub.stdout)
        for p in paths:
            off = subprocess.run([sys.executable, "-m", "receipts", "verify", p, "--trust", str(tmp_path / "pub.json")], capture_output=True, text=True, cwd=ROOT, timeout=60)
            assert off.returncode == 0 and "verdict: VERIFIED" in off.stdout, off.stdout + off.stderr
            led = subprocess.run([sys.executable, "-m", "receipts", "verify", p, "--data", str(data), "--trust", str(tmp_path / "pub.json"), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
            assert led.returncode == 0 and json.loads(led.stdout)["verdict"] == "verified"
            untrusted = subprocess.run([sys.executable, "-m", "receipts", "verify", p, "--data", str(data), "--json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
            assert untrusted.returncode == 3 and json.loads(untrusted.stdout)["verdict"] == "unverified"  # the data's own key is not trusted

    def test_no_receipt_no_answer_when_the_receipt_cannot_be_written(self, tmp_path: Path) -> None:
        engine = Engine(tmp_path, llm=LLM(api_key=""))
        engine.remember("s1", "my cat is Miso")

        def broken(*_a: Any) -> Path:
            raise OSError(28, "No space left on device")

        engine.write_receipt = broken
        with pytest.raises(TurnError, match="receipt could not be written.*withheld"):
            engine.turn("s1", "what is my cat called?")
        events = list(engine.ledger.events("s1"))
        assert events[-1].role == "system" and events[-1].meta["kind"] == "receipt_failure"
        assert not list((tmp_path / "sessions" / "s1").glob("receipts/*.json"))


class TestGroqPath:
    @pytest.fixture
    def fake(self) -> Iterator[FakeGroq]:
        server = FakeGroq()
        server.thread.start()
        yield server
        server.release.set()
        server.server.shutdown()
        server.server.server_close()

    def _engine(self, tmp: Path, fake: FakeGroq) -> Engine:
        return Engine(tmp, llm=LLM(api_key="test-key-not-real", base_url=fake.base_url, timeout=5))

    def test_a_groq_answer_is_recorded_with_the_model_that_answered(self, tmp_path: Path, fake: FakeGroq) -> None:
        fake.reply = Reply(body=completion_body("Your cat is Miso [evt_x].", model="served-model-id"))
        engine = self._engine(tmp_path, fake)
        engine.remember("s1", "my cat is Miso")
        turn = engine.turn("s1", "what is my cat called?")
        assert turn.answer == "Your cat is Miso [evt_x]."
        r = turn.body["response"]
        assert (r["provider"], r["model"], r["fallback_reason"]) == ("groq", "served-model-id", None)
        sent = fake.requests[-1]["json"]["messages"]
        assert "my cat is Miso" in sent[1]["content"] and sent[0]["role"] == "system"
        assert verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path).verdict == "verified"

    @pytest.mark.parametrize("status, needle", [(401, "401"), (429, "429")])
    def test_a_groq_failure_falls_back_and_the_receipt_says_so(self, tmp_path: Path, fake: FakeGroq, status: int, needle: str) -> None:
        fake.reply = Reply(status=status, body=b'{"error": {"message": "nope"}}')
        engine = self._engine(tmp_path, fake)
        turn = engine.turn("s1", "hello there")
        r = turn.body["response"]
        assert r["provider"] == "offline" and r["model"] == "offline-stand-in" and needle in r["fallback_reason"]
        assert turn.answer.startswith("[Offline stand-in")
        assert verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path).verdict == "verified"


    def test_a_streamed_groq_answer_is_signed_as_streamed(self, tmp_path: Path, fake: FakeGroq) -> None:
        fake.reply = stream_reply(GOOD_STREAM)
        engine = self._engine(tmp_path, fake)
        pieces: list[str] = []
        turn = engine.turn("s1", "where did I move?", on_delta=pieces.append)
        assert pieces == PIECES and turn.answer == "".join(PIECES)
        assert turn.body["response"]["provider"] == "groq"
        assert verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path).verdict == "verified"

    def test_a_refused_connection_falls_back_and_the_receipt_says_so(self, tmp_path: Path) -> None:
        engine = Engine(tmp_path, llm=LLM(api_key="test-key-not-real", base_url=refused_base_url(), timeout=5))
        turn = engine.turn("s1", "hello there")
        r = turn.body["response"]
        assert r["provider"] == "offline" and "connection" in r["fallback_reason"].lower()
        assert "test-key-not-real" not in json.dumps(turn.body)
        assert verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path).verdict == "verified"


# ------------------------------------------------------------------ parser fuzzing and CLI
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
    max_leaves=20,
)


class TestParserNeverCrashes:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.binary(max_size=400))
    def test_arbitrary_bytes_give_malformed_or_a_report(self, data: bytes) -> None:
        try:
            verify_bytes(data)
        except MalformedReceipt:
            pass

    @settings(max_examples=300, deadline=None)
    @given(json_values)
    def test_arbitrary_json_gives_malformed_or_a_report(self, value: Any) -> None:
        try:
            verify_bytes(json.dumps(value).encode())
        except MalformedReceipt:
            pass

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.data())
    def test_structural_mutations_of_a_real_body_give_malformed_or_a_failed_report(self, world: World, data: st.DataObject) -> None:
        body = parse_receipt(world.raw(2)).body
        node: Any = body
        path = []
        while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
            key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append(key)
            parent, node = node, node[key]
        if not path:
            return
        parent[path[-1]] = data.draw(json_values)
        forged = resign({}, body, world.key)
        try:
            report = verify_bytes(json.dumps(forged).encode(), trusted=world.trusted, data_dir=world.data)
        except MalformedReceipt:
            return
        assert report.verdict in ("verified", "failed")


def run_verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "receipts", "verify", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


class TestCli:
    def test_exit_codes(self, world: World, tmp_path: Path) -> None:
        pub = tmp_path / "pub.json"
        pub.write_text(format_public_key(world.key.public_key))
        ok = run_verify(str(world.receipts[0]), "--trust", str(pub))
        assert ok.returncode == 0
        env = json.loads(world.raw(0))
        env["payloadType"] = "text/plain"
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(env))
        failed = run_verify(str(bad), "--trust", str(pub))
        assert failed.returncode == 1 and "FAIL  envelope.payload_type" in failed.stdout
        garbage = tmp_path / "garbage.json"
        garbage.write_bytes(b"\x00\xffnot json")
        assert run_verify(str(garbage)).returncode == 2
        huge = tmp_path / "huge.json"
        huge.write_bytes(b" " * (MAX_RECEIPT_BYTES + 1))
        proc = run_verify(str(huge))
        assert proc.returncode == 2 and "limit" in proc.stderr
        assert run_verify(str(tmp_path / "missing.json")).returncode == 2
        unknown = json.loads(world.raw(0))
        b = parse_receipt(world.raw(0)).body
        b["v"] = 3  # (format 2 exists: docs/FORMAT.md §15)
        unknown = resign({}, b, world.key)
        (tmp_path / "v3.json").write_text(json.dumps(unknown))
        proc = run_verify(str(tmp_path / "v3.json"))
        assert proc.returncode == 2 and "version" in proc.stderr and "Traceback" not in proc.stderr


def test_receipt_rows_are_restored_after_the_index_is_lost(world: World) -> None:
    with world.engine.index.read() as conn:
        before = conn.execute("SELECT receipt_id FROM receipts ORDER BY receipt_id").fetchall()
    assert len(before) == 3
    world.engine.index.close()
    (world.data / "index.sqlite").unlink()
    for extra in ("index.sqlite-wal", "index.sqlite-shm"):
        (world.data / extra).unlink(missing_ok=True)
    fresh = Engine(world.data, llm=LLM(api_key=""))
    with fresh.index.read() as conn:
        after = conn.execute("SELECT receipt_id FROM receipts ORDER BY receipt_id").fetchall()
    assert after == before


def test_a_failure_between_question_and_answer_is_recorded_and_gives_no_answer(tmp_path: Path) -> None:
    engine = Engine(tmp_path, llm=LLM(api_key=""))
    engine.remember("s1", "my cat is Miso")

    def broken_search(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("index exploded")

    engine.index.search = broken_search  # type: ignore[method-assign]
    with pytest.raises(TurnError, match="index exploded"):
        engine.turn("s1", "what is my cat called?")
    last = list(engine.ledger.events("s1"))[-1]
    assert last.role == "system" and last.meta["kind"] == "turn_failure"


def test_forget_removes_every_trace_of_a_session(world: World) -> None:
    world.engine.turn("bob", "a message from bob")
    world.engine.forget("alice")
    assert not world.engine.ledger.exists("alice")
    assert not cache_dir(world.data, "alice").exists() and not (world.data / "merkle" / "alice").exists()
    assert world.engine.index.search("alice", "Miso").results == []
    with world.engine.index.read() as conn:
        assert conn.execute("SELECT count(*) FROM receipts WHERE session='alice'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM receipts WHERE session='bob'").fetchone()[0] == 1
    assert world.engine.turn("alice", "hello again").user_event.seq == 0


def test_offline_stand_in_answers_do_not_crowd_out_the_facts_they_quote(tmp_path: Path) -> None:
    engine = Engine(tmp_path, llm=LLM(api_key=""))
    engine.remember("s1", "My cat is called Miso")
    engine.turn("s1", "What is my cat called?")  # a stand-in answer quoting the fact
    engine.remember("s1", "Miso sleeps on the red sofa")
    turn = engine.turn("s1", "Where does Miso sleep?")
    roles = [(h.role, h.text[:20]) for h in turn.hits]
    facts = [i for i, h in enumerate(turn.hits) if h.role == "user" and "Miso" in h.text and "?" not in h.text]
    stand_ins = [i for i, h in enumerate(turn.hits) if h.meta.get("provider") == "offline"]
    assert facts and (not stand_ins or max(facts) < min(stand_ins)), roles
