"""Issue 10: an erasure killed half-way leaves download copies of the receipts it was redacting, which hold the
forgotten words; `recover(copies=...)` deletes them as `forget(copies=...)` would have — copies under the receipt's
name (download, withheld, tampered) and uploads under a name of the visitor's — and leaves every other file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from control import forget as control
from storage.files.receipts import files

from ..forget_support import engine, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[2]

KILL_AFTER_LEDGER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.retrieval.db import Index
Index.forget_events = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
control.forget(sys.argv[2], "alice", [int(sys.argv[3])], copies=[sys.argv[4]])
"""

KILL_DELETING_SESSION = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from control import forget as control
from storage.files.retrieval.db import Index
Index.purge_session = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
control.forget_session(sys.argv[2], "alice", copies=[sys.argv[3]])
"""


def _copies(data: Path, cache: Path) -> list[Path]:
    """Copies of every receipt of alice as the app makes them: `<id>.json`, `<id>-withheld.json`, `tampered-<id>.json`
    (each in a folder of its own, as Downloads and Gradio's cache keep them) and one upload under another name."""
    made = []
    for i, path in enumerate(files.list_receipts(data, "alice")):
        rid = path.stem
        for j, name in enumerate((f"{rid}.json", f"{rid}-withheld.json", f"tampered-{rid}.json")):
            folder = cache / f"{i}-{j}"
            folder.mkdir(parents=True)
            shutil.copyfile(path, folder / name)
            made.append(folder / name)
    upload = cache / "upload" / "my receipt.json"
    upload.parent.mkdir()
    shutil.copyfile(files.list_receipts(data, "alice")[0], upload)
    return [*made, upload]


def _kill(script: str, *args: object) -> None:
    child = subprocess.run([sys.executable, "-c", script, str(ROOT), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr[-2000:]


def test_recover_deletes_the_copies_of_the_receipts_an_erasure_killed_after_the_ledger_was_redacting(tmp_path: Path) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    copies = _copies(data, cache)
    other = cache / "keep" / "signing.pub"
    other.parent.mkdir()
    other.write_text("not a receipt")
    eng.index.close()
    eng.ledger.close()
    _kill(KILL_AFTER_LEDGER, data, mem_seq, cache)
    assert control.pending(data) and files_with_marker(cache), "the kill came before the copies went"
    restarted = engine(data)
    (cert,) = control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key, copies=[cache, tmp_path / "absent"])
    assert cert.is_file() and control.pending(data) == []
    assert files_with_marker(data, cache) == []
    assert not any(p.exists() for p in copies) and other.read_text() == "not a receipt"


def test_recover_deletes_every_copy_of_a_session_whose_deletion_was_killed(tmp_path: Path) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    eng = engine(data)
    marked_session(eng)
    copies = _copies(data, cache)
    eng.index.close()
    eng.ledger.close()
    _kill(KILL_DELETING_SESSION, data, cache)
    assert control.pending(data) and files_with_marker(cache)
    restarted = engine(data)
    (cert,) = control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key, copies=[cache])
    assert cert.is_file() and control.pending(data) == []
    assert files_with_marker(data, cache) == [] and not any(p.exists() for p in copies)


def test_a_journal_written_before_it_listed_receipts_still_gets_the_session_s_copies_by_reading_them(tmp_path: Path) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    eng = engine(data)
    marked_session(eng)
    copies = _copies(data, cache)
    eng.index.close()
    eng.ledger.close()
    _kill(KILL_DELETING_SESSION, data, cache)
    (journal,) = control.pending(data)
    journal.write_bytes(journal.read_bytes().replace(b'"receipts":', b'"receipts_":'))  # the older journal's shape
    restarted = engine(data)
    control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key, copies=[cache])
    assert files_with_marker(data, cache) == [] and not any(p.exists() for p in copies)  # each parses as alice's


def test_an_erasure_killed_before_the_ledger_changed_leaves_the_copies_they_still_match_the_ledger(tmp_path: Path) -> None:
    data, cache = tmp_path / "data", tmp_path / "cache"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    copies = _copies(data, cache)
    eng.index.close()
    eng.ledger.close()
    script = KILL_AFTER_LEDGER.replace("from storage.files.retrieval.db import Index\nIndex.forget_events", "from storage.files.ledger.store import Ledger\nLedger.erase")
    _kill(script, data, mem_seq, cache)
    restarted = engine(data)
    assert control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key, copies=[cache]) == []
    assert all(p.exists() for p in copies)


def test_forget_deletes_the_copies_before_its_journal_goes(tmp_path: Path) -> None:
    """A kill while the copies are deleted leaves the journal, so recover (given the folders) finishes them."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    eng = engine(data)
    mem_seq, _turns = marked_session(eng)
    _copies(data, cache)
    eng.index.close()
    eng.ledger.close()
    script = KILL_AFTER_LEDGER.replace(
        "from storage.files.retrieval.db import Index\nIndex.forget_events = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)",
        "control.purge_copies = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)",
    )
    _kill(script, data, mem_seq, cache)
    assert control.pending(data), "the journal must outlive a kill while the copies are deleted"
    restarted = engine(data)
    control.recover(data, ledger=restarted.ledger, index=restarted.index, key=restarted.key, copies=[cache])
    assert files_with_marker(data, cache) == []

