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

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.canonical import canonical_json
from ledger.messages import Message

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


