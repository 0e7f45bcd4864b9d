"""The auditor's cache proves the bytes it vouches for, and verifying never writes into what it verifies (issue 17 §1, §2).

The cache used to trust (inode, size, mtime) and walk only appended bytes, so
an in-place edit with the mtime put back verified; and it lived in
DATA_DIR/audit/, created and written by following symlinks a hostile data
directory could plant. Now every verdict re-hashes the cached bytes chunk by
chunk, the cache lives in the verifier's own folder, and everything is opened
with O_NOFOLLOW.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import orjson
import pytest

import ledger.chunks
from chat.engine import Engine, TurnError
from chat.llm import LLM
from ledger.corrupted import LedgerCorrupted
from ledger.event import make_event
from receipts.keys import SigningKey
from receipts.verify import Report
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes
from storage.files.receipts.audit import cache_dir, cache_root

FACTS = [
    "I moved to Lisbon in March and I love the tram rides",
    "My cat is called Miso and she is a grey tabby",
    "I work as a nurse at the children's hospital",
    "My sister Ana is getting married in October in Porto",
    "I started learning the cello last winter",
    "Miso hates the vacuum cleaner and hides under the bed",
]
QUESTIONS = ["What is my cat called?", "Where is my sister getting married?", "Tell me about Miso and the vacuum cleaner"]
S = "alice"


class World:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.engine = Engine(data, llm=LLM(api_key=""))
        for fact in FACTS:
            self.engine.remember(S, fact)
        # lines 1-6 facts; each turn adds a query and a response: receipts at tree sizes 8, 10, 12
        self.receipts = [self.engine.turn(S, q, k=8).receipt_path.read_bytes() for q in QUESTIONS]
        self.key: SigningKey = self.engine.key

    def verify(self, i: int, *, full: bool = False, data: Path | None = None) -> Report:
        return verify_bytes(self.receipts[i], trusted=[self.key.public_key], data_dir=data or self.data, full=full)

    @property
    def log(self) -> Path:
        return self.data / "sessions" / S / "events.jsonl"


@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "data")


def chain_row(report: Report) -> tuple[str, str]:
    row = next(c for c in report.checks if c.name == "ledger.chain")
    return row.status, row.message


def edit_in_place(path: Path, line_no: int, *, restore_mtime: bool = True) -> None:
    """Change one character of a line's text (same length, same inode); optionally put the mtime back."""
    before = os.stat(path)
    lines = path.read_bytes().splitlines(keepends=True)
    line = lines[line_no - 1]
    at = line.index(b'"text":"') + len(b'"text":"')
    lines[line_no - 1] = line[:at] + (b"X" if line[at : at + 1] != b"X" else b"Y") + line[at + 1 :]
    with open(path, "r+b") as f:
        f.write(b"".join(lines))
    if restore_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size and os.stat(path).st_ino == before.st_ino


def rewrite_and_rechain(path: Path, from_line: int) -> None:
    """Rewrite every line from `from_line` on with a different text and a recomputed chain: it still verifies."""
    lines = path.read_bytes().splitlines(keepends=True)
    prev = bytes.fromhex(orjson.loads(lines[from_line - 2])["chain"])
    for i in range(from_line - 1, len(lines)):
        old = orjson.loads(lines[i])
        ev = make_event(
            session=S, seq=old["seq"], prev=prev, role=old["role"], text=old["text"] + " (rewritten)",
            meta=old["meta"], ts=old["ts"], event_id=old["id"], salt=bytes.fromhex(old["salt"]),
        )
        lines[i] = ev.to_line()
        prev = bytes.fromhex(ev.chain)
    with open(path, "r+b") as f:
        f.write(b"".join(lines))
        f.truncate()


