"""Reviewer finding (issue 28 item 4: "the simplest strict rule … a bundle verifies only if it is byte for byte the
zip our exporter writes for its members — then no slack byte (times, attributes, …) can carry a second reading"):
the exporter dates every entry from the signed manifest's exported_at, but bundle.layout only checks that a local
header's time and date equal its central-directory entry's. Any time and date, the same in both headers, verify:
four unsigned bytes per member (a covert channel; `unzip` restores them as the files' modification times)."""

from __future__ import annotations

import struct
import tempfile
import zipfile
from pathlib import Path

import pytest

from bundle import BundleError, verify_file
from bundle.layout import END

from .test_bundle import Source, build_source


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("review5-time-slack"))


def redated(raw: bytes, path: Path, time: int, date: int) -> bytes:
    """The bundle with the first member's time and date set in its local header and its central-directory entry."""
    out = bytearray(raw)
    with zipfile.ZipFile(path) as z:
        first = z.infolist()[0]
    struct.pack_into("<HH", out, first.header_offset + 10, time, date)
    cd_off = END.unpack(raw[-END.size :])[6]
    assert out[cd_off : cd_off + 4] == b"PK\x01\x02"
    struct.pack_into("<HH", out, cd_off + 12, time, date)
    return bytes(out)


def test_a_member_dated_otherwise_than_the_export_is_refused(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    raw = source.bundle.read_bytes()
    assert verify_file(source.bundle, source.trusted).verdict == "verified"
    # 1999-12-31 23:59:58 in MS-DOS form: any 4 bytes that are a valid time and date would do
    forged = redated(raw, source.bundle, (23 << 11) | (59 << 5) | 29, ((1999 - 1980) << 9) | (12 << 5) | 31)
    assert forged != raw
    path = tmp_path / "redated.mre.zip"
    path.write_bytes(forged)
    with zipfile.ZipFile(path) as z:
        assert z.infolist()[0].date_time == (1999, 12, 31, 23, 59, 58)
    with pytest.raises(BundleError):
        verify_file(path, source.trusted)
