"""A bundle is exactly one zip, from byte 0 to its end record (issue 28 item 4, docs/FORMAT.md §21).

A reader that streams local headers from the first byte and one that reads the central directory from the end must
see the same members: so a file with anything in front of the bundle's first entry (junk, or a forged zip whose
ledger a streaming reader would take), anything after its end record (appended data, a comment), an end record
whose disks, counts, size or offset are not the central directory's, or a local header that is not its
central-directory entry's own is refused — by `verify` and by every import (files and PostgreSQL), before a byte
is extracted. The byte-by-byte flip of a whole small bundle is in tests/services/test_bundle_hostile.py."""

from __future__ import annotations

import base64
import os
import struct
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr
import pytest

import bundle.export
import bundle.layout
from bundle import BundleError, ImportRefused, export_session, import_bundle, verify_file
from bundle.format import LEDGER_NAME
from bundle.layout import CENTRAL, END
from cli.prog_bundle import main
from storage.stores import Stores, file_stores, pg_stores
from webui.bundle_ui import BundleUI
from webui.mcp_tools import make_tools
from webui.sessions import new_session_key

from ..faces.test_webui_bundle import exported, imported_root, plain, service_at, talked
from .test_bundle import Source, build_source, empty_data_dir, nothing_imported, read_members, rebuilt

EOCD = 22  # the end-of-central-directory record's bytes, with no comment


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("canonical-source"))


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """verify_file stages under tempfile's folder: point it at a fresh one, and require it empty afterwards."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert os.listdir(folder) == [], "verification left staged files behind"


@pytest.fixture
def data2(tmp_path: Path) -> Path:
    return empty_data_dir(tmp_path / "data2")


def refused(source: Source, data2: Path, path: Path, match: str) -> None:
    """Refused for its structure (BundleError, one line naming `match`) by verify and by import; nothing imported."""
    with pytest.raises(BundleError, match=match) as info:
        verify_file(path, source.trusted)
    assert "\n" not in str(info.value)
    with pytest.raises(BundleError, match=match) as imp:
        import_bundle(data2, path, trusted=source.trusted)
    assert not isinstance(imp.value, ImportRefused), "a structural refusal comes before any check"
    assert nothing_imported(data2)


def forged_zip(source: Source, tmp_path: Path) -> bytes:
    """The genuine members with another ledger (a word changed), written as a zip of its own."""
    members = read_members(source.bundle)
    members[LEDGER_NAME] = members[LEDGER_NAME].replace(b"Lisbon", b"Madrid")
    return rebuilt(tmp_path / "forged.mre.zip", members).read_bytes()


@pytest.mark.usefixtures("private_tmp")
class TestOneZipFromByteZero:
    def test_a_forged_zip_followed_by_the_genuine_bundle_is_refused(
        self, source: Source, data2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        forged = forged_zip(source, tmp_path)
        path = tmp_path / "both.mre.zip"
        path.write_bytes(forged + source.bundle.read_bytes())
        with zipfile.ZipFile(tmp_path / "forged.mre.zip") as z:  # what a reader from byte 0 would take as the ledger
            assert b"Madrid" in z.read(LEDGER_NAME)
        refused(source, data2, path, f"{len(forged):,} bytes before the first entry")
        assert main(["verify", str(path), "--trust", str(source.pub)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: refused: not in canonical form: {len(forged):,} bytes before the first entry (junk, or another zip, in front of the bundle)"

    def test_a_thousand_junk_bytes_before_a_genuine_bundle_are_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        path = tmp_path / "junk.mre.zip"
        path.write_bytes(bytes(range(250)) * 4 + source.bundle.read_bytes())
        refused(source, data2, path, "1,000 bytes before the first entry")

    @pytest.mark.parametrize("tail", [b"\x00", b"x" * 1000, None], ids=["one-byte", "1000-bytes", "the-end-record-again"])
    def test_bytes_after_the_end_record_are_refused(self, source: Source, data2: Path, tmp_path: Path, tail: bytes | None) -> None:
        """None: the end record written twice (zipfile reads the last one, whose directory is the genuine one)."""
        raw = source.bundle.read_bytes()
        path = tmp_path / "tail.mre.zip"
        path.write_bytes(raw + (raw[-EOCD:] if tail is None else tail))
        refused(source, data2, path, "after the end record|end record|not a readable zip")

    def test_a_zip_comment_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        raw = bytearray(source.bundle.read_bytes())
        comment = b"a second reading"
        raw[-2:] = struct.pack("<H", len(comment))
        path = tmp_path / "comment.mre.zip"
        path.write_bytes(bytes(raw) + comment)
        with zipfile.ZipFile(path) as z:  # a valid zip with a comment
            assert z.comment == comment
        refused(source, data2, path, "comment|after the end record")

    def test_flipping_any_bit_of_the_end_record_is_refused(self, source: Source, tmp_path: Path) -> None:
        """All 22 bytes × 8 bits of the end-of-central-directory record (signature, disk numbers, entry counts,
        directory size and offset, comment length): each flip is refused."""
        raw = source.bundle.read_bytes()
        path = tmp_path / "flipped.mre.zip"
        accepted = []
        for i in range(len(raw) - EOCD, len(raw)):
            for bit in range(8):
                b = bytearray(raw)
                b[i] ^= 1 << bit
                path.write_bytes(b)
                try:
                    verify_file(path, source.trusted)
                except BundleError:
                    continue
                accepted.append((i - (len(raw) - EOCD), bit))
        assert accepted == [], f"end-record (byte, bit) flips not refused: {accepted}"

    @pytest.mark.parametrize(
        ("field", "at", "value"),
        [("version needed", 4, b"\x2d\x00"), ("flags", 6, b"\x08\x00"), ("method", 8, b"\x08\x00"), ("time", 10, b"\x00\x00"),
         ("CRC-32", 14, b"\x00\x00\x00\x00"), ("compressed size", 18, b"\x01\x00\x00\x00"), ("name", 30, b"X")],
        ids=lambda v: v if isinstance(v, str) else None,
    )
    def test_a_local_header_that_disagrees_with_its_central_directory_entry_is_refused(
        self, source: Source, data2: Path, tmp_path: Path, field: str, at: int, value: bytes
    ) -> None:
        """The checkpoint's local header (the second entry) with one field changed, the central directory as it was."""
        raw = bytearray(source.bundle.read_bytes())
        with zipfile.ZipFile(source.bundle) as z:
            start = z.getinfo("checkpoint.json").header_offset
        raw[start + at : start + at + len(value)] = value
        path = tmp_path / "local.mre.zip"
        path.write_bytes(bytes(raw))
        refused(source, data2, path, f"local header of 'checkpoint.json'.*{field}")


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    data = empty_data_dir(tmp_path / "data")
    opened = file_stores(data) if request.param == "file" else pg_stores(request.getfixturevalue("pg_url"), data)
    try:
        yield opened
    finally:
        if opened.kind == "files":
            opened.index.close()
            opened.ledger.close()


