"""Open a bundle without trusting it: every structural refusal before a byte is written (docs/FORMAT.md §21).

`open_bundle(path, staging)` checks the zip's directory (names, types, duplicates, encryption, methods, declared
sizes, compression ratios, totals) and that the file is exactly one canonical zip from byte 0 to its end record
(bundle.layout: no bytes before, between or after the entries, no two sharing bytes, every header the writer's) —
`check_zip(path)` alone, before the caller makes any folder — reads and parses the signed manifest, then streams each
member into `staging` laid out as a data directory (`sessions/<S>/events.jsonl`, `…/checkpoint.json`,
`…/receipts/`, `erasures/`), reading at most the declared size plus one byte of each, and hashing as it goes.
A structural problem raises BundleError (the whole bundle is refused); a member whose bytes differ from the
manifest is reported in `Opened.mismatches` (the verifier's `members.hashes` row fails).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO

from bundle.format import (
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
    zip_date_time,
)
from bundle.layout import check_layout
from ledger.canonical import CanonicalError, loads_strict
from receipts.dsse import Envelope, MalformedEnvelope, parse_envelope
from receipts.keys import KeyConfigError, PublicKey, parse_public_key
from storage.local import open_private, private_dir

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
    # open_bundle(unnamed=True): the members that hold a session's words (WORDS) are in files with no name on disk,
    # so a process killed while it checks them leaves none of them behind: the ledger (`ledger`, a descriptor for
    # storage.files.receipts.audit.Auditor) and the receipts and certificates, one after another in `packed` at `unnamed_at`.
    ledger: int | None = None
    unnamed_at: dict[str, tuple[int, int]] = field(default_factory=dict)  # member name: (offset, size) in `packed`
    _files: list[IO[bytes]] = field(default_factory=list, repr=False)

    def words(self, folder: str, pattern: str) -> list[tuple[str, Callable[[], bytes]]]:
        """(file name, read its bytes) of each member of `folder` ("receipts" or "certificates") whose file name
        matches `pattern`, by name: from the staging folder, or from the nameless file holding them."""
        if not self._files:
            where = _target(self.data, self.manifest.session, f"{folder}/x").parent
            paths = sorted(where.glob(pattern)) if where.is_dir() else []
            return [(p.name, p.read_bytes) for p in paths]
        names = sorted(n.split("/", 1)[1] for n in self.unnamed_at if n.startswith(folder + "/"))
        return [(n, partial(self._read_unnamed, f"{folder}/{n}")) for n in names if fnmatch.fnmatchcase(n, pattern)]

    def _read_unnamed(self, name: str) -> bytes:
        offset, size = self.unnamed_at[name]
        return os.pread(self._files[-1].fileno(), size, offset) if size else b""

    def close(self) -> None:
        """Close the nameless files (the kernel frees them): after this, `ledger` and `words` read nothing."""
        for f in self._files:
            f.close()
        self._files.clear()


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
    return {"receipts": sdir / "receipts", "certificates": data / "erasures", "keys": data / "bundle-keys", "notes": sdir / "notes"}[folder] / base


WORDS = ("receipts/", "certificates/")  # with LEDGER_NAME: the members that quote what a session said


class _OwnZip(zipfile.ZipFile):
    """A ZipFile that reads the file object it was given and closes it with itself (a plain ZipFile leaves a file it
    was passed open)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._own = f
        super().__init__(f)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._own.close()


