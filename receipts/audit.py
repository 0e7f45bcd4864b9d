"""The auditor's own view of a ledger, for verifying receipts "with the ledger" (I/O).

It never trusts a tree or digest the producer stored: it re-walks the JSONL
itself, recomputing every digest, and keeps what it learnt as a cache under
DATA_DIR/audit/<session>/ (a Merkle tree of the digests it recomputed, the byte
offset of each line, and state.json with how far it got).

How the cache is trusted (the "trusted, cached checkpoint"): the cache records
the file's inode, size, mtime and the chain head it verified. When the file is
unchanged, the cache is used as is; when it only grew, just the new lines are
walked, continuing the chain from the cached head; anything else (an in-place
edit changes the mtime without growing the file, a rewrite changes inode or
size) discards the cache and re-walks from genesis. An edit that also grows
the file within the same mtime tick would slip past the cache — `full=True`
(`--full` on the CLI) always re-walks from genesis.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from ledger.event import validate_session_id
from ledger.verify import Break, ChainWalker, read_chunks, verify_stream

from .merkle_store import MerkleStore
from .verify import LedgerFacts

STATE_VERSION = 1
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class Auditor:
    def __init__(self, data_dir: str | os.PathLike[str], *, full: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.full = full

    def _paths(self, session: str) -> tuple[Path, Path]:
        validate_session_id(session)
        return self.data_dir / "sessions" / session / "events.jsonl", self.data_dir / "audit" / session

    @contextmanager
    def _locked(self, adir: Path) -> Iterator[None]:
        with _locks_guard:
            tlock = _locks.setdefault(str(adir), threading.Lock())
        with tlock:
            adir.mkdir(parents=True, exist_ok=True)
            fd = os.open(adir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    @contextmanager
    def facts(self, session: str) -> Iterator[LedgerFacts]:
        """What the ledger says, valid inside the `with` block (it holds the audit tree open)."""
        log, adir = self._paths(session)
        if not log.is_file():
            yield LedgerFacts(session, False, 0, None, _none, _none, _none)
            return
        with self._locked(adir):
            state = self._refresh(session, log, adir)
        brk = None if state["break"] is None else Break(**state["break"])
        verified = state["verified"]

        def event_at(seq: int) -> dict[str, Any]:
            # two offsets read from offsets.bin (8 bytes each), then the line itself
            with open(adir / "offsets.bin", "rb") as off:
                off.seek(8 * seq)
                pair = array("Q")
                pair.frombytes(off.read(16 if seq + 1 < verified else 8))
            start = pair[0]
            end = pair[1] if len(pair) > 1 else state["verified_bytes"]
            with open(log, "rb") as f:
                f.seek(start)
                obj: dict[str, Any] = orjson.loads(f.read(end - start))
            return obj

        with MerkleStore(adir / "merkle") as store:
            yield LedgerFacts(
                session=session,
                exists=True,
                verified=verified,
                first_break=brk,
                event_at=event_at,
                root_at=store.root,
                consistency=store.consistency_proof,
                notes=tuple(state.get("notes", ())),
            )

    def _refresh(self, session: str, log: Path, adir: Path) -> dict[str, Any]:
        st = os.stat(log)
        state = self._load_state(adir)
        if state is not None and not self.full:
            same_file = state["ino"] == st.st_ino
            if same_file and state["size"] == st.st_size and state["mtime_ns"] == st.st_mtime_ns:
                return state
            grew = same_file and st.st_size > state["size"] and state["break"] is None
            if grew and self._tail_is_newline(log, state["verified_bytes"]):
                return self._walk(session, log, adir, st, state)
        return self._walk(session, log, adir, st, None)

    @staticmethod
    def _tail_is_newline(log: Path, offset: int) -> bool:
        if offset == 0:
            return True
        with open(log, "rb") as f:
            f.seek(offset - 1)
            return f.read(1) == b"\n"

    def _load_state(self, adir: Path) -> dict[str, Any] | None:
        try:
            state: dict[str, Any] = orjson.loads((adir / "state.json").read_bytes())
            if state.get("format") != STATE_VERSION:
                return None
            with MerkleStore(adir / "merkle") as store:
                if store.size != state["verified"]:
                    return None
            if (adir / "offsets.bin").stat().st_size != 8 * state["verified"]:
                return None
            return state
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _walk(self, session: str, log: Path, adir: Path, st: os.stat_result, state: dict[str, Any] | None) -> dict[str, Any]:
        if state is None:
            shutil.rmtree(adir / "merkle", ignore_errors=True)
            (adir / "offsets.bin").unlink(missing_ok=True)
            walker = ChainWalker(session)
            start = 0
        else:
            walker = ChainWalker(session, state["verified"], bytes.fromhex(state["head"]), state["verified"])
            start = state["verified_bytes"]
        store = MerkleStore(adir / "merkle")
        digests: list[bytes] = []
        offsets = array("Q")
        pos = [start]

        def on_event(_seq: int, digest: bytes, length: int) -> None:
            digests.append(digest)
            offsets.append(pos[0])
            pos[0] += length
            if len(digests) >= 65536:
                store.extend(digests)
                digests.clear()

        try:
            with open(log, "rb") as f:
                f.seek(start)
                report = verify_stream(session, read_chunks(f, st.st_size - start), walker=walker, on_event=on_event)
            store.extend(digests)
            store.flush()
            with open(adir / "offsets.bin", "ab") as off:
                off.write(offsets.tobytes())
        finally:
            store.close()
        new_state = {
            "format": STATE_VERSION,
            "ino": st.st_ino,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "verified": report.events,
            "verified_bytes": pos[0],
            "head": report.head,
            "break": None if report.brk is None else report.brk.to_dict(),
        }
        tmp = adir / "state.json.tmp"
        tmp.write_bytes(orjson.dumps(new_state))
        os.replace(tmp, adir / "state.json")
        return new_state


def _none(*_args: int) -> Any:
    raise LookupError("the session has no ledger")


__all__ = ["Auditor"]
