"""Reviewer finding (issue 28 item 4, "a bundle is exactly one zip … no slack byte can carry a second reading"): a
member name with a NUL byte and anything after it (here: 'ledger/events.jsonl\\0' + 93 bytes of other text, in the
local header and the central directory alike, offsets fixed) verifies VERIFIED and imports. Python's zipfile cuts a
name at its first NUL (ZipInfo.filename) and the verifier reads that; bundle.layout compares the whole raw name with
itself, so the bytes after the NUL are slack no signature covers. A reader that keeps the whole name (Go's
archive/zip, a streaming reader, `unzip`) sees a member 'ledger/events.jsonl\\0hidden…', not the manifest's
'ledger/events.jsonl': another reading of the same file, and up to 64 KiB of unsigned bytes per name."""

from __future__ import annotations

import os
import struct
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle import BundleError, import_bundle, verify_file
from bundle.format import LEDGER_NAME
from bundle.layout import CENTRAL, END

from .test_bundle import Source, build_source, empty_data_dir, nothing_imported

HIDDEN = b"\x00" + b"hidden: my locker code is 4711 " * 3


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("review5-nul-name"))


def renamed(raw: bytes, path: Path, rename: Callable[[bytes], bytes]) -> bytes:
    """The bundle's bytes with each member's raw name (local header and central directory) passed through `rename`,
    every offset and size fixed; nothing else changed."""
    _s, _d, _cd, _n, count, _cd_size, cd_off, _c = END.unpack(raw[-END.size :])
    body, directory, pos = b"", b"", cd_off
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    assert len(infos) == count
    for info in infos:
        f = CENTRAL.unpack_from(raw, pos)
        nlen, xlen, clen = f[12], f[13], f[14]
        central = raw[pos : pos + CENTRAL.size + nlen + xlen + clen]
        pos += len(central)
        at = info.header_offset
        lnlen, lxlen = struct.unpack_from("<HH", raw, at + 26)
        name = raw[at + 30 : at + 30 + lnlen]
        rest = raw[at + 30 + lnlen : at + 30 + lnlen + lxlen + info.compress_size]
        new = rename(name)
        head = bytearray(raw[at : at + 30])
        struct.pack_into("<H", head, 26, len(new))
        c = bytearray(central[: CENTRAL.size])
        struct.pack_into("<H", c, 28, len(new))
        struct.pack_into("<L", c, 42, len(body))
        body += bytes(head) + new + rest
        directory += bytes(c) + new + central[CENTRAL.size + nlen :]
    return body + directory + END.pack(b"PK\x05\x06", 0, 0, count, count, len(directory), len(body), 0)


def test_the_rename_helper_rebuilds_the_genuine_bundle_byte_for_byte(source: Source) -> None:
    raw = source.bundle.read_bytes()
    assert renamed(raw, source.bundle, lambda n: n) == raw


def test_a_member_name_with_a_nul_byte_and_hidden_bytes_after_it_is_refused(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    raw = source.bundle.read_bytes()
    forged = renamed(raw, source.bundle, lambda n: n + HIDDEN if n == LEDGER_NAME.encode() else n)
    path = tmp_path / "nul.mre.zip"
    path.write_bytes(forged)
    with zipfile.ZipFile(path) as z:  # what a reader keeping the whole name sees: not the manifest's member name
        assert LEDGER_NAME + HIDDEN.decode() in [i.orig_filename for i in z.infolist()]
    with pytest.raises(BundleError):
        verify_file(path, source.trusted)
    data2 = empty_data_dir(tmp_path / "data2")
    try:
        import_bundle(data2, path, trusted=source.trusted)
    except BundleError:
        pass
    assert nothing_imported(data2), os.listdir(data2 / "imported")
