"""The retrieval, receipts, chat and ledger command lines on PostgreSQL: each run as `python -m …` with DATABASE_URL
in its environment, the same arguments as on files (issue 14). A turn's `receipt:` line names a file the visitor
can keep, which verifies against the database's ledger and fails once a cited row is changed there; a server that
cannot be reached, or a URL that is not PostgreSQL's, is one error line (exit 2) that never shows the password."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ledger.messages import Message
from storage.pg.ledger import PgLedger

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120

pytestmark = pytest.mark.pg


def env_for(url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")}
    return {**env, "DATABASE_URL": url, "MRE_CACHE_DIR": str(tmp_path / "verifier-cache"), "PYTHONPATH": str(ROOT)}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err, err
    return err


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir(mode=0o700)
    return folder


def chat_turn(env: dict[str, str], data: Path, session: str, message: str) -> Path:
    proc = run(env, "chat", str(data), session, message, "-k", "4")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("receipt: ")]
    assert len(lines) == 1, proc.stdout
    return Path(lines[0].removeprefix("receipt: "))


def trust_file(env: dict[str, str], data: Path, tmp_path: Path) -> Path:
    proc = run(env, "receipts", "pubkey", str(data))
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "trusted.pub"
    path.write_text(proc.stdout)
    return path


class TestSearch:
    def test_search_finds_what_was_appended_to_the_database(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        with _ledger(pg_url, data) as led:
            led.append_many("s1", [Message("user", "my quokka is called Pip", {}), Message("user", "the weather is mild", {})])
        proc = run(env_for(pg_url, tmp_path), "retrieval", "search", str(data), "s1", "quokka", "--json")
        assert proc.returncode == 0, proc.stderr
        hits = json.loads(proc.stdout)["results"]
        assert hits[0]["seq"] == 0 and "quokka" in hits[0]["text"]
        assert not (data / "index.sqlite").exists()  # the database's index was used, no file one

    def test_search_leaves_out_a_memory_revoked_in_the_database_unless_asked(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        from control.revocation import revoke
        from storage.stores import pg_stores

        with pg_stores(pg_url, data) as stores:
            stores.ledger.append_many("s1", [Message("user", "the quokka is called Pip", {}), Message("user", "a quokka named Max", {})])
            revoke(data, "s1", 0, stores=stores)
        env = env_for(pg_url, tmp_path)
        plain = run(env, "retrieval", "search", str(data), "s1", "quokka", "--json")
        assert plain.returncode == 0, plain.stderr
        assert [h["seq"] for h in json.loads(plain.stdout)["results"]] == [1]
        shown = run(env, "retrieval", "search", str(data), "s1", "quokka", "--json", "--include-revoked")
        by_seq = {h["seq"]: h["revoked_by"] for h in json.loads(shown.stdout)["results"]}
        assert by_seq == {0: 2, 1: None}, shown.stdout

    def test_search_of_a_session_the_database_does_not_hold_is_one_line(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        err = one_error_line(run(env_for(pg_url, tmp_path), "retrieval", "search", str(data), "nobody", "x"))
        assert "session nobody: no such session in postgresql://" in err

    def test_rebuild_indexes_every_session_of_the_database(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        with _ledger(pg_url, data) as led:
            led.append_many("a", [Message("user", "alpha wombat", {})])
            led.append_many("b", [Message("user", "beta wombat", {}), Message("user", "gamma", {})])
        env = env_for(pg_url, tmp_path)
        proc = run(env, "retrieval", "rebuild", str(data))
        assert proc.returncode == 0, proc.stderr
        assert "2 sessions, 3 events" in proc.stdout and "postgresql://" in proc.stdout
        found = run(env, "retrieval", "search", str(data), "b", "wombat", "--json")
        assert json.loads(found.stdout)["results"][0]["text"] == "beta wombat"


def receipt_and_checkpoint(folder: Path) -> tuple[Path, Path]:
    """A receipt file and a checkpoint file made by a turn on files (offline)."""
    from chat.engine import Engine
    from storage.files.receipts import checkpoint_files as checkpoints_files
    from storage.stores import file_stores

    engine = Engine(folder, stores=file_stores(folder))
    try:
        turn = engine.turn("s1", "hello there", k=2)
    finally:
        engine.close()
    kept = folder.parent / "kept-checkpoint.json"
    kept.write_text(json.dumps(checkpoints_files.latest(folder, "s1")))
    return turn.receipt_path, kept


class _ledger:
    """A PgLedger over its own pool, closed after the block."""

    def __init__(self, url: str, data: Path) -> None:
        self.led = PgLedger(url, data)

    def __enter__(self) -> PgLedger:
        return self.led

    def __exit__(self, *exc: object) -> None:
        self.led.close()


class TestTurnAndReceipt:
    def test_a_turn_prints_a_receipt_file_that_verifies_against_the_database(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        env = env_for(pg_url, tmp_path)
        chat_turn(env, data, "alice", "I adopted a grey cat named Miso")
        path = chat_turn(env, data, "alice", "What is my cat called?")
        assert path.is_file() and path.is_relative_to(data / "receipt-copies" / "alice")
        trusted = trust_file(env, data, tmp_path)
        proc = run(env, "receipts", "verify", str(path), "--data", str(data), "--trust", str(trusted), "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        assert report["verdict"] == "verified" and report["mode"] == "ledger" and report["failed"] == 0
        assert any("a private copy of the database's rows" in c["message"] for c in report["checks"])  # how it was read
        assert not (data / "sessions").exists()  # the ledger is the database's: nothing of it in DATA_DIR

    def test_a_changed_row_in_the_database_fails_the_receipt_it_cites(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        env = env_for(pg_url, tmp_path)
        path = chat_turn(env, data, "bob", "my locker code is 4711")
        trusted = trust_file(env, data, tmp_path)
        assert run(env, "receipts", "verify", str(path), "--data", str(data), "--trust", str(trusted)).returncode == 0
        with psycopg.connect(pg_url, autocommit=True) as conn:
            changed = conn.execute(
                "UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), '4711', '4712'), 'UTF8')"
                " WHERE session = 'bob' AND seq = 0"
            ).rowcount
        assert changed == 1
        proc = run(env, "receipts", "verify", str(path), "--data", str(data), "--trust", str(trusted), "--json")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
        assert report["verdict"] == "failed"
        assert any(c["status"] == "fail" and c["name"].startswith(("query.", "ledger.")) for c in report["checks"]), report["checks"]

    def test_a_receipt_of_a_session_the_database_does_not_hold_is_unverified(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        env = env_for(pg_url, tmp_path)
        path = chat_turn(env, data, "carol", "hello")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM events WHERE session = 'carol'")
            conn.execute("DELETE FROM sessions WHERE session = 'carol'")
        proc = run(env, "receipts", "verify", str(path), "--data", str(data), "--trust", str(trust_file(env, data, tmp_path)), "--json")
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["verdict"] == "unverified"

    def test_the_checkpoint_the_database_keeps_proves_the_ledger_extends_it(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        env = env_for(pg_url, tmp_path)
        chat_turn(env, data, "dave", "first")
        proc = run(env, "receipts", "checkpoint", str(data), "dave")
        assert proc.returncode == 0, proc.stderr
        kept = tmp_path / "kept.json"
        kept.write_text(proc.stdout)
        assert json.loads(proc.stdout)["body"]["tree_size"] == 2
        chat_turn(env, data, "dave", "second")
        trusted = trust_file(env, data, tmp_path)
        since = run(env, "ledger", "verify", str(data), "dave", "--since", str(kept), "--trust", str(trusted))
        assert since.returncode == 0, since.stdout + since.stderr
        assert "verdict: VERIFIED" in since.stdout
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'first', 'frost'), 'UTF8')"
                " WHERE session = 'dave' AND seq = 0"
            )
        broken = run(env, "ledger", "verify", str(data), "dave", "--since", str(kept), "--trust", str(trusted))
        assert broken.returncode == 1 and "verdict: FAILED" in broken.stdout, broken.stdout + broken.stderr


    def test_the_checkpoint_the_database_keeps_prints_as_a_signed_note_the_vkey_verifies(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        from receipts.note import parse_checkpoint_text, parse_note, parse_vkey, signed_by

        env = env_for(pg_url, tmp_path)
        chat_turn(env, data, "erin", "first")
        as_json = run(env, "receipts", "checkpoint", str(data), "erin")
        as_note = run(env, "receipts", "checkpoint", str(data), "erin", "--note")
        vkey = run(env, "receipts", "pubkey", str(data), "--vkey")
        assert as_json.returncode == as_note.returncode == vkey.returncode == 0, as_note.stderr
        note = parse_note(as_note.stdout)
        assert signed_by(note, parse_vkey(vkey.stdout)) is True
        body = json.loads(as_json.stdout)["body"]
        cp = parse_checkpoint_text(note.text)
        assert (cp.size, cp.root.hex(), cp.chain_head) == (body["tree_size"], body["root"], body["chain_head"])

class TestRefusals:
    def test_repair_of_a_session_the_database_does_not_hold_is_one_line_naming_it(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        err = one_error_line(run(env_for(pg_url, tmp_path), "ledger", "repair", str(data), "s1"))
        assert "session s1: no such session in postgresql://" in err  # repair works there now (tests/storage/test_ledger_repair_pg.py)

    def test_a_database_url_that_is_not_postgresql_is_one_line_naming_it_without_the_password(self, data: Path, tmp_path: Path) -> None:
        env = env_for("mysql://me:hunter2@localhost/db", tmp_path)
        for args in (("retrieval", "search", str(data), "s1", "x"), ("chat", str(data), "s1", "hello")):
            err = one_error_line(run(env, *args))
            assert "DATABASE_URL" in err and "hunter2" not in err
        assert not list(data.iterdir())  # the chat refused before making a key

    def test_an_unreachable_server_is_one_line_without_the_password_for_every_command(self, data: Path, tmp_path: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # nothing listens here once the socket closes
        env = env_for(f"postgresql://mre:hunter2@127.0.0.1:{port}/nowhere", tmp_path)
        receipt, kept = receipt_and_checkpoint(tmp_path / "files")  # well-formed input: the server is what fails
        commands = [
            ("retrieval", "search", str(data), "s1", "x"),
            ("retrieval", "rebuild", str(data)),
            ("chat", str(tmp_path / "new-data"), "s1", "hello", "--create"),  # the server is what fails
            ("receipts", "verify", str(receipt), "--data", str(data)),
            ("receipts", "checkpoint", str(data), "s1"),
            ("ledger", "verify", str(data), "s1", "--since", str(kept)),
        ]
        procs = [  # in parallel: each waits out the connection timeout
            subprocess.Popen([sys.executable, "-m", *c], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for c in commands
        ]
        for command, p in zip(commands, procs, strict=True):
            out, err = p.communicate(timeout=TIMEOUT_S)
            line = one_error_line(subprocess.CompletedProcess(p.args, p.returncode, out, err))
            assert f"127.0.0.1:{port}" in line and "hunter2" not in line and "***" in line, (command, line)
        assert not (tmp_path / "new-data").exists() and not list(data.iterdir())  # no DATA_DIR, key or copy was made


class TestCertificates:
    def test_an_erasure_certificate_made_on_the_database_verifies_against_it(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        from control.forget import forget
        from storage.stores import pg_stores

        env = env_for(pg_url, tmp_path)
        chat_turn(env, data, "erin", "my bank pin is 9931")
        with pg_stores(pg_url, data) as stores:
            done = forget(data, "erin", [0], stores=stores)
        trusted = trust_file(env, data, tmp_path)
        proc = run(env, "receipts", "verify", str(done.certificate_path), "--data", str(data), "--trust", str(trusted), "--json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["verdict"] == "verified"

    def test_a_deletion_certificate_fails_while_the_database_still_holds_the_sessions_receipts(
        self, pg_url: str, data: Path, tmp_path: Path
    ) -> None:
        from control.forget import forget_session
        from storage.stores import pg_stores

        env = env_for(pg_url, tmp_path)
        receipt = chat_turn(env, data, "fred", "my locker is 12")
        kept = receipt.read_bytes()  # the visitor's copy (the deletion removes DATA_DIR's)
        with pg_stores(pg_url, data) as stores:
            done = forget_session(data, "fred", stores=stores)
        trusted = trust_file(env, data, tmp_path)
        args = ("receipts", "verify", str(done.certificate_path), "--data", str(data), "--trust", str(trusted), "--json")
        proc = run(env, *args)
        assert proc.returncode == 0 and json.loads(proc.stdout)["verdict"] == "verified", proc.stdout + proc.stderr
        assert not receipt.exists()
        with psycopg.connect(pg_url, autocommit=True) as conn:  # a receipt row put back: the session is not all gone
            conn.execute("INSERT INTO receipts (receipt_id, session, envelope) VALUES (%s, 'fred', %s)", (receipt.stem, kept))
        failed = run(env, *args)
        assert failed.returncode == 1, failed.stdout + failed.stderr
        rows = {c["name"]: c for c in json.loads(failed.stdout)["checks"]}
        assert rows["ledger.deleted"]["status"] == "fail" and "receipt row" in rows["ledger.deleted"]["message"], rows["ledger.deleted"]


class TestImport:
    def test_an_import_into_the_database_signs_a_checkpoint_with_the_data_dirs_key(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        from storage.common.keyfiles import load_or_create

        key = load_or_create(data)
        env = env_for(pg_url, tmp_path)
        src = tmp_path / "in.jsonl"
        src.write_text("".join(json.dumps({"role": "user", "text": f"fact {i}"}) + "\n" for i in range(3)))
        proc = run(env, "ledger", "import", "--create", str(data), "gina", str(src))
        assert proc.returncode == 0, proc.stderr
        assert f"signed checkpoint of 3 events by {key.key_id}" in proc.stdout
        cp = run(env, "receipts", "checkpoint", str(data), "gina")
        assert cp.returncode == 0 and json.loads(cp.stdout)["body"]["tree_size"] == 3, cp.stderr
        kept = tmp_path / "kept.json"
        kept.write_text(cp.stdout)
        since = run(env, "ledger", "verify", str(data), "gina", "--since", str(kept), "--trust", str(trust_file(env, data, tmp_path)))
        assert since.returncode == 0 and "verdict: VERIFIED" in since.stdout, since.stdout + since.stderr

    def test_an_import_into_the_database_without_a_key_says_no_checkpoint_was_signed(self, pg_url: str, data: Path, tmp_path: Path) -> None:
        src = tmp_path / "in.jsonl"
        src.write_text(json.dumps({"role": "user", "text": "hello"}) + "\n")
        proc = run(env_for(pg_url, tmp_path), "ledger", "import", "--create", str(data), "hank", str(src))
        assert proc.returncode == 0, proc.stderr
        assert "imported 1 event into session hank" in proc.stdout and "no checkpoint signed (no signing key" in proc.stdout
        assert not list(data.iterdir())  # no key was made
