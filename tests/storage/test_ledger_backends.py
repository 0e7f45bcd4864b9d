"""The ledger contract on both backends (files and PostgreSQL): append, read, head, verify, erase, import.

`store` yields a Store for each backend: `open()` gives a new ledger object over the same history
(a second process's view). PostgreSQL-only properties (byte-identical export, tampered rows,
concurrent processes, migrate, the CLI) follow.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import EventError, appending, bulk, erasing, importer
from ledger.erasing import EraseError
from ledger.event import GENESIS
from ledger.messages import ImportError_, Message
from storage import migrate as pg_migrate
from storage import redact
from storage.files.ledger.store import Ledger
from storage.pg import copy_in
from storage.pg import ledger as pg_ledger
from storage.pg.ledger import PgLedger
from storage.stores import open_ledger

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_IDS = ["../etc", "a/b", "", "x" * 65, "a b", "s\x00", ".", "..", "é"]


@dataclass
class Store:
    kind: str
    open: Callable[[], Any]


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: list[Any] = []

    def make(factory: Callable[[], Any]) -> Callable[[], Any]:
        def open_() -> Any:
            led = factory()
            opened.append(led)
            return led

        return open_

    if request.param == "file":
        yield Store("file", make(lambda: Ledger(tmp_path / "data")))
    else:
        url = request.getfixturevalue("pg_url")
        yield Store("pg", make(lambda: PgLedger(url, tmp_path / "data")))
    for led in opened:
        led.close()


def lines_of(*texts: str) -> list[bytes]:
    return [b'{"role":"user","text":"%s"}\n' % t.encode() for t in texts]


class TestAppendAndRead:
    def test_appended_events_come_back_in_order_and_verify(self, store: Store) -> None:
        led = store.open()
        written = [led.append("s1", "user" if i % 2 == 0 else "assistant", f"message {i}", {"i": i}) for i in range(10)]
        read = list(led.events("s1"))
        assert [e.seq for e in read] == list(range(10))
        assert [e.digest for e in read] == [e.digest for e in written]
        report = led.verify("s1")
        assert report.ok and report.events == 10 and report.head == written[-1].chain

    def test_events_from_a_start_seq(self, store: Store) -> None:
        led = store.open()
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(7)])
        assert [e.seq for e in led.events("s1", 4)] == [4, 5, 6]

    def test_a_new_ledger_object_continues_the_same_chain(self, store: Store) -> None:
        a = store.open().append("s1", "user", "one")
        b = store.open().append("s1", "assistant", "two")
        assert b.seq == 1 and b.prev == a.chain
        assert store.open().verify("s1").ok

    def test_head_is_count_and_last_chain_and_genesis_when_unknown(self, store: Store) -> None:
        led = store.open()
        assert led.head("nobody") == (0, GENESIS.hex()) and not led.exists("nobody")
        evs = led.append_many("s1", [Message("user", "a", {}), Message("assistant", "b", {})])
        assert led.head("s1") == (2, evs[-1].chain) and led.exists("s1")

    def test_sessions_are_listed_sorted(self, store: Store) -> None:
        led = store.open()
        for s in ("b", "a", "C", "a-1"):
            led.append(s, "user", "hi")
        assert led.sessions() == sorted(["b", "a", "C", "a-1"])

    def test_read_events_returns_the_seqs_asked_in_that_order(self, store: Store) -> None:
        led = store.open()
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(5)])
        assert [e.text for e in led.read_events("s1", [3, 0, 3])] == ["m3", "m0", "m3"]

    @pytest.mark.parametrize("seq", [5, -1, True, "1"])
    def test_read_events_refuses_a_seq_the_session_does_not_hold(self, store: Store, seq: Any) -> None:
        led = store.open()
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(5)])
        with pytest.raises(IndexError, match="no event at seq"):
            led.read_events("s1", [seq])

    def test_reading_an_unknown_session_is_file_not_found(self, store: Store) -> None:
        led = store.open()
        led.append("other", "user", "x")
        with pytest.raises(FileNotFoundError):
            list(led.events("nobody"))
        with pytest.raises(FileNotFoundError):
            led.read_events("nobody", [0])
        with pytest.raises(FileNotFoundError):
            led.verify("nobody")

    def test_one_bad_message_refuses_the_whole_batch(self, store: Store) -> None:
        led = store.open()
        led.append("s1", "user", "first")
        with pytest.raises(EventError):
            led.append_many("s1", [Message("user", "fine", {}), Message("robot", "bad role", {})])
        assert led.head("s1")[0] == 1

    @pytest.mark.parametrize("session", HOSTILE_IDS)
    def test_path_like_or_hostile_session_ids_are_refused(self, store: Store, session: str) -> None:
        led = store.open()
        with pytest.raises(EventError):
            led.append(session, "user", "x")
        with pytest.raises(EventError):
            led.exists(session)
        with pytest.raises(EventError):
            led.head(session)
        with pytest.raises(EraseError):
            led.erase(session, [0])
        assert led.sessions() == []


class TestConcurrency:
    def test_two_threads_appending_to_one_session_make_one_linear_chain(self, store: Store) -> None:
        leds = [store.open(), store.open()]
        errors: list[BaseException] = []

        def writer(k: int) -> None:
            try:
                for i in range(200):
                    leds[k].append("s1", "user", f"writer {k} message {i}")
            except BaseException as exc:  # pragma: no cover - shown by the assert below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        report = store.open().verify("s1")
        assert report.ok and report.events == 400


class TestImport:
    def test_an_import_appends_after_the_events_there(self, store: Store) -> None:
        led = store.open()
        led.append("s1", "user", "before")
        imported = led.import_jsonl("s1", lines_of("a", "b", "c"))
        assert len(imported) == 3 and imported[0].seq == 1 and imported[1].text == "b"
        assert [e.text for e in led.events("s1")] == ["before", "a", "b", "c"]
        assert led.verify("s1").ok

    def test_a_bad_line_refuses_the_import_and_writes_nothing(self, store: Store) -> None:
        led = store.open()
        with pytest.raises(ImportError_, match="line 2"):
            led.import_jsonl("s1", [*lines_of("a"), b'{"role":"robot","text":"x"}\n'])
        assert not led.exists("s1") or led.head("s1")[0] == 0


class TestErase:
    def test_erased_events_keep_the_chain_and_are_recorded(self, store: Store) -> None:
        led = store.open()
        evs = led.append_many("s1", [Message("user", f"secret {i}", {}) for i in range(5)])
        done = led.erase("s1", [3, 1], reason="asked")
        assert [e.seq for e in done.erased] == [1, 3] and all(e.erased for e in done.erased)
        assert done.record.seq == 5 and done.record.meta["erasure"]["reason"] == "asked"
        read = list(led.events("s1"))
        assert read[1].text == "" and read[1].digest == evs[1].digest and read[2].text == "secret 2"
        report = led.verify("s1")
        assert report.ok and report.events == 6 and report.erased == (1, 3)
        assert led.head("s1") == (6, done.record.chain)

    def test_erasing_twice_or_an_erasure_record_or_past_the_end_is_refused(self, store: Store) -> None:
        led = store.open()
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(3)])
        led.erase("s1", [0])
        with pytest.raises(EraseError, match="already erased"):
            led.erase("s1", [0])
        with pytest.raises(EraseError, match="erasure record"):
            led.erase("s1", [3])
        with pytest.raises(EraseError, match="no event at seq 9"):
            led.erase("s1", [9])
        with pytest.raises(EraseError, match="no such session"):
            led.erase("nobody", [0])
        assert led.head("s1")[0] == 4 and led.verify("s1").ok

    def test_an_append_after_an_erasure_continues_from_the_record(self, store: Store) -> None:
        led = store.open()
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(3)])
        rec = led.erase("s1", [1]).record
        nxt = store.open().append("s1", "user", "after")
        assert nxt.seq == rec.seq + 1 and nxt.prev == rec.chain and led.verify("s1").ok


# -- PostgreSQL only -----------------------------------------------------------------------------

NOW = "2026-01-02T03:04:05.000006Z"


def _seeded() -> Callable[[int], bytes]:
    state = [0]

    def draw(n: int) -> bytes:
        out = b""
        while len(out) < n:
            state[0] += 1
            out += hashlib.sha256(b"seed %d" % state[0]).digest()
        return out[:n]

    return draw


def _same_history(led: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same appends, import and erasures, with seeded salts and a fixed clock."""
    monkeypatch.setattr(bulk, "random_bytes", _seeded())
    for mod in (appending, erasing, importer, pg_ledger):
        monkeypatch.setattr(mod, "now_ts", lambda: NOW)
    led.append("s1", "user", "hello \u00e9 \U0001f600", {"k": [1, {"z": None, "a": "b"}]})
    led.append_many("s1", [Message("assistant", f"reply {i}", {"i": i}) for i in range(70)])
    led.import_jsonl("s1", lines_of("imported one", "imported two"))
    led.erase("s1", list(range(2, 68)), reason="many at once")  # 66 seqs: two erasure records
    led.append("s1", "user", "after the erasure")