class TestTheCacheProvesTheBytes:
    @pytest.mark.parametrize("restore_mtime", [True, False])
    def test_an_old_line_edited_in_place_fails_a_warm_check(self, world: World, restore_mtime: bool) -> None:
        assert world.verify(2).verdict == "verified"  # builds the cache
        edit_in_place(world.log, 3, restore_mtime=restore_mtime)
        assert not Ledger(world.data).verify(S, parallel=False).ok
        report = world.verify(2)
        assert report.verdict == "failed"
        status, message = chain_row(report)
        assert status == "fail" and "line 3" in message and "bytes changed" in message

    def test_a_running_app_refuses_the_next_turn_after_an_edit(self, world: World) -> None:
        edit_in_place(world.log, 4)
        size = world.log.stat().st_size
        with pytest.raises((TurnError, LedgerCorrupted)):
            world.engine.turn(S, "What is my cat called?", k=8)
        assert world.log.stat().st_size == size  # nothing appended, nothing signed on top of it
        assert world.verify(0).verdict == "failed" and world.verify(2).verdict == "failed"

    def test_every_line_edited_in_place_is_caught_by_a_warm_check(self, world: World) -> None:
        """Generated: each of the 12 lines in turn, one character changed, mtime restored; all must fail."""
        pristine = world.log.read_bytes()
        slipped = []
        for line_no in range(1, 13):
            assert world.verify(2).verdict == "verified"  # the cache is warm and matches
            edit_in_place(world.log, line_no)
            if world.verify(2).verdict != "failed":
                slipped.append(line_no)
            before = os.stat(world.log)
            world.log.write_bytes(pristine)
            os.utime(world.log, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert slipped == []

    def test_the_verify_tab_of_a_running_app_says_failed_after_an_edit(self, tmp_path: Path) -> None:
        from webui.service import Service
        from webui.sessions import new_session_key, session_id

        engine = Engine(tmp_path / "app", llm=LLM(api_key=""))
        service = Service(engine)
        key = new_session_key()
        service.turn(key, "the walrus sings at dawn", 8)
        raw = service.turn(key, "when does the walrus sing?", 8).receipt_path.read_bytes()
        assert service.verify(raw, key)[0].verdict == "verified"
        edit_in_place(tmp_path / "app" / "sessions" / session_id(key) / "events.jsonl", 1)
        assert service.verify(raw, key)[0].verdict == "failed"
        with pytest.raises((TurnError, LedgerCorrupted)):
            service.turn(key, "and now?", 8)
        assert service.verify(raw, key)[0].verdict == "failed"

    def test_a_warm_check_re_hashes_and_says_so(self, world: World) -> None:
        assert world.verify(2).verdict == "verified"
        size = world.log.stat().st_size
        status, message = chain_row(world.verify(2))
        assert status == "pass"
        assert f"re-hashed 12 lines ({size / 1e6:.1f} MB) against the audit cache; nothing new to walk" in message

    def test_lines_appended_after_the_cache_are_the_only_ones_walked(self, world: World) -> None:
        assert world.verify(0).verdict == "verified"
        _status, message = chain_row(world.verify(2))
        assert "re-hashed 12 lines" in message and "re-walked lines 13–12" not in message
        world.engine.turn(S, "Where do I work?", k=8)
        status, message = chain_row(world.verify(2))
        assert status == "pass" and "re-hashed 12 lines" in message and "re-walked lines 13–14" in message

    def test_a_cold_check_and_full_walk_from_genesis_and_say_so(self, world: World) -> None:
        _status, message = chain_row(world.verify(1))
        assert "re-walked lines 1–12 (no audit cache)" in message
        _status, message = chain_row(world.verify(1, full=True))
        assert "re-walked lines 1–12 (--full" in message

    def test_a_changed_chunk_is_re_walked_from_its_start_not_from_genesis(self, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ledger.chunks, "CHUNK_LINES", 4)
        assert world.verify(2, full=True).verdict == "verified"  # chunks: lines 1-4, 5-8, 9-12
        rewrite_and_rechain(world.log, 10)  # still a valid chain: the cache must notice by its bytes alone
        report = world.verify(0)  # tree size 8: untouched by the rewrite
        status, message = chain_row(report)
        assert report.verdict == "verified", report.to_dict()
        assert status == "pass"
        assert "bytes changed from the chunk starting at line 9" in message
        assert "took 8 lines from the cache; re-walked lines 9–12" in message
        later = world.verify(2)  # its response was rewritten: it no longer matches the ledger
        assert later.verdict == "failed"
        assert "re-hashed 12 lines" in chain_row(later)[1]  # and the rebuilt cache is warm again

    @pytest.mark.parametrize(
        "garbage",
        [b"", b"{", b"[]", b'{"format":2,"format":2}', b'{"format":2,"verified":1e400}', b"\xff\xfe", b'{"format":1}'],
        ids=["empty", "torn", "list", "duplicate-key", "huge-float", "not-utf8", "old-format"],
    )
    def test_an_odd_cache_state_is_no_cache(self, world: World, garbage: bytes) -> None:
        assert world.verify(2).verdict == "verified"
        state = cache_dir(world.data, S) / "state.json"
        state.write_bytes(garbage)
        report = world.verify(2)
        assert report.verdict == "verified"
        assert "re-walked lines 1–12 (no audit cache)" in chain_row(report)[1]

    def test_a_cache_state_that_lies_about_its_hashes_forces_a_walk(self, world: World) -> None:
        assert world.verify(2).verdict == "verified"
        state_path = cache_dir(world.data, S) / "state.json"
        state = orjson.loads(state_path.read_bytes())
        state["chunks"][0][4] = "00" * 32
        state_path.write_bytes(orjson.dumps(state))
        edit_in_place(world.log, 2)
        report = world.verify(2)
        assert report.verdict == "failed" and "line 2" in chain_row(report)[1]


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under `root`: its type, size, mtime and content hash (or link target); symlinks not followed."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            p = Path(dirpath) / name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[str(p)] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[str(p)] = ("file", st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p)] = ("dir", st.st_mtime_ns, stat.S_IMODE(st.st_mode))
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("lock", "state.json", "state.json.tmp", "offsets.bin", "level-00.bin", "FORMAT", "FORMAT.tmp"):
        (victim / name).write_bytes(b"precious " + name.encode())
    (victim / "folder").mkdir()
    return victim


def _plant(world: World, victim: Path, where: str) -> None:
    old = world.data / "audit"
    if where == "audit":
        old.symlink_to(victim / "folder")
        return
    old.mkdir()
    if where == "audit/session":
        (old / S).symlink_to(victim / "folder")
        return
    (old / S).mkdir()
    if where == "files":
        for name in ("lock", "state.json", "state.json.tmp", "offsets.bin"):
            (old / S / name).symlink_to(victim / name)
        (old / S / "merkle").symlink_to(victim / "folder")
        return
    (old / S / "merkle").mkdir()
    for name in ("level-00.bin", "level-01.bin", "FORMAT", "FORMAT.tmp"):
        (old / S / "merkle" / name).symlink_to(victim / (name if name != "level-01.bin" else "level-00.bin"))


class TestVerifyingWritesNothingIntoTheDataDirectory:
    def test_a_read_only_data_directory_gives_the_same_verdict_and_is_not_written(self, world: World, tmp_path: Path) -> None:
        before = snapshot(world.data)
        for dirpath, _dirs, files in os.walk(world.data):
            os.chmod(dirpath, 0o555)
            for f in files:
                os.chmod(Path(dirpath) / f, 0o444)
        try:
            ro = snapshot(world.data)
            cold = world.verify(2)
            warm = world.verify(1)
            full = world.verify(0, full=True)
            after = snapshot(world.data)
        finally:
            for dirpath, _dirs, files in os.walk(world.data):
                os.chmod(dirpath, 0o700)
                for f in files:
                    os.chmod(Path(dirpath) / f, 0o600)
        assert [cold.verdict, warm.verdict, full.verdict] == ["verified"] * 3
        assert after == ro and {k for k in before} == {k for k in after}
        assert not (world.data / "audit").exists()
        assert cache_dir(world.data, S).is_dir() and cache_root() in cache_dir(world.data, S).parents

    @pytest.mark.parametrize("where", ["audit", "audit/session", "files", "merkle-files"])
    def test_symlinks_planted_where_the_old_cache_lived_are_not_followed(self, world: World, outside: Path, where: str) -> None:
        _plant(world, outside, where)
        data_before, victim_before = snapshot(world.data), snapshot(outside)
        reports = [world.verify(2), world.verify(1), world.verify(0, full=True)]
        assert [r.verdict for r in reports] == ["verified"] * 3
        assert snapshot(world.data) == data_before
        assert snapshot(outside) == victim_before

    def test_a_symlinked_ledger_is_refused_as_not_a_regular_file(self, world: World, tmp_path: Path) -> None:
        elsewhere = tmp_path / "elsewhere.jsonl"
        elsewhere.write_bytes(world.log.read_bytes())
        world.log.unlink()
        world.log.symlink_to(elsewhere)
        report = world.verify(2)
        assert report.verdict == "failed"
        status, message = chain_row(report)
        assert status == "fail" and "not a regular file" in message

    def test_a_symlinked_session_folder_is_refused_too(self, world: World, tmp_path: Path) -> None:
        import shutil

        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(world.data / "sessions" / S, elsewhere)
        shutil.rmtree(world.data / "sessions" / S)
        (world.data / "sessions" / S).symlink_to(elsewhere)
        report = world.verify(2)
        assert report.verdict == "failed" and "not a regular directory" in chain_row(report)[1]

    @pytest.mark.parametrize("name", ["lock", "state.json", "state.json.tmp", "offsets.bin", "merkle", "merkle/level-00.bin", "merkle/FORMAT", "."])
    def test_a_symlink_planted_in_the_cache_folder_is_not_followed(self, world: World, outside: Path, name: str) -> None:
        assert world.verify(2).verdict == "verified"
        adir = cache_dir(world.data, S)
        target = adir / name
        if target.is_dir() and not target.is_symlink():
            import shutil

            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        target.symlink_to(outside / ("folder" if name in ("merkle", ".") else Path(name).name))
        victim_before = snapshot(outside)
        reports = [world.verify(2), world.verify(1), world.verify(0, full=True)]
        assert [r.verdict for r in reports] == ["verified"] * 3
        assert snapshot(outside) == victim_before
        assert not adir.is_symlink()


class TestTheCacheFolder:
    def test_cache_folders_are_0700_and_files_0600_whatever_the_umask(self, world: World) -> None:
        old = os.umask(0)
        try:
            assert world.verify(2).verdict == "verified"
        finally:
            os.umask(old)
        adir = cache_dir(world.data, S)
        modes = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in [adir, *adir.rglob("*")]}
        for path in [adir.parent, adir.parent.parent]:
            modes[path] = stat.S_IMODE(os.lstat(path).st_mode)
        wrong = {str(p): oct(m) for p, m in modes.items() if m != (0o700 if p.is_dir() else 0o600)}
        assert not wrong

    def test_an_unusable_cache_folder_still_gives_the_verdict_walking_from_genesis(
        self, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        not_a_folder = tmp_path / "cache-is-a-file"
        not_a_folder.write_bytes(b"x")
        monkeypatch.setenv("MRE_CACHE_DIR", str(not_a_folder))
        report = world.verify(2)
        assert report.verdict == "verified"
        assert "re-walked lines 1–12 (the audit cache" in chain_row(report)[1] and "is unusable" in chain_row(report)[1]
        assert not_a_folder.read_bytes() == b"x"

    def test_the_cache_is_keyed_by_the_real_path_of_the_data_directory(self, world: World, tmp_path: Path) -> None:
        alias = tmp_path / "alias"
        alias.symlink_to(world.data)
        assert cache_dir(alias, S) == cache_dir(world.data, S)
        assert cache_dir(tmp_path / "other", S) != cache_dir(world.data, S)

    def test_forgetting_a_session_deletes_its_cache(self, world: World) -> None:
        assert world.verify(2).verdict == "verified"
        assert cache_dir(world.data, S).is_dir()
        assert world.engine.forget(S)
        assert not cache_dir(world.data, S).exists()

    def test_the_cache_folder_follows_the_environment(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setenv("MRE_CACHE_DIR", str(tmp_path / "c"))
        assert cache_root() == tmp_path / "c"
        monkeypatch.delenv("MRE_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
        assert cache_root() == tmp_path / "x" / "memory-receipts"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "h"))
        assert cache_root() == tmp_path / "h" / ".cache" / "memory-receipts"