def _open_once(p: Path) -> tuple[IO[bytes], int]:
    """The regular file at `p` opened (never through a symlink, never waiting on a FIFO), and its size: what is
    checked is what is read, the same open file — a file swapped in at `p` afterwards is never looked at."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a symlink
            raise BundleError(f"{p}: not a regular file") from None
        raise BundleError(f"{p}: {(exc.strerror or 'unreadable').lower()}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BundleError(f"{p}: not a regular file")
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return f, st.st_size


def check_zip(path: str | os.PathLike[str]) -> zipfile.ZipFile:
    """The bundle at `path` opened, its structure checked (BundleError when refused): every name, type and cap of its
    directory, and one zip from byte 0 to its end record (bundle.layout), every name as zipfile reads it the name its
    headers hold. The file is opened once: the checks and every later read (`open_bundle`) are of that one open file.
    Nothing is written; the caller closes it (or hands it to `open_bundle`)."""
    p = Path(path)
    f, size = _open_once(p)
    try:
        z = _OwnZip(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError, NotImplementedError, struct.error) as exc:
        f.close()
        raise BundleError(f"{p.name}: not a readable zip — truncated, or not a bundle ({exc})") from None
    except BaseException:
        f.close()
        raise
    try:
        infos = z.infolist()
        _check_directory(infos)
        names = check_layout(f, size)  # one zip from byte 0 to its end record, before a byte is extracted
        if len(names) != len(infos):
            raise BundleError(f"{p.name}: zipfile reads {len(infos):,} members, its central directory holds {len(names):,}")
        for info, name in zip(infos, names, strict=True):
            if info.filename != name or info.orig_filename != name:  # zipfile cuts a name at a NUL: never two readings
                raise BundleError(f"member {name!r}: zipfile reads its name as {info.orig_filename!r}")
    except BaseException:
        z.close()
        raise
    return z


def open_bundle(
    path: str | os.PathLike[str], staging: str | os.PathLike[str], *, unnamed: bool = False, checked: zipfile.ZipFile | None = None
) -> Opened:
    """Check and extract the bundle at `path` into the empty folder `staging` (BundleError when refused).
    `unnamed`: the ledger, receipts and certificates go into files with no name on disk (Opened.ledger, .words),
    the caller closes them (Opened.close); the checkpoint and the keys are extracted as files all the same.
    `checked`: what `check_zip(path)` returned, if the caller checked the structure first (it is closed here)."""
    p = Path(path)
    z = check_zip(p) if checked is None else checked
    with z:
        infos = z.infolist()
        by_name = {i.filename: i for i in infos}
        try:
            raw = _read_small(z, by_name[MANIFEST_NAME], MAX_MANIFEST_BYTES)
            env = parse_envelope(loads_strict(raw), max_payload_bytes=MAX_MANIFEST_BYTES)
        except (MalformedEnvelope, CanonicalError, ValueError) as exc:
            raise BundleError(f"{MANIFEST_NAME}: not a signed manifest ({exc})") from None
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:  # zlib.error: corrupt deflate data
            raise BundleError(f"{MANIFEST_NAME}: unreadable ({exc})") from None
        manifest = parse_manifest(env.payload)
        _check_dates(infos, manifest.exported_at)
        listed = {m.name for m in manifest.members}
        present = set(by_name) - {MANIFEST_NAME}
        opened = Opened(p, Path(staging), env, manifest, [], extra=sorted(present - listed), missing=sorted(listed - present))
        if opened.extra or opened.missing:
            return opened  # the verifier's manifest.members row names them; nothing is extracted
        try:
            _extract(z, by_name, opened, unnamed)
        except BaseException:
            opened.close()
            raise
    return opened


def _check_dates(infos: list[zipfile.ZipInfo], exported_at: str) -> None:
    """Every entry dated as the exporter dates it, from the signed manifest's exported_at (bundle.format.zip_date_time):
    no entry's time or date is a slack byte another reading (or `unzip`, restoring it) could carry."""
    when = zip_date_time(exported_at)
    for info in infos:
        if info.date_time != when:
            raise BundleError(
                f"not in canonical form: member {info.filename!r} is dated {_shown_date(info.date_time)}, not the manifest's "
                f"exported_at {_shown_date(when)} (the exporter dates every entry with it)"
            )


def _shown_date(t: tuple[int, int, int, int, int, int]) -> str:
    return "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format(*t)


def _new_private(path: Path) -> IO[bytes]:
    """A new file (refused if it exists, as open(path, "xb")), 0600 whatever the umask: it holds the session's words."""
    return os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW), "wb")


def _extract(z: zipfile.ZipFile, by_name: dict[str, zipfile.ZipInfo], opened: Opened, unnamed: bool) -> None:
    manifest = opened.manifest
    if unnamed:  # made before the first byte of a member is written, so no word ever has a name on disk
        private_dir(opened.data)
        opened._files.append(tempfile.TemporaryFile(dir=opened.data))  # the ledger
        opened._files.append(tempfile.TemporaryFile(dir=opened.data))  # receipts and certificates, packed
        opened.ledger = opened._files[0].fileno()
    for m in manifest.members:
        info = by_name[m.name]
        if info.file_size != m.size:
            opened.mismatches.append(f"{m.name}: the zip declares {info.file_size:,} bytes, the manifest {m.size:,}")
            continue
        out = _target(opened.data, manifest.session, m.name)
        private_dir(out.parent)  # also when unnamed: the folders are what they would be (0700, whatever the umask)
        sink = None
        if unnamed and (m.name == LEDGER_NAME or m.name.startswith(WORDS)):
            sink = opened._files[0 if m.name == LEDGER_NAME else 1]
        start = 0 if sink is None else sink.seek(0, os.SEEK_END)
        h = hashlib.sha256()
        n = 0
        try:
            with z.open(info) as r, _new_private(out) if sink is None else nullcontext(sink) as w:
                while True:
                    b = r.read(min(CHUNK, m.size + 1 - n))
                    if not b:
                        break
                    n += len(b)
                    if n > m.size:
                        raise BundleError(f"member {m.name!r}: more bytes than the {m.size:,} declared")
                    h.update(b)
                    w.write(b)
                w.flush()
        except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:  # a CRC error, a truncated entry, corrupt deflate data
            raise BundleError(f"member {m.name!r}: unreadable ({exc})") from None
        if sink is not None and m.name != LEDGER_NAME:
            opened.unnamed_at[m.name] = (start, n)
        opened.bytes_read += n
        if n != m.size or h.hexdigest() != m.sha256:
            opened.mismatches.append(f"{m.name}: sha256 {h.hexdigest()[:16]}… ({n:,} bytes), the manifest says {m.sha256[:16]}… ({m.size:,})")
        if m.name.startswith("keys/"):
            try:
                opened.keys.append(parse_public_key(out.read_text("utf-8"), source=m.name))
            except (KeyConfigError, UnicodeDecodeError, ValueError) as exc:
                raise BundleError(f"member {m.name!r}: not a public key ({exc})") from None
