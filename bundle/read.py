"""Open a bundle without trusting it: every structural refusal before a byte is written (docs/FORMAT.md §21).

`open_bundle(path, staging)` checks the zip's directory (names, types, duplicates, shared bytes, encryption,
methods, declared sizes, compression ratios, totals), reads and parses the signed manifest, then streams each
member into `staging` laid out as a data directory (`sessions/<S>/events.jsonl`, `…/checkpoint.json`,
`…/receipts/`, `erasures/`), reading at most the declared size plus one byte of each, and hashing as it goes.
A structural problem raises BundleError (the whole bundle is refused); a member whose bytes differ from the
manifest is reported in `Opened.mismatches` (the verifier's `members.hashes` row fails).
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ledger.canonical import CanonicalError, loads_strict
from receipts.dsse import Envelope, MalformedEnvelope, parse_envelope
from receipts.keys import KeyConfigError, PublicKey, parse_public_key

from .format import (
    CHECKPOINT_NAME,
    LEDGER_NAME,
    MANIFEST_NAME,
    MAX_MANIFEST_BYTES,
    MAX_MEMBERS,
    MAX_RATIO,
    MAX_TOTAL_BYTES,
    RATIO_FLOOR,
    BundleError,
    Manifest,
    member_problem,
    parse_manifest,
    size_cap,
)

CHUNK = 1024 * 1024
_TYPES = {stat.S_IFLNK: "a symlink", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


@dataclass
class Opened:
    """A bundle whose structure passed, extracted into `data` (a data directory holding only this session)."""

    path: Path
    data: Path
    envelope: Envelope
    manifest: Manifest
    keys: list[PublicKey]  # the public keys the bundle carries (never trusted for being there)
    mismatches: list[str] = field(default_factory=list)  # members whose size or sha256 differ from the manifest
    extra: list[str] = field(default_factory=list)  # members in the zip the manifest does not list
    missing: list[str] = field(default_factory=list)  # members the manifest lists that the zip lacks
    bytes_read: int = 0


def _check_directory(infos: list[zipfile.ZipInfo]) -> None:
    if len(infos) > MAX_MEMBERS + 1:
        raise BundleError(f"{len(infos):,} members: more than the {MAX_MEMBERS + 1:,} a bundle may hold")
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        problem = member_problem(name)
        if problem is not None:
            raise BundleError(problem)
        if name in seen:
            raise BundleError(f"member {name!r}: present twice")
        seen.add(name)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind and kind != stat.S_IFREG:
            raise BundleError(f"member {name!r}: {_TYPES.get(kind, f'file type {kind:#o}')}, not a regular file")
        if info.flag_bits & 0x1:
            raise BundleError(f"member {name!r}: encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise BundleError(f"member {name!r}: compression method {info.compress_type} (only stored or deflate)")
        cap = size_cap(name)
        if info.file_size > cap:
            raise BundleError(f"member {name!r}: declares {info.file_size:,} bytes, more than the cap of {cap:,}")
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise BundleError(
                f"member {name!r}: expands {info.file_size:,} bytes from {info.compress_size:,} (more than {MAX_RATIO}:1): a zip bomb?"
            )
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise BundleError(f"members declare more than {MAX_TOTAL_BYTES:,} bytes in all")
    if MANIFEST_NAME not in seen:
        raise BundleError(f"no {MANIFEST_NAME}: not a bundle")


def _check_spans(f: IO[bytes], infos: list[zipfile.ZipInfo], file_size: int) -> None:
    """Each entry's bytes lie in their own range: no two entries share data (a zip's hard link, an overlapping
    bomb). An entry spans its local header — the 30 fixed bytes, then the name and extra field at the lengths the
    local header gives (they may differ from the central directory's: zip64 writes an extra field only there) —
    and its compressed data; the next entry's header must start at or after its end."""
    spans = sorted(infos, key=lambda i: (i.header_offset, i.filename))
    for i, info in enumerate(spans):
        f.seek(info.header_offset)
        head = f.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise BundleError(f"member {info.filename!r}: no local header at offset {info.header_offset:,} (truncated, or not a zip entry)")
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        end = info.header_offset + 30 + name_len + extra_len + info.compress_size
        if i + 1 < len(spans) and spans[i + 1].header_offset < end:
            other = spans[i + 1].filename
            raise BundleError(f"members {info.filename!r} and {other!r}: their bytes overlap (an entry that shares another's data)")
        if end > file_size:
            raise BundleError(f"member {info.filename!r}: its bytes run past the end of the file (truncated)")


def _read_small(z: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    with z.open(info) as r:
        data = r.read(cap + 1)
    if len(data) > cap or len(data) != info.file_size:
        raise BundleError(f"member {info.filename!r}: {len(data):,} bytes, its entry declares {info.file_size:,}")
    return data


def _target(data: Path, session: str, name: str) -> Path:
    sdir = data / "sessions" / session
    if name == LEDGER_NAME:
        return sdir / "events.jsonl"
    if name == CHECKPOINT_NAME:
        return sdir / "checkpoint.json"
    folder, base = name.split("/", 1)
    return {"receipts": sdir / "receipts", "certificates": data / "erasures", "keys": data / "bundle-keys"}[folder] / base


def open_bundle(path: str | os.PathLike[str], staging: str | os.PathLike[str]) -> Opened:
    """Check and extract the bundle at `path` into the empty folder `staging` (BundleError when refused)."""
    p = Path(path)
    try:
        st = os.stat(p, follow_symlinks=False)
    except OSError as exc:
        raise BundleError(f"{p}: {(exc.strerror or 'unreadable').lower()}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BundleError(f"{p}: not a regular file")
    try:
        z = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
        raise BundleError(f"{p.name}: not a readable zip — truncated, or not a bundle ({exc})") from None
    with z:
        infos = z.infolist()
        _check_directory(infos)
        if z.fp is None:  # never for a ZipFile opened for reading; the type allows it
            raise BundleError(f"{p.name}: not readable")
        _check_spans(z.fp, infos, st.st_size)
        by_name = {i.filename: i for i in infos}
        try:
            raw = _read_small(z, by_name[MANIFEST_NAME], MAX_MANIFEST_BYTES)
            env = parse_envelope(loads_strict(raw), max_payload_bytes=MAX_MANIFEST_BYTES)
        except (MalformedEnvelope, CanonicalError, ValueError) as exc:
            raise BundleError(f"{MANIFEST_NAME}: not a signed manifest ({exc})") from None
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:  # zlib.error: corrupt deflate data
            raise BundleError(f"{MANIFEST_NAME}: unreadable ({exc})") from None
        manifest = parse_manifest(env.payload)
        listed = {m.name for m in manifest.members}
        present = set(by_name) - {MANIFEST_NAME}
        opened = Opened(p, Path(staging), env, manifest, [], extra=sorted(present - listed), missing=sorted(listed - present))
        if opened.extra or opened.missing:
            return opened  # the verifier's manifest.members row names them; nothing is extracted
        for m in manifest.members:
            info = by_name[m.name]
            if info.file_size != m.size:
                opened.mismatches.append(f"{m.name}: the zip declares {info.file_size:,} bytes, the manifest {m.size:,}")
                continue
            out = _target(opened.data, manifest.session, m.name)
            out.parent.mkdir(parents=True, exist_ok=True)
            h = hashlib.sha256()
            n = 0
            try:
                with z.open(info) as r, open(out, "xb") as w:
                    while True:
                        b = r.read(min(CHUNK, m.size + 1 - n))
                        if not b:
                            break
                        n += len(b)
                        if n > m.size:
                            raise BundleError(f"member {m.name!r}: more bytes than the {m.size:,} declared")
                        h.update(b)
                        w.write(b)
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:  # a CRC error, a truncated entry, corrupt deflate data
                raise BundleError(f"member {m.name!r}: unreadable ({exc})") from None
            opened.bytes_read += n
            if n != m.size or h.hexdigest() != m.sha256:
                opened.mismatches.append(f"{m.name}: sha256 {h.hexdigest()[:16]}… ({n:,} bytes), the manifest says {m.sha256[:16]}… ({m.size:,})")
            if m.name.startswith("keys/"):
                try:
                    opened.keys.append(parse_public_key(out.read_text("utf-8"), source=m.name))
                except (KeyConfigError, UnicodeDecodeError, ValueError) as exc:
                    raise BundleError(f"member {m.name!r}: not a public key ({exc})") from None
    return opened
