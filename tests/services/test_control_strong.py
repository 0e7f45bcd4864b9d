"""The strong property of issue 10: once a memory is forgotten, no file we own holds its words in any case or
stemmed form — the ledger, index.sqlite and its -wal/-shm, receipts, checkpoints, Merkle trees, the auditor's
cache — while the ledger, every old receipt and the certificate still verify, and search and a new turn never
return it. Also after a crash between the ledger's rewrite and the rest, once `recover` ran."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from control import forget as control
from receipts.certificate import certificate_file_bytes
from receipts.keys import SigningKey
from receipts.verify import ERASED, FAIL, WITHHELD
from retrieval.model import SearchError
from storage.files.ledger.store import Ledger
from storage.files.receipts import files
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.certificate_io import verify_certificate_bytes
from storage.files.retrieval.db import Index

from ..forget_support import MARKER, engine, files_with_marker, marked_session


def _cache() -> Path:
    return Path(os.environ["MRE_CACHE_DIR"])


def _roots(data: Path) -> list[Path]:
    return [data, _cache()]


def _warm_everything(eng, data: Path) -> None:  # type: ignore[no-untyped-def]
    """Verify every receipt with the ledger (fills the auditor's cache) so the cache is part of what is grepped."""
    for path in files.list_receipts(data, "alice"):
        report = verify_bytes(path.read_bytes(), trusted=[eng.key.public_key], data_dir=data)
        assert report.verdict == "verified"


def _assert_forgotten(eng, data: Path, mem_seq: int, result: control.ForgetResult, old: dict[str, bytes]) -> None:  # type: ignore[no-untyped-def]
    assert files_with_marker(*_roots(data)) == []
    led = Ledger(data)
    report = led.verify("alice")
    assert report.ok and mem_seq in report.erased
    assert set(result.erased) <= set(report.erased)
    # every old receipt still there verifies, offline and with the ledger, with its erased content named
    key = [eng.key.public_key]
    for rid in old:
        path = files.receipt_path(data, "alice", rid)
        if rid in result.withdrawn:
            assert not path.exists()
            continue
        raw = path.read_bytes()
        offline = verify_bytes(raw, trusted=key)
        assert offline.verdict == "verified" and any(c.status == WITHHELD for c in offline.checks), rid
        with_ledger = verify_bytes(raw, trusted=key, data_dir=data)
        assert with_ledger.verdict == "verified", [c for c in with_ledger.checks if c.status == FAIL]
        assert any(c.status == ERASED for c in with_ledger.checks), rid
    # search never returns it; a new turn does not cite it
    index = Index(data)
    for q in (MARKER, MARKER.upper(), "vorquzqxvjians", "locker code word"):
        for hit in index.search("alice", q, k=20).results:
            assert hit.seq not in result.erased and "vorquzqxvji" not in hit.text.lower()
    index.close()
    fresh = engine(data)
    turn = fresh.turn("alice", f"What is my locker code word, is it {MARKER}?")
    cited = {turn.body["query"]["event"]["seq"]} | {h.seq for h in turn.hits}
    assert not cited & set(result.erased)
    assert "vorquzqxvji" not in turn.answer.lower()
    # the certificate verifies, offline and with the data directory; a tampered one fails a named check
    raw_cert = result.certificate_path.read_bytes()
    assert oct(result.certificate_path.stat().st_mode & 0o777) == "0o600"
    assert oct(result.certificate_path.parent.stat().st_mode & 0o777) == "0o700"
    assert verify_certificate_bytes(raw_cert, trusted=key).verdict == "verified"
    assert verify_certificate_bytes(raw_cert, trusted=key, data_dir=data).verdict == "verified"
    body = json.loads(base64.b64decode(json.loads(raw_cert)["payload"]))
    body["erased"][0]["commit"] = "0" * 64
    from receipts.certificate import sign_certificate

    lie = certificate_file_bytes(sign_certificate(body, fresh.key))
    failed = [c.name for c in verify_certificate_bytes(lie, trusted=key, data_dir=data).failed]
    assert "erased.digests" in failed and "record.lists" in failed and "ledger.erased" in failed
    other = certificate_file_bytes(sign_certificate(json.loads(base64.b64decode(json.loads(raw_cert)["payload"])), SigningKey.generate()))
    assert [c.name for c in verify_certificate_bytes(other, trusted=key).failed] == ["envelope.signature"]


def test_a_forgotten_memory_leaves_no_byte_behind_and_everything_still_verifies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    _warm_everything(eng, data)
    old = {p.stem: p.read_bytes() for p in files.list_receipts(data, "alice")}
    assert files_with_marker(*_roots(data)), "the grep must see the marker before it is forgotten"
    result = control.forget(data, "alice", [mem_seq], reason="the visitor asked", ledger=eng.ledger, index=eng.index, key=eng.key)
    assert result.named == (mem_seq,)
    assert {t.assistant_event.seq for t in turns} <= set(result.cascaded)
    assert set(result.redacted) | set(result.withdrawn) == set(old)
    _assert_forgotten(eng, data, mem_seq, result, old)


def test_a_crash_after_the_ledger_rewrite_is_finished_by_recover(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    _warm_everything(eng, data)
    old = {p.stem: p.read_bytes() for p in files.list_receipts(data, "alice")}

    def crash(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt("killed mid-erasure")

    monkeypatch.setattr(eng.index, "forget_events", crash)
    with pytest.raises(KeyboardInterrupt):
        control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    monkeypatch.undo()
    assert control.pending(data), "the journal must outlive the crash"
    assert files_with_marker(*_roots(data)), "the receipts and the index still held it: the crash was real"
    eng.index.close()
    eng.ledger.close()
    restarted = engine(data)
    (cert_path,) = control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    assert control.pending(data) == []
    record = json.loads(base64.b64decode(json.loads(cert_path.read_bytes())["payload"]))
    erased = tuple(e["seq"] for e in record["erased"])
    result = control.ForgetResult("alice", (mem_seq,), (), erased, {}, tuple(record["receipts"]["redacted"]), tuple(record["receipts"]["withdrawn"]), record["records"][-1]["event"]["seq"], cert_path, {})
    _assert_forgotten(restarted, data, mem_seq, result, old)


def test_forgetting_the_whole_session_leaves_only_a_certificate_of_hashes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    marked_session(eng)
    _warm_everything(eng, data)
    n_receipts = len(files.list_receipts(data, "alice"))
    result = control.forget_session(data, "alice", ledger=eng.ledger, index=eng.index, key=eng.key)
    assert files_with_marker(*_roots(data)) == []
    assert not (data / "sessions" / "alice").exists() and not (data / "merkle" / "alice").exists()
    report = verify_certificate_bytes(result.certificate_path.read_bytes(), trusted=[eng.key.public_key], data_dir=data)
    assert report.verdict == "verified", report.failed
    body = json.loads(base64.b64decode(json.loads(result.certificate_path.read_bytes())["payload"]))
    assert body["counts"] == {"events": 9, "receipts": n_receipts}
    index = Index(data)
    try:
        hits = index.search("alice", "locker code word", k=5).results
    except SearchError:  # an unknown session
        hits = []
    index.close()
    assert hits == []


CHILD = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.ledger.store import Ledger
from receipts import certificate
from storage.files.retrieval.db import Index
point = sys.argv[4]

def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "before-ledger":
    Ledger.erase = die
elif point == "after-ledger":
    Index.forget_events = die
elif point == "after-index":
    from control import steps
    steps.apply_receipts = die
elif point == "after-receipts":
    certificate.sign_certificate = die
control.forget(sys.argv[2], "alice", [int(sys.argv[3])])
"""


@pytest.mark.parametrize("point", ["before-ledger", "after-ledger", "after-index", "after-receipts"])
def test_a_sigkill_at_any_step_leaves_the_old_state_or_one_that_recover_finishes(tmp_path: Path, point: str) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    _warm_everything(eng, data)
    old = {p.stem: p.read_bytes() for p in files.list_receipts(data, "alice")}
    eng.index.close()
    eng.ledger.close()
    child = subprocess.run([sys.executable, "-c", CHILD, str(root), str(data), str(mem_seq), point], capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]
    restarted = engine(data)
    written = control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    assert control.pending(data) == []
    if point == "before-ledger":  # the ledger never changed: nothing was erased, and forgetting again works
        assert written == [] and not Ledger(data).verify("alice").erased
        assert files_with_marker(*_roots(data))
        result = control.forget(data, "alice", [mem_seq], ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    else:
        (cert_path,) = written
        body = json.loads(base64.b64decode(json.loads(cert_path.read_bytes())["payload"]))
        erased = tuple(e["seq"] for e in body["erased"])
        rec = body["records"][-1]["event"]["seq"]
        result = control.ForgetResult("alice", (mem_seq,), (), erased, {}, tuple(body["receipts"]["redacted"]), tuple(body["receipts"]["withdrawn"]), rec, cert_path, {})
    _assert_forgotten(restarted, data, mem_seq, result, old)


def test_retention_deletes_only_a_session_idle_since_before_the_cutoff(tmp_path: Path) -> None:
    import time

    data = tmp_path / "data"
    eng = engine(data)
    eng.remember("alice", "I adopted a grey cat named Miso")
    kw = {"ledger": eng.ledger, "index": eng.index, "key": eng.key}
    assert control.forget_session_if_idle(data, "alice", time.time() - 3600, **kw) is None
    assert (data / "sessions" / "alice" / "events.jsonl").is_file() and not (data / "erasures").exists()
    result = control.forget_session_if_idle(data, "alice", time.time() + 1, **kw)
    assert result is not None and result.certificate_path.is_file()
    assert not (data / "sessions" / "alice").exists()


TURNS = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[1] + "/tests")  # after the root: tests/storage/ must not shadow the storage package
from forget_support import engine
eng = engine(sys.argv[2])
for i in range(int(sys.argv[3])):
    t = eng.turn("alice", f"What is my locker code word? (try {i})")
    print(t.user_event.digest, t.assistant_event.digest, flush=True)
"""


def test_forgetting_during_another_process_s_turns_loses_no_event_forks_nothing_and_leaves_no_marker(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    before, _ = eng.ledger.head("alice")
    n = 12
    child = subprocess.Popen([sys.executable, "-c", TURNS, str(root), str(data), str(n)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    first = child.stdout.readline()  # the other process is turning: forget now
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    rest = child.stdout.read()
    assert child.wait(timeout=120) == 0
    acked = [d for line in (first + rest).splitlines() for d in line.split()]
    assert len(acked) == 2 * n
    led = Ledger(data)
    report = led.verify("alice")
    assert report.ok and report.events == before + 2 * n + 1  # every turn and the one erasure record: no fork
    digests = {ev.digest for ev in led.events("alice")}
    assert set(acked) <= digests
    assert mem_seq in report.erased and set(result.erased) <= set(report.erased)
    assert files_with_marker(*_roots(data)) == []


def test_format_1_receipts_citing_a_forgotten_memory_are_withdrawn_and_nothing_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from chat.engine import Engine
    from chat.llm import LLM

    data = tmp_path / "data"
    eng = Engine(data, llm=LLM(api_key=""), receipt_format=1)
    caplog.set_level(logging.DEBUG)
    mem_seq, turns = marked_session(eng)
    old = {t.receipt_id for t in turns}
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert set(result.withdrawn) == old and result.redacted == ()
    assert files.list_receipts(data, "alice") == []
    with eng.index.read() as conn:
        rows = conn.execute("SELECT receipt_id FROM receipts WHERE session = 'alice'").fetchall()
    assert rows == []
    body = json.loads(base64.b64decode(json.loads(result.certificate_path.read_bytes())["payload"]))
    assert body["receipts"] == {"redacted": [], "withdrawn": sorted(old)}
    assert files_with_marker(*_roots(data)) == []
    assert "vorquzqxvji" not in caplog.text.lower()


def test_preview_names_what_forget_then_erases_and_changes_nothing(tmp_path: Path) -> None:
    import hashlib

    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    snap = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.rglob("*") if p.is_file()}
    plan = control.preview(data, "alice", [mem_seq], ledger=eng.ledger)
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.rglob("*") if p.is_file()} == snap
    assert {t.assistant_event.seq for t in turns} <= set(plan.cascaded)
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert (result.erased, result.cascaded, result.redacted) == (plan.erase, plan.cascaded, tuple(sorted(plan.redact)))


def test_a_reason_that_repeats_the_erased_words_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    before = Ledger(data).head("alice")
    with pytest.raises(control.PlanError, match="reason: repeats a word"):
        control.forget(data, "alice", [mem_seq], reason=f"please drop {MARKER.lower()}s", ledger=eng.ledger, index=eng.index, key=eng.key)
    assert Ledger(data).head("alice") == before and control.pending(data) == []


CHILD_ALL = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.retrieval.db import Index
Index.purge_session = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
control.forget_session(sys.argv[2], "alice")
"""


def test_a_sigkill_while_deleting_a_whole_session_is_finished_by_recover(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    eng = engine(data)
    marked_session(eng)
    _warm_everything(eng, data)
    eng.index.close()
    eng.ledger.close()
    child = subprocess.run([sys.executable, "-c", CHILD_ALL, str(root), str(data)], capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]
    assert control.pending(data)
    restarted = engine(data)
    (cert_path,) = control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    assert control.pending(data) == [] and not (data / "sessions" / "alice").exists()
    assert files_with_marker(*_roots(data)) == []
    report = verify_certificate_bytes(cert_path.read_bytes(), trusted=[restarted.key.public_key], data_dir=data)
    assert report.verdict == "verified", report.failed


def test_an_unreadable_journal_is_left_for_a_person_and_does_not_stop_recovery(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    eng.remember("alice", "I adopted a grey cat named Miso")
    (data / "erasures").mkdir(mode=0o700)
    bad = data / "erasures" / ".pending-alice.json"
    bad.write_bytes(b"{not json")
    assert control.recover(data, ledger=eng.ledger, index=eng.index, key=eng.key) == []
    assert bad.exists()


def test_download_copies_of_the_receipts_it_redacts_are_deleted_and_other_files_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    cache = tmp_path / "gradio-cache"
    copies = []
    for t in turns:
        folder = cache / t.receipt_id[-8:]
        folder.mkdir(parents=True)
        (folder / f"{t.receipt_id}.json").write_bytes(t.receipt_path.read_bytes())
        (folder / f"tampered-{t.receipt_id}.json").write_bytes(b"{}")
        copies += [folder / f"{t.receipt_id}.json", folder / f"tampered-{t.receipt_id}.json"]
    other = cache / "signing.pub"
    other.write_text("key")
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key, copies=[cache, tmp_path / "absent"])
    assert set(result.copies_removed) == set(copies)
    assert other.exists() and files_with_marker(cache) == []


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_control_review.py):
# A hostile review of forgetting (issue 10): the words of a forgotten memory must not survive in a field the
# receipt's signature covers, where redaction cannot reach — a provider's error message quoted into the answer's
# `fallback_reason` — and the confirmation (preview) names what forget then does.
# --------------------------------------------------------------------------------------------------------------------


def _echoing_engine(data: Path) -> Any:
    """An engine whose provider error quoted the prompt (a proxy or a 400 that echoes its input): the words land in
    the signed `response.fallback_reason` of the receipt."""
    eng = engine(data)
    real = eng.llm.complete

    def complete(*args: Any, **kwargs: Any) -> Any:
        done = real(*args, **kwargs)
        said = f"Groq failed: 400 BadRequestError (request failed; server said: cannot process '{MARKER}s')"
        return dataclasses.replace(done, fallback_reason=said)

    eng.llm.complete = complete  # type: ignore[method-assign]
    return eng


def test_a_receipt_whose_signed_fallback_reason_quotes_the_forgotten_memory_is_withdrawn_not_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = _echoing_engine(data)
    mem = eng.remember("alice", f"My locker code word is {MARKER}")
    eng.remember("alice", "I adopted a grey cat named Miso")
    leaky = eng.turn("alice", "What is my locker code word?")
    assert mem.seq in [h.seq for h in leaky.hits]
    eng.llm = engine(data).llm  # later answers: a plain offline stand-in, whose reason quotes nothing
    clean = eng.turn("alice", "What is my locker code word again?")
    assert mem.seq in [h.seq for h in clean.hits]
    plan = control.preview(data, "alice", [mem.seq], ledger=eng.ledger)
    assert leaky.receipt_id in plan.withdraw and leaky.receipt_id not in plan.redact
    result = control.forget(data, "alice", [mem.seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert leaky.receipt_id in result.withdrawn and clean.receipt_id in result.redacted  # only the one that quotes it
    assert [p.stem for p in files.list_receipts(data, "alice")] == [clean.receipt_id]
    assert files_with_marker(data) == []


def test_a_reader_holding_the_index_stops_only_the_purge_the_receipts_are_redacted_and_the_next_forget_finishes(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    import base64
    import json
    import sqlite3
    import time

    from cli.prog_control import main as control_main
    from storage.files.receipts.certificate_io import verify_certificate_bytes
    from storage.files.retrieval import db

    from ..forget_support import marked_session

    monkeypatch.setattr(db, "PURGE_WAIT_S", 0.3)  # the reader is waited out 0.3 s, not 10
    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    key = eng.key.public_key
    eng.index.close()
    eng.ledger.close()
    reader = sqlite3.connect(data / "index.sqlite")  # the app reading: an old snapshot held open
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
    try:
        started = time.monotonic()
        code = control_main(["forget", str(data), "alice", str(mem_seq)])
        took = time.monotonic() - started
        err = capsys.readouterr().err
        assert code == 1, err  # the ledger changed: not "exit 2, nothing changed"
        assert "began and stopped" in err and err.count("\n") == 1 and took < 5
        assert control.pending(data)
        receipts = files.list_receipts(data, "alice")
        assert receipts and files_with_marker(*receipts) == []  # the receipts did not wait for the reader
    finally:
        reader.rollback()
        reader.close()
    assert control_main(["forget", str(data), "alice", "0"]) == 0  # finishes the interrupted one first
    assert "finished an interrupted erasure" in capsys.readouterr().err
    assert control.pending(data) == [] and files_with_marker(data) == []
    certs = {p: json.loads(base64.b64decode(json.loads(p.read_bytes())["payload"])) for p in (data / "erasures").glob("erasure-alice-*.json")}
    (first,) = [p for p, body in certs.items() if mem_seq in [e["seq"] for e in body["erased"]]]
    assert verify_certificate_bytes(first.read_bytes(), trusted=[key], data_dir=data).verdict == "verified"


def test_a_receipt_temp_file_a_killed_turn_left_is_overwritten_and_removed_by_the_forget(tmp_path: Path) -> None:
    from ..forget_support import marked_session

    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    folder = turns[0].receipt_path.parent
    orphan = folder / ".rcpt_0123456789abcdef0123456789abcdef.tmp"  # storage.files.receipts.files.write_receipt killed before its rename
    orphan.write_bytes(turns[0].receipt_path.read_bytes())
    kept = folder / "notes.txt"  # not a receipt temp file: not ours to remove
    kept.write_text("x")
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert not orphan.exists() and kept.exists()
    assert f"receipts/{orphan.name}" in result.quarantine_removed
    assert files_with_marker(data) == []


KILLED_AT_RECEIPT = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
sys.path.append(sys.argv[1] + "/tests")  # after the root: tests/storage/ must not shadow the storage package
from forget_support import MARKER, engine
eng = engine(sys.argv[2])
eng.remember("alice", f"My locker code word is {MARKER}")
real = os.replace
def replace(src, dst, *a, **k):
    if str(src).endswith(".tmp") and ".cites." not in str(src) and "receipts" in str(src):
        os.kill(os.getpid(), signal.SIGKILL)  # the app killed between the answer's append and its receipt
    return real(src, dst, *a, **k)
os.replace = replace
eng.turn("alice", "What is my locker code word?")
"""


def test_an_answer_whose_receipt_was_never_written_is_erased_with_the_memory_it_quotes(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    data = tmp_path / "data"
    child = subprocess.run([sys.executable, "-c", KILLED_AT_RECEIPT, str(root), str(data)], capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr[-2000:]
    eng = engine(data)
    answer = [ev for ev in eng.ledger.events("alice") if ev.role == "assistant"]
    assert len(answer) == 1 and MARKER in answer[0].text and not list((data / "sessions" / "alice" / "receipts").glob("rcpt_*.json"))
    result = control.forget(data, "alice", [0], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert answer[0].seq in result.cascaded
    assert files_with_marker(data) == []


def test_a_turn_whose_receipt_could_not_be_written_leaves_its_answer_to_the_cascade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receipt_failure path (chat.engine): the answer is in the ledger, its receipt is not; forgetting the
    memory it quoted erases it too, and a turn whose receipt was written leaves no `.cites` record behind."""
    from chat.engine import TurnError

    data = tmp_path / "data"
    eng = engine(data)
    mem = eng.remember("alice", f"My locker code word is {MARKER}")
    ok = eng.turn("alice", "What is my locker code word?")
    assert not list(ok.receipt_path.parent.glob("*.cites"))

    def fail(*_a: object, **_k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(eng, "write_receipt", fail)
    with pytest.raises(TurnError):
        eng.turn("alice", "Say my locker code word again")
    monkeypatch.undo()
    answers = [ev.seq for ev in eng.ledger.events("alice") if ev.role == "assistant"]
    assert len(answers) == 2
    assert len(list(ok.receipt_path.parent.glob("*.cites"))) == 1  # the failed turn's record, seqs only
    result = control.forget(data, "alice", [mem.seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert set(answers) <= set(result.cascaded)
    assert files_with_marker(data) == []
    assert not list(ok.receipt_path.parent.glob("*.cites"))  # its answer erased, the record went with it


@pytest.mark.parametrize(
    ("memory", "reason"),
    [("My bank PIN is 48213907", "drop pin 48213907"), ("My cat is called Miso", "forget Miso"), ("Call me on +351 912 345 678", "remove 912 345 678")],
    ids=["pin", "four-letter-name", "phone-number-groups"],
)
def test_a_reason_that_repeats_a_number_or_short_word_of_what_it_forgets_or_revokes_is_refused(tmp_path: Path, memory: str, reason: str) -> None:
    """The reason stays in the ledger for good: a PIN, a name or a phone number in it outlives the erasure."""
    from control.plan import PlanError
    from control.revocation import revoke
    from storage.files.ledger.store import Ledger

    data = tmp_path / "data"
    eng = engine(data)
    ev = eng.remember("alice", memory)
    before = Ledger(data).head("alice")
    with pytest.raises(PlanError, match="reason: repeats a word"):
        control.forget(data, "alice", [ev.seq], reason=reason, ledger=eng.ledger, index=eng.index, key=eng.key)
    with pytest.raises(PlanError, match="reason: repeats a word"):
        revoke(data, "alice", ev.seq, reason=reason)
    assert Ledger(data).head("alice") == before and control.pending(data) == []
    control.forget(data, "alice", [ev.seq], reason="the visitor asked", ledger=eng.ledger, index=eng.index, key=eng.key)


def _forms(word: str) -> set[bytes]:
    """A word as any file of ours could spell it: UTF-8, JSON's \\uXXXX escapes (lower and upper hex), UTF-16."""
    out: set[bytes] = set()
    for w in {word, word.lower(), word.upper()}:
        escaped = json.dumps(w)[1:-1]
        out |= {w.encode(), escaped.encode(), re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), escaped).encode()}
        out |= {w.encode("utf-16-le"), w.encode("utf-16-be")}
    return out


def _holding(roots: list[Path], forms: set[bytes]) -> list[str]:
    hits = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            raw = path.read_bytes()
            blobs = [raw, raw.lower()]
            for run in re.findall(rb"[A-Za-z0-9+/_-]{16,}={0,2}", raw):  # base64 payloads, standard or URL-safe
                for decode in (base64.b64decode, base64.urlsafe_b64decode):
                    try:
                        blobs.append(decode(run + b"=" * (-len(run) % 4)))
                    except ValueError:
                        continue
            if any(f in b or f.lower() in b.lower() for f in forms for b in blobs):
                hits.append(str(path))
    return hits


def test_a_non_ascii_marker_in_text_and_meta_leaves_no_utf8_escaped_utf16_or_base64_copy(tmp_path: Path) -> None:
    import os

    from storage.files.receipts.api import verify_bytes

    marker = "Zürichgrün"
    data = tmp_path / "data"
    eng = engine(data)
    eng.remember("alice", "I adopted a grey cat named Miso")
    mem = eng.remember("alice", f"My favourite colour is {marker}", meta={"note": f"said {marker}", "speaker": marker})
    turns = [eng.turn("alice", "What is my favourite colour?") for _ in range(2)]
    assert all(mem.seq in [h.seq for h in t.hits] for t in turns)
    for path in files.list_receipts(data, "alice"):  # the auditor's cache is filled, and grepped
        assert verify_bytes(path.read_bytes(), trusted=[eng.key.public_key], data_dir=data).verdict == "verified"
    roots = [data, Path(os.environ["MRE_CACHE_DIR"])]
    forms = _forms(marker) | _forms("zurichgrun")  # as folded for the index
    assert _holding(roots, forms), "the grep must see the marker before it is forgotten"
    control.forget(data, "alice", [mem.seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert _holding(roots, forms) == []
