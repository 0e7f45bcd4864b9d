"""`python -m ledger repair` on PostgreSQL (issue 14): a row tampered with in the middle is shown, then cut.

The same arguments and output as on files (tests/storage/test_ledger_list_repair.py): the cut rows are kept byte for byte
(a `ledger_cuts` row, the record, and a copy in DATA_DIR/sessions/<s>/), the chain verifies again with the note at
the cut seq, the search and the checkpoint follow the shorter ledger, and a refusal changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from cli.prog_ledger import main
from ledger.messages import Message
from storage.common.checkpoint_issue import issue
from storage.common.keyfiles import load_or_create
from storage.pg.ledger import PgLedger
from storage.pg.repair import kept_cuts
from storage.stores import Stores, pg_stores

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
N = 8
TAMPERED = 5
CUT_KEYS = {"session", "cut_from_seq", "lines", "bytes", "sha256", "file", "break", "repair_event_seq", "events", "head", "verified", "refreshed"}

pytestmark = pytest.mark.pg


@dataclass
class Broken:
    url: str
    data: Path
    stores: Stores

    @property
    def ledger(self) -> PgLedger:
        led = self.stores.ledger
        assert isinstance(led, PgLedger)
        return led

    def rows(self, session: str = "bob") -> list[tuple[int, bytes]]:
        with psycopg.connect(self.url) as conn:
            return [(int(s), bytes(line)) for s, line in conn.execute("SELECT seq, line FROM events WHERE session = %s ORDER BY seq", (session,))]

    def tail_bytes(self, seq: int) -> bytes:
        """The rows from `seq` on as the JSONL file would hold them."""
        return b"".join(line + b"\n" for s, line in self.rows() if s >= seq)

    def copies(self) -> list[Path]:
        return sorted((self.data / "sessions").glob("*/events.jsonl.cut-*"))


CLEARED = ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR")


@pytest.fixture
def broken(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Broken]:
    """Session bob: 8 events (seq 6 alone says "zanzibar"), indexed, a checkpoint over all 8 kept; then the row at
    seq 5 edited in the database. Session alice: 3 events that verify. DATABASE_URL set for in-process commands."""
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    key = load_or_create(data)
    stores = pg_stores(pg_url, data)
    try:
        led = stores.ledger
        texts = [f"bob message {i}" + (" about zanzibar" if i == 6 else "") for i in range(N)]
        led.append_many("bob", [Message("user", t, {}) for t in texts])
        led.append_many("alice", [Message("user", f"alice message {i}", {}) for i in range(3)])
        stores.index.index_session("bob")
        assert issue(stores.receipts, led, "bob", key)["body"]["tree_size"] == N
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'bob message 5', 'bob message 5!'), 'UTF8')"
                " WHERE session = 'bob' AND seq = %s",
                (TAMPERED,),
            )
        monkeypatch.setenv("DATABASE_URL", pg_url)
        yield Broken(pg_url, data, stores)
    finally:
        stores.close()


class TestShow:
    def test_verify_names_the_tampered_row_as_the_first_break(self, broken: Broken, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["verify", str(broken.data), "bob"]) == 1
        assert "BROKEN  bob: line 6, seq 5, digest_mismatch" in capsys.readouterr().out

    def test_without_truncate_at_it_shows_the_break_and_suggests_its_seq_changing_nothing(
        self, broken: Broken, capsys: pytest.CaptureFixture[str]
    ) -> None:
        before = broken.rows()
        assert main(["repair", str(broken.data), "bob"]) == 1
        out = capsys.readouterr().out
        assert "session bob: BROKEN at line 6, seq 5, digest_mismatch" in out
        assert "the ledger has 8 lines; lines 1–5 (seq 0–4) verify" in out
        assert f"--truncate-at 5` would move lines 6–8 (3 lines, {len(broken.tail_bytes(TAMPERED))} bytes)" in out
        assert broken.rows() == before and not kept_cuts(broken.ledger, "bob") and not broken.copies()

    def test_json_names_the_break_and_the_suggested_cut(self, broken: Broken, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["repair", str(broken.data), "bob", "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["break"]["line"] == 6 and doc["break"]["kind"] == "digest_mismatch"
        assert doc["truncate_at"] == TAMPERED and doc["would_cut"] == {"lines": 3, "bytes": len(broken.tail_bytes(TAMPERED))}
        assert (doc["lines"], doc["bytes"]) == (N, len(broken.tail_bytes(0)))

    def test_a_session_that_verifies_has_nothing_to_repair(self, broken: Broken, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["repair", str(broken.data), "alice"]) == 0
        assert "verifies (3 events): nothing to repair" in capsys.readouterr().out


class TestTruncate:
    def test_the_cut_rows_are_kept_byte_for_byte_and_the_chain_verifies_with_the_note_at_the_cut(
        self, broken: Broken, capsys: pytest.CaptureFixture[str]
    ) -> None:
        cut_bytes = broken.tail_bytes(TAMPERED)
        kept_prefix = broken.rows()[:TAMPERED]
        assert main(["repair", str(broken.data), "bob", "--truncate-at", "5", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert set(doc) == CUT_KEYS and doc["verified"] is True
        digest = hashlib.sha256(cut_bytes).hexdigest()
        assert (doc["lines"], doc["bytes"], doc["sha256"], doc["repair_event_seq"], doc["events"]) == (3, len(cut_bytes), digest, 5, 6)
        report = broken.ledger.verify("bob")
        assert report.ok and report.events == 6 and doc["head"] == report.head
        rows = broken.rows()
        assert [s for s, _ in rows] == list(range(6)) and rows[:TAMPERED] == kept_prefix
        note = list(broken.ledger.events("bob"))[-1]
        (kept,) = kept_cuts(broken.ledger, "bob")
        assert (note.seq, note.role) == (5, "system")
        assert note.meta == {"repair": {"v": 1, "cut_from_seq": 5, "lines": 3, "sha256": digest, "file": kept.name}}
        assert (kept.cut_from_seq, kept.data, kept.sha256) == (5, cut_bytes, digest)
        (copy,) = broken.copies()
        assert copy == broken.data / "sessions" / "bob" / kept.name and kept.name.startswith("events.jsonl.cut-5-")
        assert copy.read_bytes() == cut_bytes and copy.stat().st_mode & 0o777 == 0o600
        assert doc["file"] == str(copy)
        assert broken.ledger.append("bob", "user", "and life goes on").seq == 6

    def test_after_the_cut_search_forgets_words_only_in_cut_rows_and_the_checkpoint_is_at_the_new_head(
        self, broken: Broken, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert 6 in [h.seq for h in broken.stores.index.search("bob", "zanzibar", k=5).results]  # indexed before (its neighbours by context)
        assert main(["repair", str(broken.data), "bob", "--truncate-at", "5"]) == 0
        out = capsys.readouterr().out
        assert "dropped the Merkle tree" in out and "signed a checkpoint of 6 events" in out and "re-indexed the session" in out
        assert "ok  bob: 6 events" in out and "ledger_cuts row events.jsonl.cut-5-" in out
        assert broken.stores.index.search("bob", "zanzibar", k=5).results == []
        assert {0, 1, 2, 3, 4} <= {h.seq for h in broken.stores.index.search("bob", "message", k=8).results}  # the kept rows still are
        report = broken.ledger.verify("bob")
        cp = broken.stores.receipts.latest_checkpoint("bob")
        assert cp is not None and (cp["body"]["tree_size"], cp["body"]["chain_head"]) == (6, report.head)

    def test_with_the_database_url_as_data_the_row_alone_keeps_the_cut_and_no_checkpoint_is_signed(
        self, broken: Broken, capsys: pytest.CaptureFixture[str]
    ) -> None:
        cut_bytes = broken.tail_bytes(TAMPERED)
        assert main(["repair", broken.url, "bob", "--truncate-at", "5", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        (kept,) = kept_cuts(broken.ledger, "bob")
        assert doc["file"] == kept.name and kept.data == cut_bytes and not broken.copies()
        assert any(r.startswith("no checkpoint signed") for r in doc["refreshed"])
        assert broken.ledger.verify("bob").ok

    def test_a_smaller_seq_cuts_more(self, broken: Broken) -> None:
        cut_bytes = broken.tail_bytes(2)
        assert main(["repair", str(broken.data), "bob", "--truncate-at", "2", "--json"]) == 0
        assert [k.data for k in kept_cuts(broken.ledger, "bob")] == [cut_bytes]
        assert broken.ledger.verify("bob").events == 3

    def test_a_deleted_session_takes_its_kept_cuts_with_it(self, broken: Broken) -> None:
        assert main(["repair", str(broken.data), "bob", "--truncate-at", "5"]) == 0
        assert kept_cuts(broken.ledger, "bob")
        assert broken.ledger.delete_session("bob")
        assert kept_cuts(broken.ledger, "bob") == []

    def test_the_repair_waits_for_the_sessions_row_lock(self, broken: Broken) -> None:
        before = broken.rows()
        done: list[int] = []
        with psycopg.connect(broken.url) as conn:
            conn.execute("SELECT 1 FROM sessions WHERE session = 'bob' FOR UPDATE")  # a writer is appending
            worker = threading.Thread(target=lambda: done.append(main(["repair", str(broken.data), "bob", "--truncate-at", "5"])))
            worker.start()
            worker.join(1.0)
            assert worker.is_alive() and broken.rows() == before and not kept_cuts(broken.ledger, "bob")
            conn.rollback()
        worker.join(60)
        assert done == [0] and broken.ledger.verify("bob").ok


class TestRefusals:
    @pytest.mark.parametrize(
        ("session", "seq", "says"),
        [
            ("alice", "1", "the ledger verifies"),
            ("bob", "6", "the largest seq to cut from is 5"),
            ("bob", "7", "past the first break"),
            ("bob", "-1", "an integer ≥ 0"),
        ],
    )
    def test_a_refused_cut_is_one_line_and_changes_nothing(
        self, broken: Broken, capsys: pytest.CaptureFixture[str], session: str, seq: str, says: str
    ) -> None:
        before = broken.rows(session)
        cp = broken.stores.receipts.latest_checkpoint("bob")
        assert main(["repair", str(broken.data), session, "--truncate-at", seq]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err and "nothing was changed" in err
        assert broken.rows(session) == before and not kept_cuts(broken.ledger, session) and not broken.copies()
        assert broken.stores.receipts.latest_checkpoint("bob") == cp

    def test_a_prefix_that_does_not_verify_on_its_own_is_refused(self, broken: Broken, capsys: pytest.CaptureFixture[str]) -> None:
        led = broken.ledger
        led.append_many("carol", [Message("user", f"carol message {i}", {}) for i in range(5)])
        led.erase("carol", [1])  # seq 1 erased; its record is seq 5
        with psycopg.connect(broken.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), '\"role\":\"system\"', '\"role\":\"tool\"'), 'UTF8')"
                " WHERE session = 'carol' AND seq = 5"
            )
        brk = led.verify("carol").brk
        assert brk is not None and brk.line == 6
        before = broken.rows("carol")
        assert main(["repair", str(broken.data), "carol", "--truncate-at", "5"]) == 2
        err = capsys.readouterr().err
        assert "before seq 5 does not verify on its own" in err and "cut from an earlier seq" in err
        assert broken.rows("carol") == before and not kept_cuts(led, "carol")
        assert main(["repair", str(broken.data), "carol", "--truncate-at", "1"]) == 0
        assert led.verify("carol").ok

    def test_an_unknown_session_is_one_line_naming_the_database(self, broken: Broken, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["repair", str(broken.data), "nobody", "--truncate-at", "0"]) == 2
        assert "session nobody: no such session in postgresql://" in capsys.readouterr().err


class TestCommandLine:
    def test_the_cli_with_database_url_prints_what_it_prints_on_files(self, broken: Broken, tmp_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in CLEARED}
        env.update(DATABASE_URL=broken.url, PYTHONPATH=str(ROOT), MRE_CACHE_DIR=str(tmp_path / "verifier-cache"))

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            cmd = [sys.executable, "-m", "ledger", "repair", str(broken.data), "bob", *args]
            return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)

        shown = run()
        assert shown.returncode == 1, shown.stderr
        assert shown.stdout.startswith("session bob: BROKEN at line 6, seq 5, digest_mismatch") and "--truncate-at 5`" in shown.stdout
        cut = run("--truncate-at", "5", "--json")
        assert cut.returncode == 0, cut.stderr
        doc = json.loads(cut.stdout)
        assert set(doc) == CUT_KEYS and doc["verified"] is True and doc["repair_event_seq"] == 5
        assert any(r.startswith("signed a checkpoint of 6 events") for r in doc["refreshed"])
        again = run()
        assert again.returncode == 0 and "bob verifies (6 events): nothing to repair" in again.stdout
