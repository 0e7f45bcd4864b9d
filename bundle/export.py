"""Export one session as a bundle (docs/FORMAT.md §21): `export_session(data_dir, session, out, stores=…)`.

Under the session's turn lock (a turn cannot append between the ledger copy and the checkpoint read), the
ledger is copied as stored, byte for byte, with every receipt of the session and every erasure certificate
naming it; the manifest lists each member's size and sha256 and is signed (DSSE) by the data directory's
receipt key, whose public half travels in the bundle. The zip is written to a temporary file beside `out`,
fsynced and renamed into place: a reader never sees half a bundle.

Either backend (storage.stores.Stores): on files the ledger is the session's events.jsonl, on PostgreSQL its
rows' exact lines read in one snapshot (the ledger's snapshot_lines); receipts and the checkpoint come through the
receipt backend (receipts.stores.ReceiptBackend). Every zip entry is dated `exported_at`, so a bundle is a pure
function of its members, the export time and the key: the same session exported from the files and from
PostgreSQL at the same `exported_at` gives the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bundle.format import (
    CHECKPOINT_NAME,
    LEDGER_NAME,
    MANIFEST_NAME,
    MANIFEST_PAYLOAD_TYPE,
    BundleError,
    Member,
    build_manifest,
    key_member,
    zip_date_time,
)
from bundle.notes import NoteCollector
from control.settle import ErasureUnfinished, settled
from ledger.canonical import canonical_json
from ledger.event import EventError, now_ts, validate_session_id
from ledger.verify import StoredLinesChanged
from receipts import checkpoints
from receipts.certificate import MalformedCertificate, parse_certificate
from receipts.dsse import sign_envelope
from receipts.keys import SigningKey, format_public_key
from receipts.stores import ReceiptBackend, ReceiptUnreadable
from storage.api_faces import ledger_and_receipts_at
from storage.local import load_or_create, open_private

if TYPE_CHECKING:
    from storage.api import LedgerStore
    from storage.stores import Stores

CHUNK = 1024 * 1024
Progress = Callable[[int, int, str], None]  # (done, total, what): bytes of the ledger, then members


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path
    session: str
    events: int
    receipts: int
    certificates: int
    bytes: int  # the bundle file's size
    sha256: str  # of the bundle file


def session_certificates(data_dir: Path, session: str) -> list[Path]:
    """The erasure certificates naming `session` (their body says so; the file name alone could be another
    session's whose id starts the same)."""
    folder = data_dir / "erasures"
    out: list[Path] = []
    if not folder.is_dir():
        return out
    for p in sorted(folder.glob(f"erasure-{session}-*.json")):
        try:
            if parse_certificate(p.read_bytes()).session == session:
                out.append(p)
        except (MalformedCertificate, OSError):
            continue  # not this session's, or unreadable: `control` reports those
    return out


def _certificate_members(data_dir: Path, session: str) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in session_certificates(data_dir, session)]


def session_stores(
    stack: ExitStack, data: Path, stores: Stores | None, session: str
) -> tuple[LedgerStore, ReceiptBackend]:
    """The session's ledger and receipt backend: those of `stores`, or by default the file ledger (closed with `stack`)
    and the receipt files in `data` — only those, no index is opened. BundleError when the session is not there."""
    if stores is None:
        file_ledger, file_backend = ledger_and_receipts_at(data)
        stack.callback(file_ledger.close)
        ledger: LedgerStore = file_ledger
        backend: ReceiptBackend = file_backend
        where = str(data)
    else:
        ledger, backend, where = stores.ledger, stores.receipts, stores.where
    if not ledger.exists(session):
        raise BundleError(f"session {session}: no such session in {where}")
    return ledger, backend


