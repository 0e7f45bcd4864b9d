"""A hostile review of forgetting (issue 10): the words of a forgotten memory must not survive in a field the
receipt's signature covers, where redaction cannot reach — a provider's error message quoted into the answer's
`fallback_reason` — and the confirmation (preview) names what forget then does."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from control import forget as control
from storage.files.receipts import files

from .forget_support import MARKER, engine, files_with_marker


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

    from .forget_support import marked_session

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
    from .forget_support import marked_session

    data = tmp_path / "data"
    eng = engine(data)
    mem_seq, turns = marked_session(eng)
    folder = turns[0].receipt_path.parent
    orphan = folder / ".rcpt_0123456789abcdef0123456789abcdef.tmp"  # receipts.files.write_receipt killed before its rename
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
sys.path.insert(0, sys.argv[1] + "/tests")
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

    root = Path(__file__).resolve().parents[1]
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


KILLED_DELETING = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.retrieval.db import Index
Index.purge_session = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)  # the folder is gone, the rest is not
control.forget_session(sys.argv[2], "alice")
"""


def test_a_session_certificate_is_not_verified_while_its_deletion_is_unfinished(tmp_path: Path) -> None:
    import subprocess
    import sys

    from storage.files.receipts.certificate_io import verify_certificate_bytes

    from .forget_support import marked_session

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "data"
    eng = engine(data)
    marked_session(eng)
    key = [eng.key.public_key]
    eng.index.close()
    eng.ledger.close()
    child = subprocess.run([sys.executable, "-c", KILLED_DELETING, str(root), str(data)], capture_output=True, text=True, timeout=60)
    assert child.returncode == -9, child.stderr[-2000:]
    (cert_path,) = (data / "erasures").glob("erasure-alice-all-*.json")  # written first: it holds only hashes
    assert not (data / "sessions" / "alice").exists() and control.pending(data)
    report = verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data)
    assert report.verdict == "failed" and [c.name for c in report.failed] == ["ledger.deleted"]
    assert ".pending-alice.json" in report.failed[0].message
    # a crash in the middle of removing the folder: the ledger went first, a receipt is still there
    receipts = data / "sessions" / "alice" / "receipts"
    receipts.mkdir(parents=True)
    (receipts / "rcpt_00000000000000000000000000000000.json").write_text("{}")
    restarted = engine(data)
    control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key)
    assert not (data / "sessions" / "alice").exists()  # recover removed the folder again
    assert verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data).verdict == "verified"
    receipts.mkdir(parents=True)
    (receipts / "rcpt_00000000000000000000000000000000.json").write_text("{}")
    report = verify_certificate_bytes(cert_path.read_bytes(), trusted=key, data_dir=data)
    assert [c.name for c in report.failed] == ["ledger.deleted"] and "sessions/alice" in report.failed[0].message


@pytest.mark.parametrize("fmt", [2, 1])
def test_a_certificate_checked_with_the_data_directory_fails_while_a_stored_receipt_still_holds_an_erased_text(tmp_path: Path, fmt: int) -> None:
    """The certificate lists receipts as redacted or withdrawn: with --data, a receipt file that still discloses an
    erased event (a copy put back, a redaction undone) or a withdrawn one still stored is caught, not VERIFIED."""
    from chat.engine import Engine
    from chat.llm import LLM
    from storage.files.receipts.certificate_io import verify_certificate_bytes

    from .forget_support import marked_session

    data = tmp_path / "data"
    eng = Engine(data, llm=LLM(api_key=""), receipt_format=fmt)
    mem_seq, turns = marked_session(eng)
    old = {t.receipt_path: t.receipt_path.read_bytes() for t in turns}
    result = control.forget(data, "alice", [mem_seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    raw = result.certificate_path.read_bytes()
    key = [eng.key.public_key]
    report = verify_certificate_bytes(raw, trusted=key, data_dir=data)
    assert report.verdict == "verified" and [c.status for c in report.checks if c.name == "ledger.receipts"] == ["pass"]
    path, before = next(iter(old.items()))
    path.write_bytes(before)  # the unredacted receipt, back in the data directory
    report = verify_certificate_bytes(raw, trusted=key, data_dir=data)
    assert [c.name for c in report.failed] == ["ledger.receipts"]
    assert path.stem in str(report.failed[0].found)
    assert verify_certificate_bytes(raw, trusted=key).verdict == "verified"  # offline: the signed claims still hold