def test_every_import_refuses_a_bundle_with_another_zip_in_front_on_either_backend(source: Source, stores: Stores, tmp_path: Path) -> None:
    path = tmp_path / "both.mre.zip"
    path.write_bytes(forged_zip(source, tmp_path) + source.bundle.read_bytes())
    with pytest.raises(BundleError, match="before the first entry") as info:
        import_bundle(stores.data_dir, path, trusted=source.trusted, stores=stores)
    assert not isinstance(info.value, ImportRefused)
    assert nothing_imported(stores.data_dir)
    if stores.kind != "files":
        assert stores.ledger.imports().origins() == []


@pytest.mark.usefixtures("private_tmp")
def test_a_zip64_bundle_is_canonical_too_and_its_zip64_end_records_are_checked(
    source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zip64 forms (sizes and offsets past 2 GiB, more than 65,535 entries) at test scale: with zipfile's limits
    and the checker's lowered to 200 bytes and 3 entries, an export writes zip64 extra fields (local and central)
    and the zip64 end record and locator, and verifies; each bit of those end records flipped is refused."""
    for mod in (zipfile, bundle.layout):
        monkeypatch.setattr(mod, "ZIP64_LIMIT", 200)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 3)
    monkeypatch.setattr(bundle.layout, "COUNT_LIMIT", 3)
    path = export_session(source.data, "alice", tmp_path / "z64.mre.zip", key=source.key).path
    raw = path.read_bytes()
    tail = 56 + 20 + EOCD
    assert raw[-tail:][:4] == b"PK\x06\x06" and raw[-EOCD - 20 :][:4] == b"PK\x06\x07"
    assert raw.count(b"\x01\x00\x10\x00") >= 1 and raw.count(b"PK\x01\x02\x2d") >= 1  # zip64 extras, version 45
    assert verify_file(path, source.trusted).verdict == "verified"
    flipped = tmp_path / "flipped.mre.zip"
    accepted = []
    for i in range(len(raw) - tail, len(raw)):
        for bit in range(8):
            b = bytearray(raw)
            b[i] ^= 1 << bit
            flipped.write_bytes(b)
            try:
                verify_file(flipped, source.trusted)
            except BundleError:
                continue
            accepted.append((i - (len(raw) - tail), bit))
    assert accepted == [], f"zip64 end-record (byte, bit) flips not refused: {accepted}"


@pytest.mark.usefixtures("private_tmp")
def test_a_bundle_exported_deflated_as_before_issue_28_still_verifies(source: Source, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exports stored nothing but deflated (level 1) entries until issue 28, the ledger streamed with a zip64 local
    header: such a bundle is one canonical zip too, and verifies."""
    def deflated_entry(name: str, date_time: tuple[int, int, int, int, int, int]) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info._compresslevel = 1  # type: ignore[attr-defined]
        info.external_attr = 0o600 << 16
        return info

    monkeypatch.setattr(bundle.export, "_entry", deflated_entry)
    path = export_session(source.data, "alice", tmp_path / "old.mre.zip", key=source.key).path
    with zipfile.ZipFile(path) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    assert verify_file(path, source.trusted).verdict == "verified"


class TestEveryImportPath:
    """`python -m bundle import`, the app's Import tab and MCP import_bundle refuse a genuine export with another zip
    in front of it, saying so in one line, and import nothing."""

    def test_the_cli_import_refuses_it_exit_2(self, source: Source, data2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        forged = forged_zip(source, tmp_path)
        path = tmp_path / "both.mre.zip"
        path.write_bytes(forged + source.bundle.read_bytes())
        assert main(["import", str(data2), str(path), "--trust", str(source.pub)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: not in canonical form: {len(forged):,} bytes before the first entry (junk, or another zip, in front of the bundle)", err
        assert nothing_imported(data2)

    def test_the_app_import_tab_and_mcp_refuse_it(self, tmp_path: Path) -> None:
        service = service_at(tmp_path / "data")
        bui = BundleUI(service)
        key = talked(service, "the spare key is under the blue pot")
        genuine = exported(bui, key).read_bytes()
        path = tmp_path / "both.mre.zip"
        path.write_bytes(b"\x00" * 1000 + genuine)
        result, table, *_ = bui.import_bundle(str(path), True, key)
        assert result.startswith("## ⛔ Not imported") and "1,000 bytes before the first entry" in plain(result), result
        assert table["data"] == [] and str(tmp_path) not in result
        tools = {fn.__name__: fn for fn in make_tools(service)}
        with pytest.raises(gr.Error) as refused:  # a refusal is a tool error, as every MCP refusal (issue 31)
            tools["import_bundle"](new_session_key(), base64.b64encode(path.read_bytes()).decode(), True)
        assert "1,000 bytes before the first entry" in str(refused.value.message)
        assert imported_root(service) == []


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_zip_nul_name.py):
# Reviewer finding (issue 28 item 4, "a bundle is exactly one zip … no slack byte can carry a second reading"): a
# member name with a NUL byte and anything after it (here: 'ledger/events.jsonl\0' + 93 bytes of other text, in the
# local header and the central directory alike, offsets fixed) verifies VERIFIED and imports. Python's zipfile cuts a
# name at its first NUL (ZipInfo.filename) and the verifier reads that; bundle.layout compares the whole raw name with
# itself, so the bytes after the NUL are slack no signature covers. A reader that keeps the whole name (Go's
# archive/zip, a streaming reader, `unzip`) sees a member 'ledger/events.jsonl\0hidden…', not the manifest's
# 'ledger/events.jsonl': another reading of the same file, and up to 64 KiB of unsigned bytes per name.
# --------------------------------------------------------------------------------------------------------------------


HIDDEN = b"\x00" + b"hidden: my locker code is 4711 " * 3


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


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_zip_time_slack.py):
# Reviewer finding (issue 28 item 4: "the simplest strict rule … a bundle verifies only if it is byte for byte the
# zip our exporter writes for its members — then no slack byte (times, attributes, …) can carry a second reading"):
# the exporter dates every entry from the signed manifest's exported_at, but bundle.layout only checks that a local
# header's time and date equal its central-directory entry's. Any time and date, the same in both headers, verify:
# four unsigned bytes per member (a covert channel; `unzip` restores them as the files' modification times).
# --------------------------------------------------------------------------------------------------------------------


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