@pytest.mark.pg
class TestPostgresBytes:
    def test_the_same_history_is_the_same_bytes_on_both_backends(self, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        files = Ledger(tmp_path / "data")
        _same_history(files, monkeypatch)
        pg = PgLedger(pg_url)
        _same_history(pg, monkeypatch)
        out = tmp_path / "export.jsonl"
        with open(out, "wb") as f:
            pg.export("s1", f)
        pg.close()
        assert out.read_bytes() == (tmp_path / "data" / "sessions" / "s1" / "events.jsonl").read_bytes()

    def test_a_tampered_row_is_caught_by_verify_naming_its_seq(self, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(6)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE events SET line = convert_to(replace(convert_from(line, 'UTF8'), '\"m4\"', '\"m5\"'), 'UTF8')"
                " WHERE session = 's1' AND seq = 4")
        report = led.verify("s1")
        led.close()
        assert not report.ok and report.brk is not None
        assert report.brk.seq == 4 and report.brk.kind == "digest_mismatch" and report.events == 4

    def test_a_deleted_row_is_a_seq_gap(self, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(4)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM events WHERE session = 's1' AND seq = 2")
        report = led.verify("s1")
        led.close()
        assert not report.ok and report.brk is not None and report.brk.kind == "seq_gap" and report.brk.seq == 3

    def test_rows_missing_at_the_end_are_a_seq_gap_against_the_recorded_tail(self, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(5)])
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DELETE FROM events WHERE session = 's1' AND seq >= 3")
        report = led.verify("s1")
        led.close()
        assert not report.ok and report.brk is not None and report.brk.kind == "seq_gap" and report.brk.seq == 3 and report.events == 3

    def test_an_erasure_leaves_no_dead_row_version_behind(self, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append_many("s1", [Message("user", f"the secret word is kumquat {i}", {}) for i in range(20)])
        led.erase("s1", list(range(20)))
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            dead = conn.execute("SELECT dead_tuple_count FROM pgstattuple('events')").fetchone()
            live = conn.execute("SELECT count(*) FROM events WHERE position('kumquat'::bytea in line) > 0").fetchone()
        led.close()
        assert dead == (0,) and live == (0,)

    def test_open_ledger_picks_the_backend_from_the_url(self, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("DATABASE_URL", raising=False)
        assert isinstance(open_ledger(tmp_path), Ledger)
        pg = open_ledger(tmp_path, pg_url)
        assert isinstance(pg, PgLedger) and pg.data_dir == tmp_path
        pg.close()
        monkeypatch.setenv("DATABASE_URL", pg_url)
        pg = open_ledger(tmp_path)
        assert isinstance(pg, PgLedger)
        pg.close()


@pytest.mark.pg
class TestPostgresAppendPaths:
    def test_writers_with_stale_tails_never_fork_the_chain(self, pg_url: str) -> None:
        a, b = PgLedger(pg_url), PgLedger(pg_url)
        for i in range(5):  # each object's remembered tail is stale at every turn
            a.append("s1", "user", f"a{i}")
            b.append("s1", "user", f"b{i}")
        report = a.verify("s1")
        texts = [e.text for e in a.events("s1")]
        a.close()
        b.close()
        assert report.ok and report.events == 10 and texts == [f"{w}{i}" for i in range(5) for w in "ab"]

    def test_the_locking_path_alone_keeps_one_chain(self, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(pg_ledger, "FUNCTION_TRIES", 0)  # every append locks first, then COPY
        leds = [PgLedger(pg_url), PgLedger(pg_url)]
        threads = [threading.Thread(target=lambda k=k: [leds[k].append("s1", "user", f"{k}.{i}") for i in range(50)]) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report = leds[0].verify("s1")
        for led in leds:
            led.close()
        assert report.ok and report.events == 100

    def test_an_import_over_the_statement_limit_goes_through_copy_after_existing_events(self, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append("s1", "user", "first")
        n = pg_ledger.FUNCTION_MAX_ROWS + 5
        imported = led.import_jsonl("s1", lines_of(*(f"line {i}" for i in range(n))))
        report = led.verify("s1")
        led.close()
        assert imported.first.seq == 1 and imported.last.seq == n and report.ok and report.events == n + 1


_WRITER = """
import sys
from storage.pg.ledger import PgLedger
led = PgLedger(sys.argv[1])
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
for i in range(200):
    led.append("s1", "user", f"process {sys.argv[2]} message {i}")
led.close()
"""


@pytest.mark.pg
def test_two_processes_appending_to_one_session_make_one_linear_chain(pg_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, pg_url, str(k)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
        for k in range(2)
    ]
    for p in procs:  # both connected before either starts: the appends overlap
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(b"go\n")
        p.stdin.flush()
    for p in procs:
        assert p.wait(timeout=120) == 0
    led = PgLedger(pg_url)
    report = led.verify("s1")
    texts = [e.text for e in led.events("s1")]
    led.close()
    assert report.ok and report.events == 400
    assert {t.split()[1] for t in texts} == {"0", "1"}


# -- migrate and the command line --------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True, text=True, cwd=ROOT, timeout=120, env=full)


def _data_dir(path: Path) -> Path:
    led = Ledger(path)
    led.append_many("a", [Message("user", f"a {i}", {"i": i}) for i in range(40)])
    led.erase("a", [5, 6])
    led.append("a", "assistant", "after")
    led.append_many("b", [Message("user", f"b {i}", {}) for i in range(7)])
    return path


@pytest.mark.pg
class TestMigrate:
    def test_a_migrated_session_exports_byte_identical_to_its_file(self, tmp_path: Path, pg_url: str) -> None:
        data = _data_dir(tmp_path / "data")
        done = run_cli("migrate", str(data), env={"DATABASE_URL": pg_url})
        assert done.returncode == 0, done.stderr
        for s in ("a", "b"):
            out = tmp_path / f"{s}.jsonl"
            exported = run_cli("export", pg_url, s, "-o", str(out))
            assert exported.returncode == 0, exported.stderr
            assert out.read_bytes() == (data / "sessions" / s / "events.jsonl").read_bytes()
        to_stdout = subprocess.run([sys.executable, "-m", "ledger", "export", pg_url, "b"], capture_output=True, cwd=ROOT, timeout=60)
        assert to_stdout.stdout == (data / "sessions" / "b" / "events.jsonl").read_bytes()

    def test_a_stopped_migration_resumes_where_it_stood(self, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        data = _data_dir(tmp_path / "data")
        pg = PgLedger(pg_url)
        monkeypatch.setattr(copy_in, "BATCH_LINES", 10)  # storage.pg.copy_in copies for migrate
        real = PgLedger.copy_lines
        calls = [0]

        def stop_after_two(self: PgLedger, *a: Any) -> int:
            calls[0] += 1
            if calls[0] > 2:
                raise KeyboardInterrupt  # the operator's ^C in the middle of session a
            return real(self, *a)

        monkeypatch.setattr(PgLedger, "copy_lines", stop_after_two)
        with pytest.raises(KeyboardInterrupt):
            pg_migrate.migrate(data, pg)
        assert pg.head("a")[0] == 20 and not pg.exists("b")
        monkeypatch.setattr(PgLedger, "copy_lines", real)
        done = {m.session: m for m in pg_migrate.migrate(data, pg)}
        assert done["a"].status == "resumed" and done["a"].copied == 22 and done["b"].status == "copied"
        again = {m.session: m.status for m in pg_migrate.migrate(data, pg)}
        assert again == {"a": "already", "b": "already"}
        assert pg.verify("a").ok and pg.head("a") == Ledger(data).head("a")
        pg.close()

    def test_a_broken_chain_is_refused_with_its_break_and_nothing_written(self, tmp_path: Path, pg_url: str) -> None:
        data = _data_dir(tmp_path / "data")
        log = data / "sessions" / "b" / "events.jsonl"
        log.write_bytes(log.read_bytes().replace(b'"b 3"', b'"b 9"'))
        done = run_cli("migrate", str(data), env={"DATABASE_URL": pg_url})
        assert done.returncode == 1
        assert "REFUSED b: " in done.stdout and "seq 3" in done.stdout and "digest_mismatch" in done.stdout
        assert "ok      a: copied 42 events" in done.stdout
        pg = PgLedger(pg_url)
        assert not pg.exists("b") and pg.head("a")[0] == 42
        pg.close()

    def test_migrate_names_only_the_sessions_given_after_data_dir_with_database_url_from_the_environment(self, tmp_path: Path, pg_url: str) -> None:
        data = _data_dir(tmp_path / "data")
        done = run_cli("migrate", str(data), "b", env={"DATABASE_URL": pg_url})
        assert done.returncode == 0, done.stderr
        pg = PgLedger(pg_url)
        assert pg.exists("b") and not pg.exists("a")
        pg.close()

    def test_migrate_still_takes_a_url_without_a_password_as_its_second_argument(self, tmp_path: Path, pg_url: str) -> None:
        assert redact(pg_url) == pg_url  # the test server's URL holds no password
        data = _data_dir(tmp_path / "data")
        done = run_cli("migrate", str(data), pg_url, "a")
        assert done.returncode == 0, done.stderr
        pg = PgLedger(pg_url)
        assert pg.exists("a") and not pg.exists("b")
        pg.close()

    def test_a_failing_extra_step_is_one_line_and_the_next_still_runs(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        def broken(data_dir: Path, database: Any) -> str:
            raise ValueError("no key")

        monkeypatch.setattr(pg_migrate, "EXTRA_STEPS", [("first", broken), ("second", lambda d, db: "did it")])
        assert pg_migrate.run_extra_steps(tmp_path, None) == [(False, "first: no key"), (True, "second: did it")]  # type: ignore[arg-type]

    def test_a_database_that_differs_from_the_file_is_refused(self, tmp_path: Path, pg_url: str) -> None:
        data = _data_dir(tmp_path / "data")
        pg = PgLedger(pg_url)
        pg.append("b", "user", "something else")
        done = {m.session: m for m in pg_migrate.migrate(data, pg)}
        assert done["b"].status == "refused" and "seq 0 differs" in done["b"].message
        assert pg.head("b")[0] == 1
        pg.close()


@pytest.mark.pg
class TestCli:
    def test_verify_and_list_read_the_database_named_by_database_url(self, tmp_path: Path, pg_url: str) -> None:
        led = PgLedger(pg_url)
        led.append_many("s1", [Message("user", f"m{i}", {}) for i in range(3)])
        led.close()
        keys = tmp_path / "keys"
        keys.mkdir()
        verified = run_cli("verify", str(keys), env={"DATABASE_URL": pg_url})
        assert verified.returncode == 0 and "ok      s1: 3 events" in verified.stdout
        listed = run_cli("list", pg_url)
        assert listed.returncode == 0 and "1 session, all verified" in listed.stdout

    def test_import_into_the_database(self, tmp_path: Path, pg_url: str) -> None:
        src = tmp_path / "in.jsonl"
        src.write_bytes(b"".join(lines_of("one", "two")))
        done = run_cli("import", pg_url, "s1", str(src))
        assert done.returncode == 0 and "imported 2 events into session s1 (seq 0..1)" in done.stdout
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(b'{"role":"user"}\n')
        refused = run_cli("import", pg_url, "s1", str(bad))
        assert refused.returncode == 2 and "nothing was imported" in refused.stderr

    def test_importing_the_same_file_twice_is_refused_until_an_erasure_reaches_it(self, tmp_path: Path, pg_url: str) -> None:
        src = tmp_path / "in.jsonl"
        src.write_bytes(b"".join(lines_of("one", "two")))
        assert run_cli("import", pg_url, "s1", str(src)).returncode == 0
        again = run_cli("import", pg_url, "s1", str(src))
        assert again.returncode == 2 and "were already imported into session s1 (seq 0..1, from in.jsonl" in again.stderr
        forced = run_cli("import", pg_url, "s1", str(src), "--allow-duplicates")
        assert forced.returncode == 0 and "(seq 2..3)" in forced.stdout
        led = PgLedger(pg_url)
        led.erase("s1", [1])
        digest = led.stage_import("s1", src.read_bytes().splitlines(keepends=True), content=True).sha256
        seen = led.previous_import("s1", digest or "")
        assert seen is not None and (seen.first_seq, seen.last_seq) == (2, 3)  # the record of 0..1 went with seq 1
        led.erase("s1", [2])
        led.close()
        assert run_cli("import", pg_url, "s1", str(src)).returncode == 0  # every record of it reached by an erasure: gone

    def test_an_unreachable_database_is_one_line_without_the_password(self) -> None:
        """The URL from DATABASE_URL: on a command line a URL holding a password is refused before any connection."""
        url = "postgresql://mre:hunter2@127.0.0.1:1/nowhere"
        for args in (["verify", url], ["export", "s1"]):
            done = run_cli(*args, env={"DATABASE_URL": url})
            assert done.returncode == 2
            assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: PostgreSQL at postgresql://mre:***@127.0.0.1:1/nowhere")
            assert "hunter2" not in done.stderr and "Traceback" not in done.stderr

    def test_a_database_url_that_is_not_postgresql_is_one_line_without_the_password(self, tmp_path: Path) -> None:
        done = run_cli("verify", str(tmp_path), env={"DATABASE_URL": "mysql://app:hunter2@db/x"})
        assert done.returncode == 2 and done.stderr == "error: DATABASE_URL: must start with postgresql:// (got 'mysql://app:***@db/x')\n"

    def test_export_refuses_a_hostile_session_id_and_an_unknown_one(self, pg_url: str) -> None:
        hostile = run_cli("export", pg_url, "../../etc/passwd")
        assert hostile.returncode == 2 and "session id" in hostile.stderr
        unknown = run_cli("export", pg_url, "nobody")
        assert unknown.returncode == 2 and "no such session" in unknown.stderr


# -- migrate never takes a password on the command line (issue 28, item 7) -----------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "postgresql://mre:hunter2-secret@127.0.0.1:9/mre",
        "postgres://mre:hunter2-secret@localhost/mre",
        "postgresql://mre@127.0.0.1:9/mre?password=hunter2-secret",
        "postgresql:///mre?host=/tmp&sslpassword=hunter2-secret",
    ],
)
def test_migrate_refuses_a_database_url_with_a_password_in_argv_and_says_to_set_database_url(tmp_path: Path, url: str) -> None:
    data = _data_dir(tmp_path / "data")
    done = run_cli("migrate", str(data), url)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "DATABASE_URL" in lines[0] and "password" in lines[0] and "hunter2" not in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://mre:hunter2-secret@127.0.0.1:9/mre",
        "postgresql://mre@127.0.0.1:9/mre?password=hunter2-secret",
    ],
)
def test_export_refuses_a_database_url_with_a_password_in_argv_and_says_to_set_database_url(url: str) -> None:
    done = run_cli("export", url, "s1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "DATABASE_URL" in lines[0] and "password" in lines[0] and "hunter2" not in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_export_without_a_database_says_to_set_database_url() -> None:
    done = run_cli("export", "s1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "DATABASE_URL" in done.stderr, done.stderr


@pytest.mark.pg
def test_export_reads_database_url_when_the_argument_is_omitted(pg_url: str, tmp_path: Path) -> None:
    data = _data_dir(tmp_path / "data")
    assert run_cli("migrate", str(data), env={"DATABASE_URL": pg_url}).returncode == 0
    via_env = subprocess.run([sys.executable, "-m", "ledger", "export", "a"], capture_output=True, cwd=ROOT, timeout=60, env={**os.environ, "DATABASE_URL": pg_url})
    assert via_env.returncode == 0, via_env.stderr
    assert via_env.stdout == (data / "sessions" / "a" / "events.jsonl").read_bytes()


def test_migrate_without_a_database_says_to_set_database_url(tmp_path: Path) -> None:
    data = _data_dir(tmp_path / "data")
    done = run_cli("migrate", str(data))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "DATABASE_URL" in lines[0], done.stderr
