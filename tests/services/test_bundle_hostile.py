"""Hostile bundles (issue 13, docs/FORMAT.md §21): every one is refused — by its structure (BundleError, before a
byte is written) or by a failed check row — and nothing is imported: the importer's folder holds no new session
and no staging folder, and verification leaves nothing in its temporary folder. Then properties: flipping any
byte of a small exported bundle (each byte in turn, not a sample) is refused; in a deflated bundle, a flip is
refused or re-encodes the same members; a flipped byte of any member's content is never verified."""

from __future__ import annotations

import os
import stat
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bundle.read
from bundle import BundleError, ImportRefused, export_session, import_bundle, verify_file
from bundle.format import LEDGER_NAME, MANIFEST_NAME, key_member
from receipts.keys import SigningKey, format_public_key

from .test_bundle import (
    SESSION,
    Entry,
    Source,
    build_source,
    close,
    manifest_of,
    nothing_imported,
    offline,
    read_members,
    rebuilt,
    resign,
    row,
    write_zip,
)

FAKE_RECEIPT = "receipts/rcpt_" + "0" * 32 + ".json"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("hostile-source"))


@pytest.fixture
def data2(tmp_path: Path) -> Path:
    (tmp_path / "data2" / "sessions").mkdir(parents=True)
    return tmp_path / "data2"


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """verify_file stages under tempfile's folder: point it at a fresh one, and require it empty afterwards."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert os.listdir(folder) == [], "verification left staged files behind"


def entries(source: Source) -> list[tuple[str, bytes]]:
    return list(read_members(source.bundle).items())


def refused(source: Source, data2: Path, path: Path, match: str | None) -> None:
    """Refused for its structure by verify and by import, with `match` in the message; nothing imported."""
    with pytest.raises(BundleError, match=match):
        verify_file(path, source.trusted)
    with pytest.raises(BundleError, match=match) as info:
        import_bundle(data2, path, trusted=source.trusted)
    assert not isinstance(info.value, ImportRefused), "a structural refusal comes before any check"
    assert nothing_imported(data2)


def failed(source: Source, data2: Path, path: Path, rows: list[str]) -> None:
    """Verified to `failed` with each of `rows` failing, and the import refused; nothing imported."""
    report = verify_file(path, source.trusted)
    assert report.verdict == "failed"
    for name in rows:
        assert row(report, name).status == "fail", (name, row(report, name))  # type: ignore[attr-defined]
    with pytest.raises(ImportRefused, match="refused: .* failed") as info:
        import_bundle(data2, path, trusted=source.trusted)
    assert info.value.verdict == "failed"
    assert nothing_imported(data2)


def zinfo(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def central_entries(raw: bytes) -> dict[str, int]:
    """Each central-directory entry's offset in `raw`, by name (a plain zip: no zip64 end record)."""
    eocd = raw.rfind(b"PK\x05\x06")
    count, _size, start = struct.unpack_from("<HII", raw, eocd + 10)
    out = {}
    p = start
    for _ in range(count):
        assert raw[p : p + 4] == b"PK\x01\x02"
        n, e, c = struct.unpack_from("<HHH", raw, p + 28)
        out[raw[p + 46 : p + 46 + n].decode()] = p
        p += 46 + n + e + c
    return out


# --- names ----------------------------------------------------------------------------------------------------------


class TestNames:
    @pytest.mark.parametrize(
        ("name", "why"),
        [
            ("../x", "leaves the bundle"),
            ("receipts/../../etc/cron.d/x", "leaves the bundle"),
            ("/etc/x", "an absolute path"),
            ("C:/Windows/x", "an absolute path"),
            ("receipts\\rcpt_" + "0" * 32 + ".json", "backslash"),
            ("..\\..\\x", "backslash"),
            ("notes.txt", "not a name a bundle holds"),
            ("receipts/", "a directory entry"),
        ],
    )
    def test_a_member_name_outside_the_bundle_is_refused(self, source: Source, data2: Path, tmp_path: Path, name: str, why: str) -> None:
        path = write_zip(tmp_path / "b.mre.zip", [*entries(source), (name, b"x")])
        refused(source, data2, path, why)

    def test_a_member_name_twice_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        es = entries(source)
        cp = next(e for e in es if e[0] == "checkpoint.json")
        refused(source, data2, write_zip(tmp_path / "b.mre.zip", [*es, cp]), "present twice")

    def test_a_zip_without_a_manifest_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        path = write_zip(tmp_path / "b.mre.zip", [e for e in entries(source) if e[0] != MANIFEST_NAME])
        refused(source, data2, path, "no manifest.dsse.json")


