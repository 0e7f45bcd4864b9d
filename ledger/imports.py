"""What `python -m ledger import` remembers of the files it imported, so the same file is not imported twice.

`DATA_DIR/sessions/<session>/imports.jsonl` (docs/FORMAT.md §7): one line per import, the JCS of
`{"v": 1, "sha256", "messages", "first_seq", "last_seq", "last_chain", "file", "imported_at"}`.
`sha256` is the import's content hash: over the validated messages (role, text, meta and the
normalised ts, or none), not over the file's bytes, so the same messages with a BOM, CRLF line ends,
another key order or trailing blank lines are the same import. A record counts only while the ledger
still holds its last event (`last_seq` with chain hash `last_chain`): an import cut away by
`ledger repair` may be imported again.

The file is a guard against accidents, not evidence: it sits outside the hash chain.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .canonical import CanonicalError, canonical_json, loads_strict
from .event import Event, now_ts
from .fsmode import open_private
from .store import Ledger, Message

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


def record_import(ledger: Ledger, session: str, digest: str, events: Sequence[Event], file: str) -> ImportRecord:
    """Append the import's record durably (after its events are durable)."""
    record = ImportRecord(digest, len(events), events[0].seq, events[-1].seq, events[-1].chain, file, now_ts())
    fd = open_private(records_path(ledger, session), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW)
    try:
        os.write(fd, record.to_line())
        os.fsync(fd)
    finally:
        os.close(fd)
    return record
