"""Export one session as a bundle (docs/FORMAT.md §21): `export_session(data_dir, session, out)`.

Under the session's turn lock (a turn cannot append between the ledger copy and the checkpoint read), the
ledger file is copied as stored, byte for byte, with every receipt of the session and every erasure certificate
naming it; the manifest lists each member's size and sha256 and is signed (DSSE) by the data directory's
receipt key, whose public half travels in the bundle. The zip is written to a temporary file beside `out`,
fsynced and renamed into place: a reader never sees half a bundle.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ledger import Ledger
from ledger.canonical import canonical_json
from ledger.event import EventError, now_ts, validate_session_id
from receipts import checkpoints, files
from receipts.body import RECEIPT_ID_RE
from receipts.certificate import MalformedCertificate, parse_certificate
from receipts.dsse import sign_envelope
from receipts.keys import SigningKey, format_public_key, load_or_create

from .format import (
    CHECKPOINT_NAME,
    LEDGER_NAME,
    MANIFEST_NAME,
    MANIFEST_PAYLOAD_TYPE,
    BundleError,
    Member,
    build_manifest,
    key_member,
)

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


def _receipts(data_dir: Path, session: str) -> list[Path]:
    folder = data_dir / "sessions" / session / "receipts"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("rcpt_*.json") if RECEIPT_ID_RE.fullmatch(p.stem) and p.is_file() and not p.is_symlink())


def _chunks(path: Path, limit: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        left = limit
        while left > 0:
            b = f.read(min(CHUNK, left))
            if not b:
                raise BundleError(f"{path.name}: shorter than the {limit:,} bytes it held a moment ago")
            left -= len(b)
            yield b


def export_session(
    data_dir: str | os.PathLike[str],
    session: str,
    out: str | os.PathLike[str],
    *,
    key: SigningKey | None = None,
    progress: Progress | None = None,
) -> Exported:
    """Write `session` of `data_dir` as a bundle at `out` (BundleError: no such session, nothing to export)."""
    data = Path(data_dir)
    try:
        validate_session_id(session)
    except EventError as exc:  # bad input, said as such (the CLI's exit 2), not an unexpected failure
        raise BundleError(str(exc)) from None
    ledger = Ledger(data)
    try:
        if not ledger.exists(session):
            raise BundleError(f"session {session}: no such session in {data}")
        signer = key if key is not None else load_or_create(data)
        out_path = Path(out)
        tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
        with files.session_turn_lock(data, session):
            count, head = ledger.head(session)
            if count == 0:
                raise BundleError(f"session {session}: no events to export")
            cp = checkpoints.latest(data, session)
            if cp is None or cp["body"]["tree_size"] != count or cp["body"]["chain_head"] != head or cp["key_id"] != signer.key_id:
                # events appended with no checkpoint after them (e.g. `remember`), or none yet: sign one over the
                # ledger as it is now, as a turn would, so the bundle's checkpoint covers all of it
                cp = checkpoints.issue(data, ledger, session, signer)
            log = ledger.log_path(session)
            size = _ledger_size(log, count)
            members: list[Member] = []
            receipts = _receipts(data, session)
            certs = session_certificates(data, session)
            total = size + len(receipts) + len(certs)
            try:
                with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1, allowZip64=True) as z:
                    members.append(_write_stream(z, LEDGER_NAME, _chunks(log, size), progress, total))
                    members.append(_write_bytes(z, CHECKPOINT_NAME, checkpoints.checkpoint_file_bytes(cp)))
                    for i, p in enumerate(receipts, start=1):
                        members.append(_write_bytes(z, f"receipts/{p.name}", p.read_bytes()))
                        if progress is not None:
                            progress(size + i, total, "receipts")
                    for i, p in enumerate(certs, start=1):
                        members.append(_write_bytes(z, f"certificates/{p.name}", p.read_bytes()))
                        if progress is not None:
                            progress(size + len(receipts) + i, total, "certificates")
                    pub = signer.public_key
                    members.append(_write_bytes(z, key_member(pub.key_id), format_public_key(pub).encode()))
                    payload = build_manifest(
                        session=session, exported_at=now_ts(), events=count, chain_head=head, signer=pub.key_id, members=members
                    )
                    z.writestr(MANIFEST_NAME, canonical_json(sign_envelope(payload, MANIFEST_PAYLOAD_TYPE, signer)))
                with open(tmp, "rb") as f:
                    os.fsync(f.fileno())
                replace_durable_file(tmp, out_path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    finally:
        ledger.close()
    digest = hashlib.sha256()
    with open(out_path, "rb") as f:
        for b in iter(lambda: f.read(CHUNK), b""):
            digest.update(b)
    return Exported(out_path, session, count, len(receipts), len(certs), out_path.stat().st_size, digest.hexdigest())


def replace_durable_file(tmp: Path, dest: Path) -> None:
    """Rename `tmp` over `dest` and fsync the folder (ledger.fsmode.replace_durable writes bytes; this moves a file)."""
    os.replace(tmp, dest)
    fd = os.open(dest.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _ledger_size(log: Path, count: int) -> int:
    """The bytes of the first `count` lines (the file may hold a torn tail a writer has not yet quarantined)."""
    n = 0
    size = 0
    with open(log, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            size += len(line)
            n += 1
            if n == count:
                return size
    raise BundleError(f"{log.name}: holds {n} whole lines, the ledger reports {count}")


def _write_stream(z: zipfile.ZipFile, name: str, chunks: Iterator[bytes], progress: Progress | None, total: int) -> Member:
    h = hashlib.sha256()
    n = 0
    with z.open(name, "w", force_zip64=True) as w:
        for b in chunks:
            h.update(b)
            w.write(b)
            n += len(b)
            if progress is not None:
                progress(n, total, "ledger")
    return Member(name, n, h.hexdigest())


def _write_bytes(z: zipfile.ZipFile, name: str, data: bytes) -> Member:
    z.writestr(name, data)
    return Member(name, len(data), hashlib.sha256(data).hexdigest())


__all__ = ["Exported", "export_session", "session_certificates"]
