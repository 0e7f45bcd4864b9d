"""File modes: everything the project creates is 0600 in 0700 folders, whatever the umask (issue 17 §5).

Ledgers, the index (and SQLite's -wal/-shm), receipts, the Merkle tree,
checkpoints, quarantined tails and keys hold memories or secrets: no other
local user may read them. Existing looser files are reported, never chmodded.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli.prog_bundle import main
from storage.common.fsmode import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    looser_than_private,
    open_private,
    private_dir,
    write_private,
)
from storage.common.keyfiles import keys_dir
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes
from storage.files.retrieval.db import Index

from ..services.test_bundle import SESSION, Source, build_source

UMASKS = [0o000, 0o022, 0o002]


@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=UMASKS, ids=lambda m: f"umask{m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def wrong_modes(root: Path) -> list[str]:
    """Every path under `root` (root included) whose mode is not exactly 0600 (files) or 0700 (folders)."""
    out = []
    for p in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            continue
        want = PRIVATE_DIR if stat.S_ISDIR(st.st_mode) else PRIVATE_FILE
        if stat.S_IMODE(st.st_mode) != want:
            out.append(f"{p.relative_to(root.parent)}: {stat.S_IMODE(st.st_mode):04o}, expected {want:04o}")
    return out


class TestHelpers:
    def test_private_dir_makes_every_missing_folder_0700(self, tmp_path: Path, umask: int) -> None:
        leaf = private_dir(tmp_path / "a" / "b" / "c")
        assert leaf.is_dir()
        assert wrong_modes(tmp_path / "a") == []

    def test_private_dir_leaves_an_existing_folder_alone(self, tmp_path: Path) -> None:
        (tmp_path / "open").mkdir()
        os.chmod(tmp_path / "open", 0o755)
        private_dir(tmp_path / "open" / "inner")
        assert stat.S_IMODE(os.stat(tmp_path / "open").st_mode) == 0o755
        assert stat.S_IMODE(os.stat(tmp_path / "open" / "inner").st_mode) == 0o700

    def test_open_private_and_write_private_create_0600(self, tmp_path: Path, umask: int) -> None:
        os.close(open_private(tmp_path / "a", os.O_WRONLY | os.O_CREAT))
        os.close(open_private(tmp_path / "b", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        write_private(tmp_path / "c", b"x")
        for name in "abc":
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600, name

    def test_open_private_does_not_chmod_an_existing_file(self, tmp_path: Path) -> None:
        (tmp_path / "f").write_bytes(b"")
        os.chmod(tmp_path / "f", 0o644)
        os.close(open_private(tmp_path / "f", os.O_WRONLY | os.O_CREAT))
        assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == 0o644

    def test_looser_than_private_names_each_loose_path(self, tmp_path: Path) -> None:
        root = private_dir(tmp_path / "data")
        write_private(root / "ok", b"")
        (root / "loose").write_bytes(b"")
        os.chmod(root / "loose", 0o644)
        (root / "sub").mkdir(mode=0o755)
        os.chmod(root / "sub", 0o755)
        found = {p.name: mode for p, mode in looser_than_private(root)}
        assert found == {"loose": 0o644, "sub": 0o755}


class TestEverythingCreatedIsPrivate:
    def test_a_real_turn_leaves_only_0600_files_in_0700_folders(self, tmp_path: Path, umask: int) -> None:
        data = tmp_path / "data"
        engine = Engine(data, llm=LLM(api_key=""))
        engine.remember("alice", "My cat is called Miso")
        turn = engine.turn("alice", "What is my cat called?", k=4)
        assert turn.receipt_path.is_file()
        engine.index.close()
        engine.ledger.close()
        kdir = keys_dir(data)
        assert (kdir / "signing.key").is_file() and (kdir / "signing.pub").is_file()
        names = {p.name for p in data.rglob("*")}
        assert {"events.jsonl", "lock", "index.sqlite", "merkle", "receipts"} <= names
        assert wrong_modes(data) == []
        assert wrong_modes(kdir) == []

    def test_verifying_with_the_ledger_leaves_only_private_files_in_the_verifiers_cache(
        self, tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        cache = tmp_path / "cache"
        monkeypatch.setenv("MRE_CACHE_DIR", str(cache))
        data = tmp_path / "data"
        engine = Engine(data, llm=LLM(api_key=""))
        engine.remember("alice", "My cat is called Miso")
        turn = engine.turn("alice", "What is my cat called?", k=4)
        report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=data)
        assert report.verdict == "verified"
        assert cache.is_dir() and any(p.is_file() for p in cache.rglob("*"))
        assert wrong_modes(cache) == []
        assert wrong_modes(data) == []

    def test_the_index_wal_and_shm_files_are_0600(self, tmp_path: Path, umask: int) -> None:
        led = Ledger(tmp_path / "data")
        led.append("alice", "user", "hello there")
        index = Index(tmp_path / "data", led)
        index.catch_up()
        wal = tmp_path / "data" / "index.sqlite-wal"
        shm = tmp_path / "data" / "index.sqlite-shm"
        assert wal.exists() and shm.exists()  # open while the writer connection lives
        for p in (tmp_path / "data" / "index.sqlite", wal, shm):
            assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p.name
        index.close()

    def test_a_quarantined_torn_tail_is_0600(self, tmp_path: Path, umask: int) -> None:
        led = Ledger(tmp_path / "data")
        led.append("alice", "user", "a complete line")
        with open(led.log_path("alice"), "ab") as f:
            f.write(b'{"torn":')
        led2 = Ledger(tmp_path / "data")
        led2.open_session("alice")
        assert len(led2.quarantined) == 1
        q = Path(led2.quarantined[0].path)
        assert stat.S_IMODE(os.stat(q).st_mode) == 0o600


class TestStartupWarning:
    def test_a_loose_data_directory_is_named_with_the_chmod_that_fixes_it(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        from webui.config import warn_loose_modes

        data = tmp_path / "data"
        data.mkdir()
        os.chmod(data, 0o755)
        (data / "index.sqlite").write_bytes(b"")
        os.chmod(data / "index.sqlite", 0o644)
        with caplog.at_level(logging.WARNING):
            message = warn_loose_modes(data)
        assert message is not None
        assert str(data) in message and "index.sqlite" in message
        assert f"chmod -R go-rwx {data}" in message
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [message]
        assert stat.S_IMODE(os.stat(data / "index.sqlite").st_mode) == 0o644  # reported, not changed

    def test_a_private_data_directory_gives_no_warning(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        from webui.config import warn_loose_modes

        data = private_dir(tmp_path / "data")
        write_private(data / "index.sqlite", b"")
        with caplog.at_level(logging.WARNING):
            assert warn_loose_modes(data) is None
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    def test_a_missing_data_directory_gives_no_warning(self, tmp_path: Path) -> None:
        from webui.config import warn_loose_modes

        assert warn_loose_modes(tmp_path / "nothing-here") is None


def test_sqlite_copies_the_database_mode_to_wal_and_shm(tmp_path: Path) -> None:
    """The fact the index relies on: pre-creating index.sqlite 0600 is enough for its -wal/-shm."""
    old = os.umask(0o022)
    try:
        path = tmp_path / "x.sqlite"
        os.close(open_private(path, os.O_RDWR | os.O_CREAT))
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.commit()
        modes = {s: stat.S_IMODE(os.stat(f"{path}{s}").st_mode) for s in ("", "-wal", "-shm")}
        conn.close()
    finally:
        os.umask(old)
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600}


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_export_mode.py):
# Reviewer finding (issue 28 item 6, "everything the project writes is 0600 in 0700, whatever the umask"): under
# umask 022 `python -m bundle export` (and bundle.export_session) writes the bundle — the whole ledger, every receipt,
# in plain text, stored — 0644, world-readable, while `python -m bundle markdown` writes its Markdown 0600.
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("review5-export-mode"))


@pytest.fixture
def umask022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("umask022")
def test_the_markdown_export_is_0600_under_umask_022(
    source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    out = tmp_path / "s.md"
    assert main(["markdown", str(source.data), SESSION, str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


@pytest.mark.usefixtures("umask022")
def test_the_bundle_export_is_0600_under_umask_022(
    source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    out = tmp_path / "b.mrebundle"
    assert main(["export", str(source.data), SESSION, str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600, f"{stat.S_IMODE(out.stat().st_mode):04o}"


@pytest.mark.usefixtures("umask022")
def test_the_apps_bundle_export_is_0600_under_umask_022(tmp_path: Path) -> None:
    from chat.engine import Engine
    from chat.llm import LLM
    from webui import bundles as bd
    from webui.service import Service
    from webui.sessions import new_session_key

    eng = Engine(tmp_path / "data", llm=LLM(api_key=""))
    svc = Service(eng)
    try:
        key = new_session_key()
        svc.remember(key, "I live in Lisbon")
        done = bd.export_bundle(svc, key)
        assert stat.S_IMODE(done.path.stat().st_mode) == 0o600, f"{stat.S_IMODE(done.path.stat().st_mode):04o}"
    finally:
        eng.close()
        svc.downloads.close()
