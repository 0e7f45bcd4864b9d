"""The auditor's own view of a ledger, for verifying receipts "with the ledger" (I/O).

It never trusts a tree or digest the producer stored: it re-walks the JSONL
itself, recomputing every digest, and keeps what it learnt as a cache in the
*verifier's* own folder (`cache_dir`), never inside the data directory it
audits: verifying writes nothing there, and a read-only or hostile data
directory gives the same verdict. The cache holds a Merkle tree of the digests
it recomputed, the byte offset of each line, and state.json with how far it got,
the sha256 of every chunk of CHUNK_LINES lines it walked (ledger/chunks.py), the
erasure state of that prefix (ledger/erasures.py) and the supersession records
it passed over (receipts/supersession_walk.py: what `ledger.states` reads, so a
receipt's check costs what it cites, not a scan to its answer).

How the cache is trusted: it is reused only after the bytes it covers are
re-hashed (a raw sha256, at disk speed — the per-line parse is what the cache
saves) and match what was recorded when they were walked, every time, for
every verdict. After an erasure (lines rewritten in erased form, every later
chunk moved) only the changed chunks are walked again and the moved ones are
taken from the cache (ledger/resync.py). Any other chunk that differs (an
in-place edit, mtime put back or not) is re-walked from its start to the end,
with the Merkle tree and offsets after it cut off and rebuilt; lines appended
after the cached end are walked on from the cached chain head. `full=True` (`--full`)
re-walks from genesis. A walk from genesis of a large ledger runs on every core
(receipts/audit_parallel.py) and keeps byte for byte what the serial walk keeps;
whatever it cannot vouch for (a break, a torn tail) is left to the serial walk. The cache files themselves are outside input: state.json
is parsed strictly and anything odd means "no cache".

Files: folders 0700, files 0600, every path opened with O_NOFOLLOW. A symlink
planted in the cache folder is removed (never followed); the audited ledger is
opened with O_NOFOLLOW and must be a regular file.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from ledger.canonical import CanonicalError, loads_strict
from ledger.chunks import Chunk, ChunkLog, check_contiguous, rehash
from ledger.erasures import ErasureState
from ledger.event import GENESIS, validate_session_id
from ledger.locks import KeyedLocks
from ledger.verify import ERASED_UNRECORDED, Break, ChainWalker, erased_words, read_chunks, verify_stream
from receipts import supersession_walk
from receipts.merkle import leaf_hash
from receipts.verify import LedgerFacts, describe_audit
from storage.common.fsmode import PRIVATE_DIR, open_private, private_dir
from storage.common.tree_errors import MerkleStoreError
from storage.files.ledger.resync import resync
from storage.files.receipts import audit_parallel
from storage.files.receipts.merkle_store import MerkleStore

STATE_VERSION = 4  # 3: with the erasure state of the verified prefix (ledger/erasures.py); 4: and its supersession records
STATE_FIELDS = frozenset({"format", "verified", "verified_bytes", "head", "break", "chunks", "erasures", "supersessions"})
STATE_FILE = "state.json"
OFFSETS_FILE = "offsets.bin"
MERKLE_DIR = "merkle"
LOCK_FILE = "lock"

_locks = KeyedLocks()  # per cache folder; a copy's folder is new for each check, so an entry lives only while used


def cache_root() -> Path:
    """The verifier's own cache folder: $MRE_CACHE_DIR, else $XDG_CACHE_HOME/memory-receipts, else ~/.cache/memory-receipts."""
    env = os.environ.get("MRE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "memory-receipts"


def cache_dir(data_dir: str | os.PathLike[str], session: str) -> Path:
    """Where the audit cache of one session of one data directory lives (keyed by the directory's real path)."""
    validate_session_id(session)
    key = hashlib.sha256(os.fsencode(os.path.realpath(data_dir))).hexdigest()[:16]
    return cache_root() / "audit" / key / session


def forget_cache(data_dir: str | os.PathLike[str], session: str) -> None:
    """Delete a session's audit cache (Engine.forget, retention). Symlinks in it are removed, never followed."""
    path = cache_dir(data_dir, session)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class LedgerUnreadable(Exception):
    """The audited ledger is not something the auditor reads: a symlink, not a regular file, unreadable."""


@dataclass(slots=True)
class _Walk:
    state: dict[str, Any]
    rehashed_bytes: int = 0
    rehashed_lines: int = 0
    cached_lines: int = 0
    rewalked_from_line: int | None = None  # 1-based; None: nothing was walked
    changed_from_line: int | None = None  # first line of the first chunk whose bytes changed
    reason: str | None = None  # why the walk started at genesis
    resynced: tuple[list[tuple[int, int]], int] | None = None  # chunks walked again, lines then taken from the cache


def _open_ledger(data_dir: Path, session: str) -> int:
    sdir = data_dir / "sessions" / session
    path = sdir / "events.jsonl"
    try:
        if stat.S_ISLNK(os.lstat(sdir).st_mode):
            raise LedgerUnreadable(f"{sdir}: not a regular directory (a symlink); refused")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LedgerUnreadable(f"{path}: not a regular file (a symlink); refused") from None
        raise LedgerUnreadable(f"{path}: cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LedgerUnreadable(f"{path}: not a regular file; refused")
    return fd


def _own_dir(path: Path) -> None:
    """`path` is a real folder of ours: a symlink or file planted there is removed (never followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        private_dir(path)
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # a symlink (or a file) where our folder belongs: unlink removes the link itself
        private_dir(path)
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, f"{path}: not a folder of this user")
    if stat.S_IMODE(st.st_mode) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR, follow_symlinks=False)


def _secure_tree(root: Path, adir: Path) -> None:
    private_dir(root)
    cur = root
    for part in adir.relative_to(root).parts:
        cur = cur / part
        _own_dir(cur)
    _own_dir(adir / MERKLE_DIR)


def _open_own(path: Path, flags: int) -> int:
    """open_private with O_NOFOLLOW; a symlink planted at `path` is removed and the file made afresh."""
    try:
        return open_private(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP or not flags & os.O_CREAT:
            raise
        os.unlink(path)
        return open_private(path, flags | os.O_NOFOLLOW)


def _read_own(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        block = os.pread(fd, n - len(out), offset + len(out))
        if not block:
            break
        out += block
    return bytes(out)


@dataclass(frozen=True, slots=True)
class LedgerAt:
    """Where an Auditor reads a session's ledger: `data_dir`'s file and the verifier's cache, or (storage.files.receipts.ledger_copy)
    a copy already open (`ledger`, a descriptor) with its cache in the check's own folder (`cache`)."""

    data_dir: str | os.PathLike[str]
    ledger: int | None = None
    cache: Path | None = None
    fresh: str | None = None  # why it is always walked from genesis (Auditor(fresh=...))


class Auditor:
    @classmethod
    def of(cls, where: LedgerAt, *, full: bool = False) -> Self:
        """An auditor of the ledger `where` says (storage.files.receipts.ledger_copy.ledger_dir)."""
        return cls(where.data_dir, full=full, fresh=where.fresh, ledger=where.ledger, cache=where.cache)

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        full: bool = False,
        fresh: str | None = None,
        ledger: int | None = None,
        cache: Path | None = None,
    ) -> None:
        """`fresh`: why this ledger is always walked from genesis (a fresh copy: storage.files.receipts.ledger_copy), for the notes.
        `ledger`: the session's ledger already open (a copy with no name on disk: storage.files.receipts.ledger_copy), read
        through a duplicate of the descriptor (the caller keeps and closes its own) instead of `data_dir`'s file.
        `cache`: the folder (of this user, private) to keep the audit cache in instead of `cache_dir(data_dir, ...)`."""
        self.data_dir = Path(data_dir)
        self.full = full
        self.fresh = fresh
        self.ledger = ledger
        self.cache = cache

    @contextmanager
    def _locked(self, adir: Path) -> Iterator[None]:
        with _locks.held(str(adir)):
            fd = _open_own(adir / LOCK_FILE, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _open(self, session: str) -> int:
        if self.ledger is None:
            return _open_ledger(self.data_dir, session)
        fd = os.dup(self.ledger)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LedgerUnreadable(f"the ledger of {session} handed to the auditor is not a regular file; refused")
        return fd

    @contextmanager
    def facts(self, session: str) -> Iterator[LedgerFacts]:
        """What the ledger says, valid inside the `with` block (it holds the audit tree open and locked)."""
        validate_session_id(session)
        try:
            fd = self._open(session)
        except FileNotFoundError:
            yield LedgerFacts(session, False, 0, None, _none, _none, _none)
            return
        except LedgerUnreadable as exc:
            yield LedgerFacts(session, True, 0, None, _none, _none, _none, problem=str(exc))
            return
        try:
            adir = cache_dir(self.data_dir, session) if self.cache is None else self.cache
            try:
                _secure_tree(cache_root() if self.cache is None else self.cache.parent, adir)
            except OSError as exc:  # the cache cannot be used: walk in a throw-away folder instead
                with tempfile.TemporaryDirectory(prefix="mre-audit-") as tmp:
                    _own_dir(Path(tmp) / MERKLE_DIR)
                    with self._facts_in(session, fd, Path(tmp), f"the audit cache {adir} is unusable ({exc})") as facts:
                        yield facts
                return
            with self._facts_in(session, fd, adir, None) as facts:
                yield facts
        finally:
            os.close(fd)

    @contextmanager
    def _facts_in(self, session: str, fd: int, adir: Path, reason: str | None) -> Iterator[LedgerFacts]:
        with self._locked(adir):
            try:
                walk = self._refresh(session, fd, adir, reason)
            except (MerkleStoreError, OSError):  # e.g. a symlink planted among the level files
                shutil.rmtree(adir / MERKLE_DIR, ignore_errors=True)
                (adir / STATE_FILE).unlink(missing_ok=True)
                _own_dir(adir / MERKLE_DIR)
                walk = self._refresh(session, fd, adir, "the audit cache was unusable (unreadable or altered); rebuilt")
            state = walk.state
            brk = None if state["break"] is None else Break(**state["break"])
            verified: int = state["verified"]
            off_fd = _open_own(adir / OFFSETS_FILE, os.O_RDONLY)

            def event_at(seq: int) -> dict[str, Any]:
                # two offsets read from offsets.bin (8 bytes each), then the line itself, from the same open ledger
                pair = array("Q")
                pair.frombytes(_pread_all(off_fd, 16 if seq + 1 < verified else 8, 8 * seq))
                start = pair[0]
                end = pair[1] if len(pair) > 1 else state["verified_bytes"]
                obj: dict[str, Any] = loads_strict(_pread_all(fd, end - start, start), f"line {seq + 1}")
                return obj

            try:
                with MerkleStore(adir / MERKLE_DIR) as store:
                    facts = LedgerFacts(
                        session=session,
                        exists=True,
                        verified=verified,
                        first_break=brk,
                        event_at=event_at,
                        root_at=store.root,
                        consistency=store.consistency_proof,
                        rehashed_bytes=walk.rehashed_bytes,
                        rehashed_lines=walk.rehashed_lines,
                        cached_lines=walk.cached_lines,
                        rewalked_from_line=walk.rewalked_from_line,
                        changed_from_line=walk.changed_from_line,
                        cache_reason=walk.reason,
                    )
                    notes = [describe_audit(facts)]
                    if walk.resynced is not None:
                        ranges, skipped = walk.resynced
                        walked = ", ".join(f"{a:,}–{b:,}" for a, b in ranges)
                        notes.append(f"only the changed chunk(s) were walked again (lines {walked}); {skipped:,} lines after them re-hashed equal at their new offsets and were taken from the cache")
                    erased: tuple[int, ...] = state["erasures"].seqs(verified)
                    if erased:
                        notes.append(erased_words(erased))
                    records = supersession_walk.cut(state["supersessions"], verified)
                    yield LedgerFacts(**{**_fields(facts), "notes": tuple(notes), "erased": erased, "supersessions": records})
            finally:
                os.close(off_fd)

    # -- the cache --------------------------------------------------------------------------
    def _load_state(self, adir: Path) -> tuple[dict[str, Any] | None, str | None]:
        """The cached state, if it is exactly what this module writes and agrees with the tree and offsets;
        else None and, when it is worth saying, why it was not used."""
        raw = _read_own(adir / STATE_FILE)
        if raw is None:
            return None, None
        try:
            state = loads_strict(raw, str(adir / STATE_FILE))
            if type(state) is dict and state.get("format") == 3 and "supersessions" not in state:
                return None, "the audit cache predates supersession records (state format 3): re-walked from genesis to collect them"
            if type(state) is not dict or state.get("format") != STATE_VERSION:
                return None, None
            if set(state) != STATE_FIELDS:
                return None, None
            verified, vbytes, head, brk = state["verified"], state["verified_bytes"], state["head"], state["break"]
            if type(verified) is not int or type(vbytes) is not int or verified < 0 or vbytes < 0:
                return None, None
            if type(head) is not str or len(bytes.fromhex(head)) != 32:
                return None, None
            if brk is not None:
                Break(**brk)
            if type(state["chunks"]) is not list:
                return None, None
            chunks = [Chunk.from_list(c) for c in state["chunks"]]
            check_contiguous(chunks)
            if (chunks[-1].end if chunks else 0) != vbytes or (chunks[-1].first_line + chunks[-1].lines if chunks else 0) != verified:
                return None, None
            if (chunks[-1].head if chunks else GENESIS).hex() != head:
                return None, None
            state["chunks"] = chunks
            state["erasures"] = ErasureState.from_json(state["erasures"], verified)
            state["supersessions"] = supersession_walk.from_json(state["supersessions"], verified)
            with MerkleStore(adir / MERKLE_DIR) as store:
                if store.size != verified:
                    return None, None
            st = os.lstat(adir / OFFSETS_FILE)
            if not stat.S_ISREG(st.st_mode) or st.st_size != 8 * verified:
                return None, None
            return state, None
        except (CanonicalError, OSError, ValueError, KeyError, TypeError, MerkleStoreError):
            return None, None

    def _refresh(self, session: str, fd: int, adir: Path, reason: str | None) -> _Walk:
        size = os.fstat(fd).st_size
        state, unused = (None, None) if self.full else self._load_state(adir)
        if state is None:
            why = reason or self.fresh or ("--full: re-walked from genesis" if self.full else unused or "no audit cache")
            return self._walk(session, fd, adir, size, ChunkLog(), ErasureState(), (), _Walk({}, reason=why))
        chunks: list[Chunk] = state["chunks"]
        found = rehash(fd, chunks)
        if found.first_changed is None:
            walk = _Walk(state, found.bytes_hashed, state["verified"], state["verified"])
            if state["break"] is None and size == state["verified_bytes"]:
                return walk  # every byte it vouches for re-hashed and matched; nothing new
            log = ChunkLog.resume(chunks, found.last)
            return self._walk(session, fd, adir, size, log, state["erasures"].cut(log.lines), supersession_walk.cut(state["supersessions"], log.lines), walk)
        kept = chunks[: found.first_changed]
        changed = chunks[found.first_changed]
        walk = _Walk(
            state,
            found.bytes_hashed,
            changed.first_line,
            changed.first_line,
            changed_from_line=changed.first_line + 1,
        )
        quick = self._resync(session, fd, adir, size, state, found.first_changed, walk)
        if quick is not None:
            return quick
        # From the changed chunk on (an erasure rewrites lines in place): walked again from the head before it,
        # with what the lines before it hold of erasure; the tree and offsets are cut there and rebuilt.
        records = supersession_walk.cut(state["supersessions"], changed.first_line)
        return self._walk(session, fd, adir, size, ChunkLog(kept), state["erasures"].cut(changed.first_line), records, walk)

    def _resync(self, session: str, fd: int, adir: Path, size: int, state: dict[str, Any], first: int, walk: _Walk) -> _Walk | None:
        """Walk only the changed chunks when the later ones are the cached bytes, moved (ledger/resync.py)."""
        if state["break"] is not None:
            return None
        off_fd = _open_own(adir / OFFSETS_FILE, os.O_RDWR)
        try:
            with MerkleStore(adir / MERKLE_DIR) as store:

                def cached_offsets(first_line: int, lines: int) -> array[int]:
                    out = array("Q")
                    out.frombytes(_pread_all(off_fd, 8 * lines, 8 * first_line))
                    if len(out) != lines:
                        raise OSError(errno.EIO, "audit cache: offsets.bin is short")
                    return out

                def same(seq: int, digest: bytes, _head: bytes) -> bool:
                    return leaf_hash(digest) == store.leaf_hash(seq)

                found = resync(fd, size, session, state["chunks"], first, state["erasures"], same, cached_offsets)
            if found is None:
                return None
            data, at = found.offsets.tobytes(), 8 * found.offsets_from
            while data:
                n = os.pwrite(off_fd, data, at)
                data, at = data[n:], at + n
            os.fsync(off_fd)
        finally:
            os.close(off_fd)
        # every line walked again is the one cached (same digest) or its erased form, which is no record (§4.4)
        records = tuple(r for r in state["supersessions"] if r[0] not in found.erasures.erased)
        out = self._walk(session, fd, adir, size, found.log, found.erasures, records, walk)
        out.rehashed_bytes += found.hashed_bytes
        out.cached_lines = state["verified"] - sum(b - a + 1 for a, b in found.walked)
        out.resynced = (found.walked, found.skipped_lines)
        return out

    def _walk(
        self,
        session: str,
        fd: int,
        adir: Path,
        size: int,
        log: ChunkLog,
        erasures: ErasureState,
        records: tuple[supersession_walk.Record, ...],
        walk: _Walk,
    ) -> _Walk:
        """Walk the ledger from where `log` ends to its end, extending the tree, offsets and chunks, and the
        supersession records (`records`: those before where it starts) with the ones it passes over."""
        start_line, start = log.lines, log.end
        if start_line == 0:
            shutil.rmtree(adir / MERKLE_DIR, ignore_errors=True)
            _own_dir(adir / MERKLE_DIR)
            if not records and not (erasures.erased or erasures.recorded or erasures.unchecked):
                whole = audit_parallel.walk(fd, session, size)
                if whole is not None:
                    return self._keep_whole(fd, adir, whole, walk)
        store = MerkleStore(adir / MERKLE_DIR)
        off_fd = _open_own(adir / OFFSETS_FILE, os.O_RDWR | os.O_CREAT)
        try:
            store.truncate(min(start_line, store.size))
            if store.size != start_line:
                raise MerkleStoreError(f"audit cache: the Merkle tree holds {store.size} leaves, expected {start_line}")
            os.ftruncate(off_fd, 8 * start_line)
            write_from = start_line
            walker = ChainWalker(session, start_line, log.head, start_line, erasures)
            digests: list[bytes] = []
            offsets = array("Q")
            pos = [start]

            def on_event(_seq: int, digest: bytes, length: int) -> None:
                digests.append(digest)
                offsets.append(pos[0])
                pos[0] += length
                log.line(length)
                if len(digests) >= 65536:
                    store.extend(digests)
                    digests.clear()

            scan = supersession_walk.RecordScan(start)
            with os.fdopen(os.dup(fd), "rb") as f:
                f.seek(start)
                report = verify_stream(session, scan.tee(log.tee(read_chunks(f, size - start))), walker=walker, on_event=on_event)
            log.finish()
            log.head = bytes.fromhex(report.head)
            store.extend(digests)
            if report.brk is not None and report.brk.kind == ERASED_UNRECORDED:
                # the walk went on to the end before it knew: what it vouches for stops before that line
                cut = report.events
                at_cut = offsets[cut - start_line] if cut >= start_line else _offset_at(off_fd, cut)
                log = _cut_log(fd, log, cut, at_cut, bytes.fromhex(report.head))
                store.truncate(cut)
                os.ftruncate(off_fd, 8 * min(cut, start_line))
                del offsets[max(0, cut - start_line) :]
                pos[0] = at_cut
                write_from = min(start_line, cut)
            store.flush()

            def read_line(a: int, b: int) -> dict[str, Any]:
                obj: dict[str, Any] = loads_strict(_pread_all(fd, b - a, a).rstrip(b"\n"), "a supersession record's line")
                return obj

            found = supersession_walk.records_at(scan.hits, offsets, start_line, pos[0], report.events, read_line)
            records = supersession_walk.cut((*supersession_walk.cut(records, start_line), *found), report.events)
            data = offsets.tobytes()
            at = 8 * write_from
            while data:
                n = os.pwrite(off_fd, data, at)
                data, at = data[n:], at + n
            os.fsync(off_fd)
        finally:
            os.close(off_fd)
            store.close()
        return self._keep(adir, walk, start_line, report.events, pos[0], report.head, report.brk, log.chunks(), walker.erasures, records)

    def _keep_whole(self, fd: int, adir: Path, whole: audit_parallel.WholeWalk, walk: _Walk) -> _Walk:
        """Keep a walk from genesis done in parallel (receipts/audit_parallel.py): the same files the serial walk writes."""
        with MerkleStore(adir / MERKLE_DIR) as store:
            store.load_levels(whole.levels, durable=True)
        off_fd = _open_own(adir / OFFSETS_FILE, os.O_RDWR | os.O_CREAT)
        try:
            os.ftruncate(off_fd, 0)
            data, at = whole.starts.tobytes(), 0
            while data:
                n = os.pwrite(off_fd, data, at)
                data, at = data[n:], at + n
            os.fsync(off_fd)
        finally:
            os.close(off_fd)
        check_contiguous(whole.chunks)

        def read_line(a: int, b: int) -> dict[str, Any]:
            obj: dict[str, Any] = loads_strict(_pread_all(fd, b - a, a).rstrip(b"\n"), "a supersession record's line")
            return obj

        found = supersession_walk.records_at(whole.hits, whole.starts, 0, whole.end, whole.events, read_line)
        records = supersession_walk.cut(found, whole.events)
        return self._keep(adir, walk, 0, whole.events, whole.end, whole.head.hex(), None, whole.chunks, whole.erasures, records)

    def _keep(
        self,
        adir: Path,
        walk: _Walk,
        start_line: int,
        verified: int,
        verified_bytes: int,
        head: str,
        brk: Break | None,
        chunks: list[Chunk],
        erasures: ErasureState,
        records: tuple[supersession_walk.Record, ...],
    ) -> _Walk:
        new_state = {
            "format": STATE_VERSION,
            "verified": verified,
            "verified_bytes": verified_bytes,
            "head": head,
            "break": None if brk is None else brk.to_dict(),
            "chunks": [c.to_list() for c in chunks],
            "erasures": erasures.cut(verified).to_json(),
            "supersessions": supersession_walk.to_json(records),
        }
        self._save_state(adir, new_state)
        new_state["chunks"] = chunks
        new_state["erasures"] = erasures.cut(verified)
        new_state["supersessions"] = records
        walk.state = new_state
        walk.rewalked_from_line = start_line + 1
        walk.cached_lines = start_line
        return walk

    @staticmethod
    def _save_state(adir: Path, state: dict[str, Any]) -> None:
        import orjson  # serialising our own values; everything read back goes through loads_strict

        tmp = adir / (STATE_FILE + ".tmp")
        tmp.unlink(missing_ok=True)  # a leftover, or a planted symlink: removed, never followed
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
        try:
            data = orjson.dumps(state)
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, adir / STATE_FILE)  # rename replaces the name itself, a symlink there included


def _offset_at(off_fd: int, seq: int) -> int:
    pair = array("Q")
    pair.frombytes(_pread_all(off_fd, 8, 8 * seq))
    return pair[0]


def _cut_log(fd: int, log: ChunkLog, lines: int, end: int, head: bytes) -> ChunkLog:
    """The chunk log of the first `lines` lines (ending at byte `end`, chain head `head` after them)."""
    keep = [c for c in log.chunks() if c.first_line + c.lines <= lines]
    out = ChunkLog(keep)
    start = out.end
    if end > start:
        rest = _pread_all(fd, end - start, start)
        parts = [p + b"\n" for p in rest.split(b"\n")[:-1]]
        if len(parts) != lines - out.lines or sum(map(len, parts)) != end - start:
            raise OSError(errno.EIO, "audit cache: the ledger changed while it was walked")
        out.append_lines(parts, [head] * len(parts))  # fewer than a chunk: only the last head is kept
    return out


def _fields(facts: LedgerFacts) -> dict[str, Any]:
    return {name: getattr(facts, name) for name in LedgerFacts.__dataclass_fields__}


def _none(*_args: int) -> Any:
    raise LookupError("the session has no readable ledger")


__all__ = ["Auditor", "LedgerAt", "LedgerUnreadable", "cache_dir", "cache_root", "forget_cache"]
