"""A bundle is exactly one zip, from byte 0 to its end record (docs/FORMAT.md §21, issue 28).

`check_layout(f, size)` refuses (BundleError, one line) any file that is not the zip the exporter writes around its
members, byte for byte, apart from the deflate encoding of their data:

- the entries start at byte 0 and follow one another with no gap and no overlap, then the central directory, then
  the end record (with a zip64 end record and locator before it exactly when the entry count, the directory's
  offset or its size need them), and nothing after it: no comment, no appended byte;
- every member's name is one the exporter writes (MANIFEST_NAME or bundle.format.MEMBER_RE, whole: no NUL, no
  byte after one, nothing a reader could take for another name);
- every central-directory entry is the one the writer makes from its name, method, time, CRC, sizes and offset
  (versions 20, or 45 with zip64; no flags, no comment, no extra field but zip64's where needed, internal
  attributes 0, external attributes 0600, host system MS-DOS or Unix);
- every local header is its central-directory entry's own (same version, flags, method, time, CRC, sizes and
  name; the sizes in a zip64 extra field or in the header);
- the end record's disks are 0, its counts the number of entries, its size and offset the central directory's;
- a stored member's data is exactly its size; a deflated member's data is one deflate stream that ends exactly
  at its last byte with its padding bits zero, inflating to exactly its size and CRC.

So no byte of a bundle can be changed without a refusal or a change to a member's bytes (which the signed manifest
covers), and every zip reader — one that streams local headers from the first byte, one that reads the central
directory from the end — reads the same members. The deflate encoding itself is not pinned (zlib versions encode
differently); every inflater reads one encoding the same way.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import IO

from bundle.format import MANIFEST_NAME, MEMBER_RE, BundleError

CHUNK = 1024 * 1024
LOCAL = struct.Struct("<4s2B4HL2L2H")  # 30 bytes
CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # 46 bytes
END = struct.Struct("<4s4H2LH")  # 22 bytes
END64 = struct.Struct("<4sQ2H2L4Q")  # 56 bytes
LOCATOR64 = struct.Struct("<4sLQL")  # 20 bytes
ZIP64_LIMIT = (1 << 31) - 1  # what zipfile writes zip64 fields past
COUNT_LIMIT = (1 << 16) - 1
VERSION, ZIP64_VERSION = 20, 45
EXTERNAL_ATTR = 0o600 << 16
HOSTS = (0, 3)  # the system that wrote the entry: MS-DOS (zipfile on Windows) or Unix
STORED, DEFLATED = 0, 8
MAX_TAIL = (1 << 16) + END.size  # where an end record with a comment can start

LOCAL_FIELDS = ((0, "signature"), (4, "version needed"), (5, "reserved byte"), (6, "flags"), (8, "method"), (10, "time"), (12, "date"),
                (14, "CRC-32"), (18, "compressed size"), (22, "size"), (26, "name length"), (28, "extra field length"), (30, "name"))
CENTRAL_FIELDS = ((0, "signature"), (4, "version made by"), (5, "host system"), (6, "version needed"), (7, "reserved byte"), (8, "flags"),
                  (10, "method"), (12, "time"), (14, "date"), (16, "CRC-32"), (20, "compressed size"), (24, "size"), (28, "name length"),
                  (30, "extra field length"), (32, "comment length"), (34, "disk number"), (36, "internal attributes"),
                  (38, "external attributes"), (42, "local header offset"), (46, "name"))
END_FIELDS = ((0, "signature"), (4, "disk number"), (6, "central directory's disk"), (8, "entries on this disk"), (10, "entries"),
              (12, "central directory size"), (16, "central directory offset"), (20, "comment length"))
END64_FIELDS = ((0, "signature"), (4, "record size"), (12, "version made by"), (14, "version needed"), (16, "disk number"),
                (20, "central directory's disk"), (24, "entries on this disk"), (32, "entries"), (40, "central directory size"),
                (48, "central directory offset"))
LOCATOR64_FIELDS = ((0, "signature"), (4, "disk number"), (8, "zip64 end record offset"), (16, "disks"))


def refuse(what: str) -> BundleError:
    return BundleError(f"not in canonical form: {what}")


@dataclass(frozen=True, slots=True)
class Entry:
    """What a central-directory entry says, the zip64 extra field resolved."""

    index: int
    at: int  # where the entry is in the file
    raw: bytes  # the entry's bytes as found
    name: str
    host: int
    method: int
    time: int
    date: int
    crc: int
    compress_size: int
    size: int
    offset: int
    external_attr: int


def _field(fields: tuple[tuple[int, str], ...], at: int, tail: str) -> str:
    """The name of the field holding byte `at` of a record (`tail`: what follows the last field)."""
    name = tail
    for start, label in fields:
        if at >= start:
            name = label
    return name


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _read(f: IO[bytes], at: int, n: int) -> bytes:
    f.seek(at)
    return f.read(n)


def end_records(count: int, cd_offset: int, cd_size: int) -> bytes:
    """The end records zipfile writes after a central directory of `count` entries (zip64 ones when needed)."""
    out = b""
    if count > COUNT_LIMIT or cd_offset > ZIP64_LIMIT or cd_size > ZIP64_LIMIT:
        out += END64.pack(b"PK\x06\x06", 44, ZIP64_VERSION, ZIP64_VERSION, 0, 0, count, count, cd_size, cd_offset)
        out += LOCATOR64.pack(b"PK\x06\x07", 0, cd_offset + cd_size, 1)
        count, cd_size, cd_offset = min(count, 0xFFFF), min(cd_size, 0xFFFFFFFF), min(cd_offset, 0xFFFFFFFF)
    return out + END.pack(b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, 0)


def local_header(e: Entry, zip64: bool) -> bytes:
    """The local header zipfile writes for `e` (`zip64`: sizes in a zip64 extra field, as for a streamed member)."""
    name = e.name.encode("ascii")
    csize, size, extra, version = e.compress_size, e.size, b"", VERSION
    if zip64:
        extra = struct.pack("<HHQQ", 1, 16, size, csize)
        csize = size = 0xFFFFFFFF
        version = ZIP64_VERSION
    return LOCAL.pack(b"PK\x03\x04", version, 0, 0, e.method, e.time, e.date, e.crc, csize, size, len(name), len(extra)) + name + extra


def central_entry(e: Entry, local_zip64: bool) -> bytes:
    """The central-directory entry zipfile writes for `e`, whose local header had a zip64 field or not."""
    name = e.name.encode("ascii")
    wide: list[int] = []
    csize, size, offset = e.compress_size, e.size, e.offset
    if size > ZIP64_LIMIT or csize > ZIP64_LIMIT:
        wide += [size, csize]
        csize = size = 0xFFFFFFFF
    if offset > ZIP64_LIMIT:
        wide.append(offset)
        offset = 0xFFFFFFFF
    extra = struct.pack("<HH" + "Q" * len(wide), 1, 8 * len(wide), *wide) if wide else b""
    version = ZIP64_VERSION if wide or local_zip64 else VERSION
    return CENTRAL.pack(
        b"PK\x01\x02", version, e.host, version, 0, 0, e.method, e.time, e.date, e.crc, csize, size, len(name), len(extra), 0, 0, 0,
        e.external_attr, offset,
    ) + name + extra


def _parse_central(directory: bytes, base: int) -> list[Entry]:
    entries: list[Entry] = []
    pos = 0
    while pos < len(directory):
        k = len(entries)
        if len(directory) - pos < CENTRAL.size or directory[pos : pos + 4] != b"PK\x01\x02":
            raise refuse(f"no central-directory entry at byte {base + pos:,} (entry {k + 1})")
        (_sig, _made, host, _need, _res, _flags, method, time, date, crc, csize, size, nlen, xlen, clen, _disk, _iattr, eattr,
         offset) = CENTRAL.unpack_from(directory, pos)
        end = pos + CENTRAL.size + nlen + xlen + clen
        if end > len(directory):
            raise refuse(f"central-directory entry {k + 1} runs past the central directory")
        raw_name = directory[pos + CENTRAL.size : pos + CENTRAL.size + nlen]
        extra = directory[pos + CENTRAL.size + nlen : pos + CENTRAL.size + nlen + xlen]
        wide = [v == 0xFFFFFFFF for v in (size, csize, offset)]
        values = [size, csize, offset]
        if any(wide) and len(extra) >= 4 and extra[:2] == b"\x01\x00":
            n = sum(wide)
            if len(extra) >= 4 + 8 * n:
                got = iter(struct.unpack_from("<" + "Q" * n, extra, 4))
                values = [next(got) if w else v for v, w in zip(values, wide, strict=True)]
        try:
            name = raw_name.decode("ascii")
        except UnicodeDecodeError:
            raise refuse(f"central-directory entry {k + 1}: a name that is not ASCII") from None
        if name != MANIFEST_NAME and MEMBER_RE.fullmatch(name) is None:  # a NUL, a byte after it: no name the exporter writes
            shown = repr(name[:64]) + ("…" if len(name) > 64 else "")
            raise refuse(f"central-directory entry {k + 1}: the name {shown} is not one the exporter writes (docs/FORMAT.md §21)")
        entries.append(Entry(k, base + pos, directory[pos:end], name, host, method, time, date, crc, values[1], values[0], values[2], eattr))
        pos = end
    return entries


def _check_central(e: Entry, local_zip64: bool) -> None:
    expected = central_entry(e, local_zip64)
    if e.host not in HOSTS:
        raise refuse(f"the central-directory entry of {e.name!r}: host system {e.host} (MS-DOS or Unix only)")
    if e.external_attr != EXTERNAL_ATTR:
        raise refuse(f"the central-directory entry of {e.name!r}: external attributes {e.external_attr:#x}, not {EXTERNAL_ATTR:#x}")
    if e.raw == expected:
        return
    at = _first_difference(e.raw, expected)
    nlen = len(e.name.encode("ascii"))
    what = _field(CENTRAL_FIELDS, at, "name") if at < CENTRAL.size + nlen else "extra field or comment"
    raise refuse(f"the central-directory entry of {e.name!r} is not the one the exporter writes: {what} (byte {e.at + at:,})")


def _end(f: IO[bytes], size: int) -> tuple[int, int, int, int]:
    """(entries, central directory offset, its size, where the end records start) from the end records."""
    if size < END.size:
        raise refuse(f"{size} bytes: too short for a zip")
    tail_at = max(size - MAX_TAIL, 0)
    tail = _read(f, tail_at, size - tail_at)
    if tail[-END.size :][:4] != b"PK\x05\x06" or tail[-2:] != b"\x00\x00":
        found = tail.rfind(b"PK\x05\x06")
        if found < 0 or found > len(tail) - END.size:
            raise refuse("no end-of-central-directory record in the last 22 bytes")
        (comment,) = struct.unpack_from("<H", tail, found + 20)
        if comment:
            raise refuse(f"a zip comment ({comment:,} bytes in the end record's length field) or data after the end record")
        raise refuse(f"{len(tail) - found - END.size:,} byte(s) after the end record")
    eocd_at = size - END.size
    _s, _d, _cd, _n_disk, count, cd_size, cd_offset, _c = END.unpack(tail[-END.size :])
    records_at = eocd_at
    loc = tail[-END.size - LOCATOR64.size : -END.size] if size >= END.size + LOCATOR64.size else b""
    if loc[:4] == b"PK\x06\x07" and size >= END.size + LOCATOR64.size + END64.size:
        rec = _read(f, eocd_at - LOCATOR64.size - END64.size, END64.size)
        if rec[:4] == b"PK\x06\x06":
            _s64, _rs, _v1, _v2, _d1, _d2, _n1, count, cd_size, cd_offset = END64.unpack(rec)
            records_at = eocd_at - LOCATOR64.size - END64.size
    return count, cd_offset, cd_size, records_at


def _check_end(f: IO[bytes], size: int, count: int, cd_offset: int, cd_size: int, records_at: int) -> None:
    found = _read(f, records_at, size - records_at)
    expected = end_records(count, cd_offset, cd_size)
    if found == expected:
        return
    at = _first_difference(found, expected)
    where: tuple[tuple[str, tuple[tuple[int, str], ...], int], ...]
    if len(found) > END.size:
        where = (("the zip64 end record", END64_FIELDS, 0), ("the zip64 locator", LOCATOR64_FIELDS, END64.size),
                 ("the end record", END_FIELDS, END64.size + LOCATOR64.size))
    else:
        where = (("the end record", END_FIELDS, 0),)
    if len(found) != len(expected):
        raise refuse("the end records are not the ones the exporter writes for this central directory (zip64 or not)")
    label, fields, start = next(w for w in reversed(where) if at >= w[2])
    raise refuse(f"{label} disagrees with the central directory: {_field(fields, at - start, 'comment')} (byte {records_at + at:,})")


def check_layout(f: IO[bytes], size: int) -> list[str]:
    """Refuse (BundleError) the file `f` of `size` bytes unless it is one canonical zip from byte 0 to its end record;
    its members' names, as their headers hold them, in order."""
    count, cd_offset, cd_size, records_at = _end(f, size)
    ahead = records_at - cd_size - cd_offset
    if ahead != 0:
        if ahead > 0 and _read(f, records_at - cd_size, 4) == b"PK\x01\x02":  # the directory is there, its offset not
            raise refuse(f"{ahead:,} bytes before the first entry (junk, or another zip, in front of the bundle)")
        raise refuse("the end record's central directory size and offset do not end at the end record")
    entries = _parse_central(_read(f, cd_offset, cd_size), cd_offset)
    _check_end(f, size, len(entries), cd_offset, cd_size, records_at)
    pos = 0
    for e in entries:
        if e.offset != pos:
            if e.index == 0:
                raise refuse(f"{e.offset:,} bytes before the first entry (junk, or another zip, in front of the bundle)")
            before = entries[e.index - 1].name
            if e.offset < pos:
                raise BundleError(f"members {before!r} and {e.name!r}: their bytes overlap (an entry that shares another's data)")
            raise refuse(f"{e.offset - pos:,} bytes between the members {before!r} and {e.name!r}")
        head = _read(f, pos, LOCAL.size)
        if len(head) < LOCAL.size or head[:4] != b"PK\x03\x04":
            raise refuse(f"member {e.name!r}: no local header at byte {pos:,} (truncated, or not a zip entry)")
        zip64 = struct.unpack_from("<H", head, 28)[0] == 20
        expected = local_header(e, zip64)
        found = head + _read(f, pos + LOCAL.size, len(expected) - LOCAL.size)
        if found != expected:
            at = _first_difference(found, expected)
            what = _field(LOCAL_FIELDS, at, "name") if at < LOCAL.size + len(e.name) else "extra field"
            raise refuse(f"the local header of {e.name!r} disagrees with its central-directory entry: {what} (byte {pos + at:,})")
        _check_central(e, zip64)
        pos += len(expected)
        if pos + e.compress_size > cd_offset:
            raise refuse(f"member {e.name!r}: its data runs into the central directory")
        _check_data(f, e, pos)
        pos += e.compress_size
    if pos != cd_offset:
        raise refuse(f"{cd_offset - pos:,} bytes between the last entry and the central directory")
    return [e.name for e in entries]