@contextmanager
def no_erasure_pending(
    data: Path,
    session: str,
    backend: ReceiptBackend,
    *,
    stores: Stores | None,
    key: SigningKey | None,
    copies: Iterable[str | os.PathLike[str]],
) -> Iterator[None]:
    """The session's turn lock, held with no erasure of it left half way (control.settle.settled: one that an I/O
    error or a kill stopped is finished first, with `stores`, `key` and `copies` as control.forget.recover takes
    them); BundleError (one line) when it cannot be finished now. Every export of a session's content runs in it."""
    try:
        with settled(data, session, backend.turn_lock, stores=stores, key=key, copies=copies):
            yield
    except ErasureUnfinished as exc:
        raise BundleError(str(exc)) from None


def export_session(
    data_dir: str | os.PathLike[str],
    session: str,
    out: str | os.PathLike[str],
    *,
    key: SigningKey | None = None,
    progress: Progress | None = None,
    stores: Stores | None = None,
    exported_at: str | None = None,
    certificates: Sequence[tuple[str, bytes]] | None = None,
    recover_with: Stores | None = None,
    copies: Iterable[str | os.PathLike[str]] = (),
) -> Exported:
    """Write `session` as a bundle at `out` (BundleError: no such session, nothing to export).

    An erasure of the session that stopped half way (its journal in `data_dir/erasures`) is finished first
    (control.settle), or the export is refused with one line (BundleError) and nothing is written: `recover_with`,
    the stores that finishes it with (default `stores`: the app passes its engine's), `copies` the download folders
    whose copies of the redacted receipts go with it.

    `stores`: where the session is kept (storage.stores; by default the files in `data_dir`, of which only the
    ledger and the receipt files are opened). Erasure certificates are read from `data_dir/erasures` on either
    backend (`certificates`: (file name, bytes) to carry instead, e.g. an imported session's, BundleImports.certificates), and
    the signing key is `data_dir`'s unless `key` is given. `exported_at`: the manifest's time and every zip entry's
    date (default now)."""
    data = Path(data_dir)
    try:
        validate_session_id(session)
    except EventError as exc:  # bad input, said as such (the CLI's exit 2), not an unexpected failure
        raise BundleError(str(exc)) from None
    when = now_ts() if exported_at is None else exported_at
    date_time = zip_date_time(when)
    with ExitStack() as stack:
        ledger, backend = session_stores(stack, data, stores, session)
        signer = key if key is not None else load_or_create(data)
        out_path = Path(out)
        tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
        with no_erasure_pending(data, session, backend, stores=recover_with or stores, key=key, copies=copies):
            count, head = ledger.head(session)
            if count == 0:
                raise BundleError(f"session {session}: no events to export")
            cp = backend.latest_checkpoint(session)
            if cp is None or cp["body"]["tree_size"] != count or cp["body"]["chain_head"] != head or cp["key_id"] != signer.key_id:
                # events appended with no checkpoint after them (e.g. `remember`), or none yet: sign one over the
                # ledger as it is now, as a turn would, so the bundle's checkpoint covers all of it
                cp = backend.issue_checkpoint(ledger, session, signer)
            size, chunks = _ledger_chunks(stack, ledger, session, count)
            members: list[Member] = []
            receipts = _receipt_members(backend, session)
            certs = _certificate_members(data, session) if certificates is None else sorted(certificates)
            total = size + len(receipts) + len(certs)
            try:
                tmp.unlink(missing_ok=True)  # a partial file a killed export of the same pid left
                # 0600 whatever the umask (it holds the whole ledger and every receipt), made here: never another's file
                with os.fdopen(open_private(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW), "w+b") as raw_out, \
                        zipfile.ZipFile(raw_out, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
                    members.append(_write_stream(z, _entry(LEDGER_NAME, date_time), chunks, progress, total))
                    members.append(_write_bytes(z, _entry(CHECKPOINT_NAME, date_time), checkpoints.checkpoint_file_bytes(cp)))
                    witnessed = NoteCollector(signer)  # §21.1: the cosignatures the receipts carry, per tree head
                    for i, (name, read) in enumerate(receipts, start=1):
                        raw = read()
                        witnessed.add(raw)
                        members.append(_write_bytes(z, _entry(f"receipts/{name}", date_time), raw))
                        if progress is not None:
                            progress(size + i, total, "receipts")
                    for i, (name, body) in enumerate(certs, start=1):
                        members.append(_write_bytes(z, _entry(f"certificates/{name}", date_time), body))
                        if progress is not None:
                            progress(size + len(receipts) + i, total, "certificates")
                    for name, note in witnessed.members():  # none for a session no witness cosigned: its bytes are as before
                        members.append(_write_bytes(z, _entry(name, date_time), note))
                    pub = signer.public_key
                    members.append(_write_bytes(z, _entry(key_member(pub.key_id), date_time), format_public_key(pub).encode()))
                    payload = build_manifest(
                        session=session, exported_at=when, events=count, chain_head=head, signer=pub.key_id, members=members
                    )
                    z.writestr(_entry(MANIFEST_NAME, date_time), canonical_json(sign_envelope(payload, MANIFEST_PAYLOAD_TYPE, signer)))
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                replace_durable_file(tmp, out_path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    digest = hashlib.sha256()
    with open(out_path, "rb") as f:
        for b in iter(lambda: f.read(CHUNK), b""):
            digest.update(b)
    return Exported(out_path, session, count, len(receipts), len(certs), out_path.stat().st_size, digest.hexdigest())


def _entry(name: str, date_time: tuple[int, int, int, int, int, int]) -> zipfile.ZipInfo:
    """A stored (uncompressed) zip entry dated `date_time`, mode 0600: nothing in it depends on when or where it was
    written, nor on the zlib in use — and no deflate encoding leaves slack a second reading could use (bundle.layout)."""
    info = zipfile.ZipInfo(name, date_time)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o600 << 16
    return info


def _ledger_chunks(stack: ExitStack, ledger: LedgerStore, session: str, count: int) -> tuple[int, Iterator[bytes]]:
    """(bytes, for the progress bar; the ledger's first `count` lines as stored, in pieces: LedgerStore.stored_lines,
    held open by `stack`). On files the bytes are exact; on PostgreSQL the lines come from one snapshot and the bytes
    are the session's when asked (a `remember` after the head was read adds lines beyond `count`, not exported)."""
    try:
        size, chunks = stack.enter_context(ledger.stored_lines(session, count))
    except StoredLinesChanged as exc:
        raise BundleError(str(exc)) from None
    return size, _lines_said(chunks)


def _lines_said(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The pieces, a ledger that changed under the export said as the BundleError it is here."""
    try:
        yield from chunks
    except StoredLinesChanged as exc:
        raise BundleError(str(exc)) from None


def _receipt_members(backend: ReceiptBackend, session: str) -> list[tuple[str, Callable[[], bytes]]]:
    """(member base name, read its bytes) for every receipt of the session, by name (ReceiptBackend.stored_receipts)."""
    return [(name, _read_said(read)) for name, read in backend.stored_receipts(session)]


def _read_said(read: Callable[[], bytes]) -> Callable[[], bytes]:
    def said() -> bytes:
        try:
            return read()
        except ReceiptUnreadable as exc:
            raise BundleError(str(exc)) from None

    return said


def replace_durable_file(tmp: Path, dest: Path) -> None:
    """Rename `tmp` over `dest` and fsync the folder (storage.common.fsmode.replace_durable writes bytes; this moves a file)."""
    os.replace(tmp, dest)
    fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_stream(z: zipfile.ZipFile, info: zipfile.ZipInfo, chunks: Iterator[bytes], progress: Progress | None, total: int) -> Member:
    h = hashlib.sha256()
    n = 0
    with z.open(info, "w", force_zip64=True) as w:
        for b in chunks:
            h.update(b)
            w.write(b)
            n += len(b)
            if progress is not None:
                progress(n, total, "ledger")
    return Member(info.filename, n, h.hexdigest())


def _write_bytes(z: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes) -> Member:
    z.writestr(info, data)
    return Member(info.filename, len(data), hashlib.sha256(data).hexdigest())


__all__ = ["Exported", "export_session", "no_erasure_pending", "session_certificates"]
