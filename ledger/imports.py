"""What `python -m ledger import` remembers of the files it imported, so the same file is not imported twice.

`DATA_DIR/sessions/<session>/imports.jsonl` (docs/FORMAT.md §7): one line per import, the JCS of
`{"v": 1, "sha256", "messages", "first_seq", "last_seq", "last_chain", "file", "imported_at"}`.
`sha256` is the import's content hash: over the validated messages (role, text, meta and the
normalised ts, or none), not over the file's bytes, so the same messages with a BOM, CRLF line ends,
another key order or trailing blank lines are the same import. A record counts only while the ledger
still holds its last event (`last_seq` with chain hash `last_chain`): an import cut away by
`ledger repair` may be imported again.

The file is a guard against accidents, not evidence: it sits outside the hash chain. Its hashes are
unsalted, so after an erasure a record whose range holds an erased seq could confirm a guess of the
imported file: `forget_erased` drops those records (the erasure calls it), and `record_import` writes
none for an import an erasure reached first. Both hold a flock on the session's folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.canonical import CanonicalError, canonical_json, loads_strict
from ledger.event import Event, is_erasure_record, now_ts
from ledger.fsmode import open_private, replace_durable
from ledger.messages import Message
from ledger.store import Ledger

IMPORTS_FILE = "imports.jsonl"
TAG_IMPORT = b"mre:v1:import\x00"
_FIELDS = {"v", "sha256", "messages", "first_seq", "last_seq", "last_chain", "file", "imported_at"}


class ImportRecordError(ValueError):
    """The session's import record cannot be read; its path and line are in the message."""


@dataclass(frozen=True, slots=True)
class ImportRecord:
    sha256: str
    messages: int
    first_seq: int
    last_seq: int
    last_chain: str
    file: str
    imported_at: str

    def to_line(self) -> bytes:
        return canonical_json({"v": 1, **{k: getattr(self, k) for k in self.__slots__}}) + b"\n"


def already_imported(src: object, seen: ImportRecord, session: str) -> str:
    """What `python -m ledger import` says of a file whose messages the session already holds."""
    n = seen.messages
    return (
        f"{src}: its {n} message{'' if n == 1 else 's'} {'was' if n == 1 else 'were'} already imported into session {session} "
        f"(seq {seen.first_seq}..{seen.last_seq}, from {seen.file}, at {seen.imported_at}); "
        "nothing was imported (--allow-duplicates imports them again)"
    )


def content_hash(messages: Sequence[Message]) -> str:
    """sha256 over the messages as validated: what was said, not how the file spelled it."""
    h = hashlib.sha256(TAG_IMPORT)
    for m in messages:
        fields: dict[str, Any] = {"meta": m.meta, "role": m.role, "text": m.text}
        if m.ts is not None:
            fields["ts"] = m.ts
        h.update(canonical_json(fields) + b"\n")
    return h.hexdigest()


def records_path(ledger: Ledger, session: str) -> Path:
    return ledger.session_dir(session) / IMPORTS_FILE


def read_records(ledger: Ledger, session: str) -> list[ImportRecord]:
    path = records_path(ledger, session)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ImportRecordError(f"{path}: {exc.strerror or 'unreadable'}") from None
    with os.fdopen(fd, "rb") as f:
        raw_lines = f.read().split(b"\n")
    out = []
    for n, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = loads_strict(raw, f"{path}, line {n}")
        except CanonicalError as exc:
            raise ImportRecordError(str(exc)) from None
        if not isinstance(obj, dict) or set(obj) != _FIELDS or obj["v"] != 1 or not _well_typed(obj):
            raise ImportRecordError(f"{path}, line {n}: not an import record")
        out.append(ImportRecord(**{k: obj[k] for k in _FIELDS - {"v"}}))
    return out


def _well_typed(obj: dict[str, Any]) -> bool:
    ints = ("messages", "first_seq", "last_seq")
    strs = ("sha256", "last_chain", "file", "imported_at")
    return all(isinstance(obj[k], int) and not isinstance(obj[k], bool) for k in ints) and all(
        isinstance(obj[k], str) for k in strs
    )


def still_held(ledger: Ledger, session: str, record: ImportRecord) -> bool:
    """Whether the ledger still holds the import's last event, unchanged (not cut by a repair)."""
    count, _head = ledger.head(session)
    if not 0 <= record.last_seq < count:
        return False
    (ev,) = ledger.read_events(session, [record.last_seq])
    return ev.chain == record.last_chain


def previous_import(ledger: Ledger, session: str, digest: str) -> ImportRecord | None:
    """The earlier import of the same content into this session that the ledger still holds, if any."""
    if not ledger.exists(session):
        return None
    for record in read_records(ledger, session):
        if record.sha256 == digest and still_held(ledger, session, record):
            return record
    return None


@contextmanager
def _records_locked(ledger: Ledger, session: str) -> Iterator[Path]:
    """The import record's own lock: a flock on the session's folder (the file itself is replaced by a rename)."""
    folder = ledger.session_dir(session)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield records_path(ledger, session)
    finally:
        os.close(fd)


def _erased_since(ledger: Ledger, session: str, first: int, last: int) -> bool:
    """Whether an erasure record after `last` erased a seq in first..last (an erasure that ran mid-import)."""
    count, _head = ledger.head(session)
    for ev in ledger.read_events(session, range(last + 1, count)):
        if is_erasure_record(ev) and any(first <= e["seq"] <= last for e in ev.meta["erasure"]["erased"]):
            return True
    return False


def record_import(ledger: Ledger, session: str, digest: str, events: Sequence[Event], file: str) -> ImportRecord:
    """Append the import's record durably (after its events are durable); none when an erasure reached them first."""
    record = ImportRecord(digest, len(events), events[0].seq, events[-1].seq, events[-1].chain, file, now_ts())
    with _records_locked(ledger, session) as path:
        if _erased_since(ledger, session, record.first_seq, record.last_seq):
            return record
        fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW)
        try:
            os.write(fd, record.to_line())
            os.fsync(fd)
        finally:
            os.close(fd)
    return record


def forget_erased(ledger: Ledger, session: str, seqs: Iterable[int]) -> int:
    """Drop every import record whose range holds one of `seqs` (erased): the file is rewritten without them
    (temp file beside it, 0600, fsync, rename, fsync of the folder). Returns how many lines were dropped. A
    record file that cannot be read is emptied: which of its lines name an erased seq cannot be told."""
    gone = sorted(set(seqs))
    if not gone or not ledger.session_dir(session).is_dir():
        return 0
    with _records_locked(ledger, session) as path:
        if not path.exists():
            return 0
        try:
            records = read_records(ledger, session)
        except ImportRecordError:
            lines = [x for x in path.read_bytes().split(b"\n") if x.strip()]
            _replace(path, b"")
            return len(lines)
        kept = [r for r in records if not any(r.first_seq <= s <= r.last_seq for s in gone)]
        if len(kept) < len(records):
            _replace(path, b"".join(r.to_line() for r in kept))
    return len(records) - len(kept)


def _replace(path: Path, data: bytes) -> None:
    replace_durable(path, data)