def _drain(d: zlib._Decompress, data: bytes, cap: int, got: list[int], e: Entry) -> bytes:
    """Inflate `data`, at most `cap` bytes past `got[0]` in all (a bomb stops here); returns what came out."""
    out: list[bytes] = []
    while not d.eof:
        b = d.decompress(data, CHUNK)
        got[0] += len(b)
        if got[0] > cap:
            raise refuse(f"member {e.name!r}: its data inflates past its size of {cap:,} bytes")
        out.append(b)
        data = d.unconsumed_tail
        if not data and len(b) < CHUNK:  # all in, and no output held back
            break
    return b"".join(out)


def _check_data(f: IO[bytes], e: Entry, at: int) -> None:
    """A stored member's data is its size; a deflated one is one stream ending at its last byte, its padding zero."""
    if e.method == STORED:
        if e.compress_size != e.size:
            raise refuse(f"member {e.name!r}: stored, but {e.compress_size:,} bytes of data for a size of {e.size:,}")
        crc, left = 0, e.size
        f.seek(at)
        while left:
            b = f.read(min(CHUNK, left))
            if not b:
                raise refuse(f"member {e.name!r}: its data runs past the end of the file (truncated)")
            crc, left = zlib.crc32(b, crc), left - len(b)
        if crc != e.crc:
            raise BundleError(f"member {e.name!r}: unreadable (Bad CRC-32: {crc:08x}, its entry says {e.crc:08x})")
        return
    if e.method != DEFLATED or e.compress_size == 0:
        raise refuse(f"member {e.name!r}: no deflate data")
    d = zlib.decompressobj(-15)
    got = [0]
    crc = 0
    left = e.compress_size
    f.seek(at)
    try:
        while left > 1:
            b = f.read(min(CHUNK, left - 1))
            if not b:
                raise refuse(f"member {e.name!r}: its data runs past the end of the file (truncated)")
            left -= len(b)
            crc = zlib.crc32(_drain(d, b, e.size, got, e), crc)
            if d.eof:
                raise refuse(f"member {e.name!r}: its deflate stream ends {left:,} bytes before its data does")
        last = f.read(1)
        if len(last) != 1:
            raise refuse(f"member {e.name!r}: its data runs past the end of the file (truncated)")
        before = d.copy()
        tail = _drain(d, last, e.size, got, e)
        crc = zlib.crc32(tail, crc)
        if not d.eof or d.unused_data:
            raise refuse(f"member {e.name!r}: its deflate stream does not end at its last byte")
        if got[0] != e.size or crc != e.crc:
            raise BundleError(f"member {e.name!r}: unreadable (inflates to {got[0]:,} bytes, CRC-32 {crc:08x}; its entry says {e.size:,}, {e.crc:08x})")
        # The bits of the last byte after the end-of-block code are padding, zero as zlib writes them: from the top
        # bit down, a bit whose flip leaves the stream ending with the same bytes is padding, and the first one that
        # changes it is the end-of-block code's.
        for bit in range(7, -1, -1):
            other = before.copy()
            seen = [got[0] - len(tail)]
            try:
                same = _drain(other, bytes([last[0] ^ (1 << bit)]), e.size, seen, e) == tail and other.eof and not other.unused_data
            except (zlib.error, BundleError):
                same = False
            if not same:
                break
            if last[0] & (1 << bit):
                raise refuse(f"member {e.name!r}: padding bits set after its deflate stream's end")
    except zlib.error as exc:
        raise refuse(f"member {e.name!r}: unreadable, not a deflate stream ({exc})") from None