# --- file types -----------------------------------------------------------------------------------------------------


class TestTypes:
    @pytest.mark.parametrize(
        ("mode", "why"),
        [
            (stat.S_IFLNK | 0o777, "a symlink"),
            (stat.S_IFCHR | 0o666, "a character device"),
            (stat.S_IFBLK | 0o666, "a block device"),
            (stat.S_IFIFO | 0o666, "a FIFO"),
            (stat.S_IFDIR | 0o755, "a directory"),
        ],
    )
    def test_a_member_that_is_not_a_regular_file_is_refused(self, source: Source, data2: Path, tmp_path: Path, mode: int, why: str) -> None:
        es = [(zinfo(n, mode) if n.startswith("receipts/") else n, b) for n, b in entries(source)]
        refused(source, data2, write_zip(tmp_path / "b.mre.zip", es), why)

    def test_a_symlink_member_pointing_outside_is_refused_even_in_place_of_the_ledger(self, source: Source, data2: Path, tmp_path: Path) -> None:
        es = [(zinfo(n, stat.S_IFLNK | 0o777), b"/etc/passwd") if n == LEDGER_NAME else (n, b) for n, b in entries(source)]
        refused(source, data2, write_zip(tmp_path / "b.mre.zip", es), "a symlink")

    def test_an_encrypted_member_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        raw = bytearray(source.bundle.read_bytes())
        at = central_entries(bytes(raw))["checkpoint.json"]
        raw[at + 8] |= 0x01  # general purpose flag bit 0: encrypted (central directory)
        (local,) = struct.unpack_from("<I", raw, at + 42)
        raw[local + 6] |= 0x01  # and the local header's copy
        path = tmp_path / "b.mre.zip"
        path.write_bytes(raw)
        refused(source, data2, path, "encrypted")

    def test_a_member_compressed_with_another_method_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        es: list[Entry] = []
        for n, b in entries(source):
            if n == "checkpoint.json":
                info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_BZIP2
                es.append((info, b))
            else:
                es.append((n, b))
        refused(source, data2, write_zip(tmp_path / "b.mre.zip", es), "compression method 12")


# --- shared bytes: the zip analogue of a hard link ------------------------------------------------------------------


class TestSharedBytes:
    def test_two_entries_pointing_at_the_same_bytes_are_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        members = read_members(source.bundle)
        members[FAKE_RECEIPT] = members["checkpoint.json"]  # same size, so only the offset needs changing
        raw = bytearray(rebuilt(tmp_path / "b.mre.zip", members).read_bytes())
        cd = central_entries(bytes(raw))
        target = struct.unpack_from("<I", raw, cd["checkpoint.json"] + 42)[0]
        struct.pack_into("<I", raw, cd[FAKE_RECEIPT] + 42, target)  # the fake receipt's entry now names the checkpoint's header
        path = tmp_path / "linked.mre.zip"
        path.write_bytes(raw)
        with zipfile.ZipFile(path) as z:  # it is a hard link as zip readers see it: both names at one local header
            offsets = {i.filename: i.header_offset for i in z.infolist()}
        assert offsets[FAKE_RECEIPT] == offsets["checkpoint.json"]
        refused(source, data2, path, "overlap")

    def test_an_entry_whose_header_lies_inside_another_entrys_data_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        raw = bytearray(source.bundle.read_bytes())
        cd = central_entries(bytes(raw))
        ledger_at = struct.unpack_from("<I", raw, cd[LEDGER_NAME] + 42)[0]
        struct.pack_into("<I", raw, cd["checkpoint.json"] + 42, ledger_at + 40)
        path = tmp_path / "b.mre.zip"
        path.write_bytes(raw)
        refused(source, data2, path, "overlap")


    def test_an_entry_whose_header_lies_in_the_last_bytes_of_another_entry_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        """The span of an entry counts its local header's name and extra field (the ledger's carries a zip64 extra
        the central directory does not): a header placed in the last bytes of the ledger's data still overlaps."""
        raw = bytearray(source.bundle.read_bytes())
        cd = central_entries(bytes(raw))
        with zipfile.ZipFile(source.bundle) as z:
            ledger = z.getinfo(LEDGER_NAME)
        name_len, extra_len = struct.unpack_from("<HH", raw, ledger.header_offset + 26)
        assert extra_len > 0, "export writes the ledger with a zip64 extra field in its local header"
        end = ledger.header_offset + 30 + name_len + extra_len + ledger.compress_size
        struct.pack_into("<I", raw, cd["checkpoint.json"] + 42, end - 8)
        path = tmp_path / "b.mre.zip"
        path.write_bytes(raw)
        refused(source, data2, path, "overlap")


