"""bundle.read.check_zip opens the bundle once: the file whose type and size are checked is the file whose layout is
checked and whose members are read. Before, it stat'ed the path and then opened the path again: a file swapped in
between (here, the genuine bundle with 1,000 bytes appended, which no check would pass) was read, while the layout was
checked against the first file's size — and it verified."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import IO, Any

import pytest

from bundle import BundleError, verify_file
from bundle import read as bread

from .test_bundle import Source, build_source


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("open-once"))


def test_a_bundle_swapped_after_its_checks_began_is_not_the_one_read(
    source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    raw = source.bundle.read_bytes()
    path = tmp_path / "b.mre.zip"
    path.write_bytes(raw)
    swapped = tmp_path / "swapped.mre.zip"
    swapped.write_bytes(raw + b"\x00" * 1000)
    with pytest.raises(BundleError):
        verify_file(swapped, source.trusted)  # the swapped-in file alone is refused

    real_init = zipfile.ZipFile.__init__

    def swap_then_open(self: zipfile.ZipFile, file: Any, *a: Any, **k: Any) -> None:
        os.replace(swapped, path)  # between the file-type check and the zip's opening
        real_init(self, file, *a, **k)

    sizes: list[tuple[int, int]] = []
    real_layout = bread.check_layout

    def layout(f: IO[bytes], size: int) -> list[str]:
        sizes.append((os.fstat(f.fileno()).st_size, size))
        return real_layout(f, size)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", swap_then_open)
    monkeypatch.setattr(bread, "check_layout", layout)
    try:
        report = verify_file(path, source.trusted)
    except BundleError:
        report = None
    assert sizes, "the layout was checked"
    # the layout was checked against the size of the very file it read: the file that was opened once
    assert all(read == checked for read, checked in sizes), sizes
    if report is not None:
        assert sizes[0][0] == len(raw)  # what verified is the genuine bundle, the file first opened
