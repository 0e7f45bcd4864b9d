"""What a bundle check or import leaves behind, even killed (bundle.verify, bundle.read, bundle.importer).

The same findings as tests/storage/test_ledger_copy.py (its PostgreSQL tests), on the bundle side: each verify or import walked the
bundle's ledger with the verifier's audit cache keyed by its (new, unique) staging folder, leaving one empty
`<cache_root>/audit/<hash>/` folder per bundle; and a check killed mid-walk left its staging folder — the ledger and
the receipts, every memory's words — under $TMPDIR, swept by nothing. Now the check's audit cache lives in a private
folder of its own (storage.files.receipts.ledger_copy.owned_folder), `verify_file` keeps the ledger, receipts and certificates in
files with no name on disk, and a staging folder whose owner died is removed by the next staging.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundle import export_session, import_bundle, imported_dir, verify_file
from bundle.importer import verify_imported_receipt
from bundle.verify import staged
from receipts.keys import PublicKey
from storage.stores import pg_stores

from ..forget_support import MARKER, engine, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, PublicKey]:
    """A bundle of a session whose memory, and the receipts citing it, hold the marker: (data, bundle, key)."""
    folder = tmp_path_factory.mktemp("bundle-leftovers")
    eng = engine(folder / "data")
    marked_session(eng, S)
    eng.index.close()
    eng.ledger.close()
    out = folder / "alice.mre.zip"
    export_session(folder / "data", S, out, key=eng.key)
    return folder / "data", out, eng.key.public_key


def _cache_left(tmp_path: Path) -> list[Path]:
    cache = tmp_path / "cache"
    return sorted(cache.rglob("*")) if cache.exists() else []


def test_bundle_verifies_leave_no_audit_cache_folder_and_no_staging(tmpdir_: Path, tmp_path: Path, marked: tuple[Path, Path, PublicKey]) -> None:
    _data, bundle, key = marked
    verdicts = {verify_file(bundle, [key]).verdict for _ in range(4)}
    assert (verdicts, _cache_left(tmp_path), os.listdir(tmpdir_)) == ({"verified"}, [], [])


def test_bundle_imports_leave_no_audit_cache_folder_and_no_staging(tmpdir_: Path, tmp_path: Path, marked: tuple[Path, Path, PublicKey]) -> None:
    _data, bundle, key = marked
    data2 = tmp_path / "data2"
    done = [import_bundle(data2, bundle, trusted=[key], as_session=f"copy-{i}") for i in range(3)]
    assert [d.duplicate for d in done] == [False, True, True]
    left = sorted(p.name for p in (data2 / "imported").iterdir())
    assert (left, _cache_left(tmp_path), os.listdir(tmpdir_)) == (["copy-0"], [], [])


def test_an_unnamed_staging_reads_the_same_members_as_a_named_one(tmpdir_: Path, marked: tuple[Path, Path, PublicKey]) -> None:
    _data, bundle, _key = marked
    seen = []
    for unnamed in (False, True):
        with staged(bundle, unnamed=unnamed) as opened:
            words = [(name, read()) for folder, pattern in (("receipts", "rcpt_*.json"), ("certificates", "*.json")) for name, read in opened.words(folder, pattern)]
            ledger = os.pread(opened.ledger, 1 << 24, 0) if unnamed and opened.ledger is not None else (opened.data / "sessions" / S / "events.jsonl").read_bytes()
            named_words = files_with_marker(opened.data)
            seen.append((words, ledger, [Path(p).name for p in named_words] if not unnamed else named_words))
    (words, ledger, named), (words_u, ledger_u, named_u) = seen
    assert (words_u, ledger_u) == (words, ledger) and len(words) == 3 and MARKER.encode() in ledger
    assert (named_u, len(named)) == ([], 4), "unnamed: no member holding the words has a name in the staging folder"


KILLED_MID_WALK = """
import os, signal, sys
from contextlib import contextmanager
import bundle.verify as verify

class Dying(verify.Auditor):
    @contextmanager
    def facts(self, session):
        with super().facts(session) as facts:
            assert facts.verified > 0
            os.kill(os.getpid(), signal.SIGKILL)  # a crash in the middle of the check
            yield facts

verify.Auditor = Dying
if sys.argv[1] == "verify":
    verify.verify_file(sys.argv[2])
else:
    from bundle import import_bundle
    import_bundle(sys.argv[3], sys.argv[2], allow_untrusted=True)
"""


def _killed(tmpdir_: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmpdir_), "MRE_CACHE_DIR": str(tmpdir_.parent / "cache")}
    r = subprocess.run([sys.executable, "-c", KILLED_MID_WALK, *args], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == -9, r.stderr


def test_a_bundle_verify_killed_mid_walk_leaves_no_word_on_disk(tmpdir_: Path, marked: tuple[Path, Path, PublicKey]) -> None:
    _data, bundle, _key = marked
    _killed(tmpdir_, "verify", str(bundle))
    assert files_with_marker(tmpdir_, tmpdir_.parent / "cache") == []


def test_the_next_bundle_verify_removes_the_folders_of_a_killed_one(tmpdir_: Path, marked: tuple[Path, Path, PublicKey]) -> None:
    _data, bundle, key = marked
    _killed(tmpdir_, "verify", str(bundle))
    assert sorted(n.split("-")[1] for n in os.listdir(tmpdir_)) == ["audit", "bundle"]  # its staging and cache folders
    assert verify_file(bundle, [key]).verdict == "verified"
    assert os.listdir(tmpdir_) == []


def test_the_next_import_removes_the_staging_folder_of_a_killed_import_and_imports_as_before(
    tmpdir_: Path, tmp_path: Path, marked: tuple[Path, Path, PublicKey]
) -> None:
    data, bundle, key = marked
    data2 = tmp_path / "data2"
    _killed(tmpdir_, "import", str(bundle), str(data2))
    assert [n.startswith(".staging-") for n in os.listdir(data2 / "imported")] == [True]
    done = import_bundle(data2, bundle, trusted=[key])
    assert sorted(os.listdir(data2 / "imported")) == [done.local]
    events = (imported_dir(data2, done.local) / "sessions" / S / "events.jsonl").read_bytes()
    assert events == (data / "sessions" / S / "events.jsonl").read_bytes()
    assert os.listdir(tmpdir_) == []


@pytest.mark.pg
def test_imports_and_imported_receipt_checks_on_postgresql_leave_no_cache_and_no_staging(
    tmpdir_: Path, tmp_path: Path, pg_url: str, marked: tuple[Path, Path, PublicKey]
) -> None:
    _data, bundle, key = marked
    data2 = tmp_path / "data2"
    (data2 / "sessions").mkdir(parents=True)
    with pg_stores(pg_url, data2, pool_size=2) as stores:
        done = import_bundle(data2, bundle, trusted=[key], stores=stores)
        with stores.ledger.imports().open(done.local) as st:
            raws = [st.receipts.read_receipt(S, r) for r in st.receipts.receipt_ids(S)]
        verdicts = [verify_imported_receipt(raw, data2, done.local, stores=stores).verdict for raw in raws]
    assert (len(verdicts), set(verdicts)) == (3, {"verified"})
    left = (os.listdir(data2 / "imported"), _cache_left(tmp_path), os.listdir(tmpdir_), files_with_marker(data2))
    assert left == ([], [], [], [])