# --- sizes: bombs, caps, more bytes than declared -------------------------------------------------------------------


class TestSizes:
    def test_a_member_expanding_past_100_to_1_is_refused_as_a_bomb_before_a_byte_is_inflated(self, source: Source, data2: Path, tmp_path: Path) -> None:
        zeros = bytes(50 * 1024 * 1024)  # deflates to ~50 KB: a ratio near 1,000
        es = [(n, zeros if n == LEDGER_NAME else b) for n, b in entries(source)]
        path = write_zip(tmp_path / "bomb.mre.zip", es)
        with zipfile.ZipFile(path) as z:
            info = z.getinfo(LEDGER_NAME)
            assert info.file_size > 100 * info.compress_size
        refused(source, data2, path, "a zip bomb")

    def test_a_small_member_declaring_more_than_its_cap_is_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        es = [(n, bytes(7 * 1024 * 1024) if n == "checkpoint.json" else b) for n, b in entries(source)]
        refused(source, data2, write_zip(tmp_path / "b.mre.zip", es), "more than the cap")

    def test_members_declaring_more_than_the_total_cap_are_refused(self, source: Source, data2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(bundle.read, "MAX_TOTAL_BYTES", 10_000)  # the bundle's members hold ~40 KB
        refused(source, data2, source.bundle, "more than 10,000 bytes in all")

    def test_more_members_than_the_cap_are_refused(self, source: Source, data2: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(bundle.read, "MAX_MEMBERS", 2)
        refused(source, data2, source.bundle, "more than the 3")

    def test_a_member_larger_than_the_manifest_declares_fails_the_hashes_row(self, source: Source, data2: Path, tmp_path: Path) -> None:
        members = read_members(source.bundle)
        name = sorted(n for n in members if n.startswith("receipts/"))[0]
        members[name] += b" " * 100  # the signed manifest kept: it declares the old size
        failed(source, data2, rebuilt(tmp_path / "b.mre.zip", members), ["members.hashes"])

    def test_a_member_with_other_bytes_of_the_same_size_fails_the_hashes_row(self, source: Source, data2: Path, tmp_path: Path) -> None:
        members = read_members(source.bundle)
        members[LEDGER_NAME] = members[LEDGER_NAME].replace(b"Lisbon", b"Madrid")
        report = verify_file(rebuilt(tmp_path / "b.mre.zip", members), source.trusted)
        assert "ledger/events.jsonl: sha256" in str(row(report, "members.hashes").found)  # type: ignore[attr-defined]
        failed(source, data2, tmp_path / "b.mre.zip", ["members.hashes"])

    def test_an_entry_that_understates_its_size_is_read_only_that_far_and_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        """A lying entry (20 MB of deflated data declaring the ledger's real size in its local header and its
        central-directory entry alike, under the untouched signed manifest): it is inflated only a little past the
        declared size, and refused there."""
        members = read_members(source.bundle)
        size = len(members[LEDGER_NAME])
        members[LEDGER_NAME] += bytes(20 * 1024 * 1024)
        raw = bytearray(rebuilt(tmp_path / "b.mre.zip", members).read_bytes())  # the original manifest, kept
        at = central_entries(bytes(raw))[LEDGER_NAME]
        struct.pack_into("<I", raw, at + 24, size)  # the central directory's uncompressed size
        local = struct.unpack_from("<I", raw, at + 42)[0]
        struct.pack_into("<I", raw, local + 22, size)  # and the local header's
        path = tmp_path / "lying.mre.zip"
        path.write_bytes(raw)
        refused(source, data2, path, "ledger/events.jsonl.*inflates past its size of")


    def test_corrupt_deflate_data_is_refused_not_a_crash(self, source: Source, data2: Path, tmp_path: Path) -> None:
        deflated = rebuilt(tmp_path / "deflated.mre.zip", read_members(source.bundle))  # an export stores its members
        raw = bytearray(deflated.read_bytes())
        with zipfile.ZipFile(deflated) as z:
            info = z.getinfo(LEDGER_NAME)
        data_at = info.header_offset + 30 + len(info.filename.encode()) + struct.unpack_from("<H", raw, info.header_offset + 28)[0]
        raw[data_at] = 0x07  # BFINAL 1, BTYPE 11: a reserved block type (zlib.error, not zipfile's own BadZipFile)
        path = tmp_path / "b.mre.zip"
        path.write_bytes(raw)
        refused(source, data2, path, "ledger/events.jsonl.*unreadable.*invalid block type")


# --- truncation -----------------------------------------------------------------------------------------------------


class TestTruncation:
    @pytest.mark.parametrize("keep", [0, 1, 4, 30, 100, 0.25, 0.5, 0.9, -22, -23, -1])
    def test_a_truncated_bundle_is_refused(self, source: Source, data2: Path, tmp_path: Path, keep: float) -> None:
        raw = source.bundle.read_bytes()
        n = int(len(raw) * keep) if isinstance(keep, float) else keep % len(raw) if keep < 0 else keep
        path = tmp_path / "cut.mre.zip"
        path.write_bytes(raw[:n])
        refused(source, data2, path, None)

    def test_a_missing_file_and_a_folder_are_refused(self, source: Source, data2: Path, tmp_path: Path) -> None:
        refused(source, data2, tmp_path / "absent.mre.zip", "no such file")
        (tmp_path / "dir.mre.zip").mkdir()
        refused(source, data2, tmp_path / "dir.mre.zip", "not a regular file")


# --- members the manifest does not sign, keys it does not trust, a ledger its receipts do not cite ------------------


class TestSignedContent:
    def test_an_extra_member_not_in_the_manifest_fails_the_members_row(self, source: Source, data2: Path, tmp_path: Path) -> None:
        members = read_members(source.bundle)
        members[FAKE_RECEIPT] = members[sorted(n for n in members if n.startswith("receipts/"))[0]]
        path = rebuilt(tmp_path / "b.mre.zip", members)
        failed(source, data2, path, ["manifest.members"])
        assert FAKE_RECEIPT in str(row(verify_file(path, source.trusted), "manifest.members").found)  # type: ignore[attr-defined]

    def test_a_member_the_manifest_lists_but_the_zip_lacks_fails_the_members_row(self, source: Source, data2: Path, tmp_path: Path) -> None:
        members = read_members(source.bundle)
        del members[sorted(n for n in members if n.startswith("receipts/"))[0]]
        failed(source, data2, rebuilt(tmp_path / "b.mre.zip", members), ["manifest.members"])

    def test_a_manifest_signed_by_a_key_the_importer_does_not_trust_is_unverified_and_refused_without_the_flag(
        self, source: Source, data2: Path
    ) -> None:
        other = SigningKey.generate().public_key
        report = verify_file(source.bundle, [other])
        sig = row(report, "manifest.signature")
        assert report.verdict == "unverified" and sig.status == "not_verifiable", sig  # type: ignore[attr-defined]
        assert other.key_id in sig.message and "not verified" in sig.message  # type: ignore[attr-defined]
        assert not report.failed
        with pytest.raises(ImportRefused, match="refused: not verified") as info:
            import_bundle(data2, source.bundle, trusted=[other])
        assert info.value.verdict == "unverified"
        assert nothing_imported(data2)

    def test_a_bundle_from_an_untrusted_key_imports_with_the_flag_even_when_other_keys_are_trusted(self, source: Source, data2: Path) -> None:
        """`--trust X --allow-untrusted`: a bundle X did not sign is imported, labelled unverified."""
        other = SigningKey.generate().public_key
        done = import_bundle(data2, source.bundle, trusted=[other], allow_untrusted=True)
        assert done.origin.verdict == "unverified" and not done.duplicate and done.indexed > 0

    def test_a_bundle_re_signed_whole_by_another_key_is_never_verified_under_the_real_key(self, source: Source, data2: Path, tmp_path: Path) -> None:
        """An attacker edits a memory, re-signs the manifest with their key and ships their key in the bundle: under
        the real key it is at best unverified (the attacker's key is not trusted) and the import refuses it; its
        receipts, signed by the real key over the real ledger, fail against the edited one."""
        attacker = SigningKey.generate()
        members = read_members(source.bundle)
        members = {n: b for n, b in members.items() if not n.startswith("keys/")}
        members[LEDGER_NAME] = members[LEDGER_NAME].replace(b"Lisbon", b"Madrid")
        members[key_member(attacker.public_key.key_id)] = format_public_key(attacker.public_key).encode()
        signed = resign(members, attacker, signer=attacker.public_key.key_id)
        path = rebuilt(tmp_path / "b.mre.zip", signed)
        report = verify_file(path, source.trusted)
        assert report.verdict != "verified" and row(report, "manifest.signature").status != "pass"  # type: ignore[attr-defined]
        assert report.failed, "the edited ledger must fail some row, not merely go unverified"
        with pytest.raises(ImportRefused):
            import_bundle(data2, path, trusted=source.trusted)
        assert nothing_imported(data2)

    def test_a_ledger_its_receipts_do_not_match_fails_only_the_receipt_rows(self, source: Source, data2: Path, tmp_path: Path) -> None:
        """Another conversation under the same session id, signed by the same key: the swapped ledger and its own
        checkpoint pass every ledger and checkpoint row; only the receipts (and the certificate) can catch it."""
        other = tmp_path / "other"
        eng = offline(other / "data", key=source.key)
        eng.remember(SESSION, "I grow tomatoes on my balcony")
        eng.remember(SESSION, "My brother lives in Oslo")
        eng.turn(SESSION, "What do I grow?")
        close(eng)
        theirs = read_members(export_session(other / "data", SESSION, other / "o.mre.zip", key=source.key).path)
        members = read_members(source.bundle)
        members[LEDGER_NAME], members["checkpoint.json"] = theirs[LEDGER_NAME], theirs["checkpoint.json"]
        m = manifest_of(theirs)
        signed = resign(members, source.key, events=m["events"], chain_head=m["chain_head"])
        path = rebuilt(tmp_path / "swapped.mre.zip", signed)
        report = verify_file(path, source.trusted)
        by_status = {c.name: c.status for c in report.checks}
        receipt_rows = [n for n in by_status if n.startswith(("receipt ", "certificate "))]
        assert receipt_rows and all(by_status[n] == "fail" for n in receipt_rows), by_status
        assert all(s == "pass" for n, s in by_status.items() if n not in receipt_rows), by_status
        failed(source, data2, path, receipt_rows)


# --- single-byte flips ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flip_base(source: Source, tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, bytes], Path]:
    raw = source.bundle.read_bytes()
    return raw, read_members(source.bundle), tmp_path_factory.mktemp("flips") / "flipped.mre.zip"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SigningKey]:
    """A small exported bundle holding a member of every kind but a certificate: one memory, one offline turn (a
    receipt), the checkpoint, the key and the manifest."""
    root = tmp_path_factory.mktemp("small")
    eng = offline(root / "data")
    eng.remember(SESSION, "I adopted a grey cat named Miso")
    eng.turn(SESSION, "What is my cat called?")
    key = eng.key
    close(eng)
    return export_session(root / "data", SESSION, root / "small.mre.zip", key=key).path, key


def _data_ranges(path: Path) -> list[tuple[int, int, str, int]]:
    """(start, end, name, method) of each member's data in the file."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        out = []
        for i in z.infolist():
            start = i.header_offset + 30 + sum(struct.unpack_from("<HH", raw, i.header_offset + 26))
            out.append((start, start + i.compress_size, i.filename, i.compress_type))
    return out


def test_flipping_any_byte_of_a_small_bundle_is_refused(small: tuple[Path, SigningKey], tmp_path: Path) -> None:
    """Every byte of a small exported bundle (every header, every member's data, the central directory, the end
    record), not a sample, flipped in turn — byte i by its bit i % 8, so each bit position is flipped somewhere
    in every part — is refused as a bundle (BundleError, before any staging folder), never verified nor even
    checked: an export is one canonical zip (bundle.layout) whose members are stored, their CRC-32 covering every
    bit. So no byte is slack a second reader could use. The end record's 22 bytes are flipped in all 8 bits in
    tests/services/test_bundle_canonical.py."""
    bundle, key = small
    raw = bundle.read_bytes()
    assert verify_file(bundle, [key.public_key]).verdict == "verified"
    assert {m for *_, m in _data_ranges(bundle)} == {zipfile.ZIP_STORED}
    path = tmp_path / "flipped.mre.zip"
    accepted = []
    with open(path, "wb") as f:
        f.write(raw)
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(len(raw)):
            os.pwrite(fd, bytes([raw[i] ^ (1 << (i % 8))]), i)
            try:
                verify_file(path, [key.public_key])
            except BundleError:
                pass
            else:
                accepted.append(i)
            os.pwrite(fd, raw[i : i + 1], i)
    finally:
        os.close(fd)
    assert accepted == [], f"{len(accepted)} of {len(raw):,} flipped bytes not refused, first at {accepted[:10]}"


def test_flipping_any_bit_of_a_bundle_of_one_memory_is_refused(tmp_path: Path) -> None:
    """Every one of the 8 bits of every byte of a bundle of one remembered memory (the ledger, the checkpoint, the
    key, the manifest: about 2.5 KB, 20,000 flips), flipped in turn, is refused as a bundle."""
    eng = offline(tmp_path / "data")
    eng.remember(SESSION, "I adopted a grey cat named Miso")
    key = eng.key
    close(eng)
    bundle = export_session(tmp_path / "data", SESSION, tmp_path / "one.mre.zip", key=key).path
    raw = bundle.read_bytes()
    assert verify_file(bundle, [key.public_key]).verdict == "verified"
    accepted = []
    fd = os.open(bundle, os.O_WRONLY)
    try:
        for i in range(len(raw)):
            for bit in range(8):
                os.pwrite(fd, bytes([raw[i] ^ (1 << bit)]), i)
                try:
                    verify_file(bundle, [key.public_key])
                except BundleError:
                    continue
                accepted.append((i, bit))
            os.pwrite(fd, raw[i : i + 1], i)
    finally:
        os.close(fd)
    assert accepted == [], f"{len(accepted)} of {8 * len(raw):,} single-bit flips not refused, first (byte, bit) {accepted[:10]}"


def test_flipping_any_byte_of_a_deflated_bundle_is_refused_or_reads_the_same_members(
    small: tuple[Path, SigningKey], tmp_path: Path
) -> None:
    """A bundle whose members are deflated (as exports before issue 28 were; here deflated at zlib's default level)
    still verifies, and every byte of it flipped in turn (bit i % 8) is refused — except, inside a member's deflate
    data, a flip that re-encodes the same bytes (a back-reference to another copy of the same text): every inflater
    reads those identically, so it is no second reading, but the zip format cannot pin it. Those are the only flips
    not refused, and each still verifies to exactly the signed members."""
    bundle, key = small
    members = read_members(bundle)
    deflated = rebuilt(tmp_path / "deflated.mre.zip", members)
    raw = deflated.read_bytes()
    assert verify_file(deflated, [key.public_key]).verdict == "verified"
    ranges = _data_ranges(deflated)
    assert {m for *_, m in ranges} == {zipfile.ZIP_DEFLATED}
    path = tmp_path / "flipped.mre.zip"
    path.write_bytes(raw)
    fd = os.open(path, os.O_WRONLY)
    accepted = []
    try:
        for i in range(len(raw)):
            os.pwrite(fd, bytes([raw[i] ^ (1 << (i % 8))]), i)
            try:
                verify_file(path, [key.public_key])
            except BundleError:
                pass
            else:
                accepted.append(i)
                assert any(start <= i < end for start, end, *_ in ranges), f"byte {i}: outside member data, not refused"
                assert read_members(path) == members, f"byte {i}: verified with other member bytes"
            os.pwrite(fd, raw[i : i + 1], i)
    finally:
        os.close(fd)
    assert len(accepted) < len(raw) // 100, f"{len(accepted)} flips not refused"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None)
@given(data=st.data())
def test_a_flipped_byte_of_any_member_or_the_manifest_is_never_verified(
    source: Source, flip_base: tuple[bytes, dict[str, bytes], Path], data: st.DataObject
) -> None:
    """The bytes that matter: one byte of one member's content (or of the signed manifest), changed and the zip
    written again around it, is never verified."""
    _raw, members, path = flip_base
    name = data.draw(st.sampled_from(sorted(members)), label="member")
    i = data.draw(st.integers(0, len(members[name]) - 1), label="offset")
    bit = data.draw(st.integers(0, 7), label="bit")
    changed = dict(members)
    b = bytearray(changed[name])
    b[i] ^= 1 << bit
    changed[name] = bytes(b)
    rebuilt(path, changed)
    try:
        verdict = verify_file(path, source.trusted).verdict
    except BundleError:
        return
    assert verdict != "verified", f"{name} byte {i} bit {bit}"
