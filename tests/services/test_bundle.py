"""Session bundles (issue 13, docs/FORMAT.md §21): a session exported as one signed zip proves itself, is imported
into another data directory under a new local id where its receipts and certificate still verify and its memories
are found again, is imported once, and is refused without a trusted key unless asked; the CLI's exit status says
which. Also the readable Markdown export: forgotten, superseded and revoked events are marked, and no message can
turn into Markdown structure.

The helpers here (a built source session, rewriting a bundle's members, re-signing its manifest) are shared with
tests/services/test_bundle_hostile.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from bundle import BundleError, ImportRefused, export_session, import_bundle, imported_dir, render_markdown, verify_file
from bundle.format import MANIFEST_NAME, MANIFEST_PAYLOAD_TYPE, Member, build_manifest, parse_manifest, zip_date_time
from chat.engine import Engine
from chat.llm import LLM
from cli.prog_bundle import main
from control.forget import forget
from control.revocation import revoke
from ledger.canonical import canonical_json
from receipts.dsse import parse_envelope, sign_envelope
from receipts.keys import PublicKey, SigningKey
from storage.common.keyfiles import keys_dir
from storage.files.receipts.api import load_trust, verify_bytes
from storage.files.receipts.certificate_io import verify_certificate_bytes
from storage.files.retrieval.db import Index

SESSION = "alice"
MEMORIES = (
    "I adopted a grey cat named Miso",
    "My locker code word is Vorquzqxvjian",  # forgotten below
    "I moved to Lisbon in March",
    "My sister Ines plays the cello in Porto",
)
QUESTIONS = ("Where did I move in March?", "What is the name of my cat?", "What is my locker code word?")
QUERIES = ("grey cat Miso", "Lisbon March", "sister cello Porto", "locker code word")


def offline(data: Path, key: SigningKey | None = None) -> Engine:
    return Engine(data, llm=LLM(api_key=""), key=key)


def close(eng: Engine) -> None:
    eng.index.close()
    eng.ledger.close()


def empty_data_dir(path: Path) -> Path:
    """A data directory as the app leaves it before its first session: `sessions/` and nothing else."""
    (path / "sessions").mkdir(parents=True)
    return path


def search_seqs(data: Path, session: str = SESSION) -> dict[str, list[int]]:
    idx = Index(data)
    try:
        return {q: [h.seq for h in idx.search(session, q, k=5).results] for q in QUERIES}
    finally:
        idx.close()


def listing(root: Path) -> list[tuple[str, int]]:
    """Every path under `root` with its size (0 for a folder): what "changes nothing" compares."""
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else 0) for p in root.rglob("*"))


@dataclass(frozen=True)
class Source:
    data: Path
    key: SigningKey
    pub: Path  # the signing key's public half as a --trust file
    bundle: Path
    receipts: list[Path]
    certificates: list[Path]
    searches: dict[str, list[int]]

    @property
    def trusted(self) -> list[PublicKey]:
        return [self.key.public_key]


def build_source(root: Path) -> Source:
    """A session with memories, offline turns with receipts, and one memory forgotten (a certificate), exported."""
    data = root / "data"
    eng = offline(data)
    mems = [eng.remember(SESSION, text) for text in MEMORIES]
    for q in QUESTIONS:
        eng.turn(SESSION, q)
    key = eng.key
    close(eng)
    forget(data, SESSION, [mems[1].seq], key=key)
    receipts = sorted((data / "sessions" / SESSION / "receipts").glob("rcpt_*.json"))
    certificates = sorted((data / "erasures").glob(f"erasure-{SESSION}-*.json"))
    assert receipts and len(certificates) == 1, "the source must carry receipts and a certificate"
    bundle = root / "alice.mre.zip"
    export_session(data, SESSION, bundle, key=key)
    return Source(data, key, keys_dir(data) / "signing.pub", bundle, receipts, certificates, search_seqs(data))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("bundle-source"))


@pytest.fixture
def data2(tmp_path: Path) -> Path:
    return empty_data_dir(tmp_path / "data2")


# --- rewriting a bundle (shared with the hostile tests) -------------------------------------------------------------


def read_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


Entry = tuple[str | zipfile.ZipInfo, bytes]


def write_zip(path: Path, entries: Sequence[Entry]) -> Path:
    """A zip of `entries` in order (a name or a prepared ZipInfo; duplicates written as given). An entry given by
    name is deflated, mode 0600, and dated as the exporter dates it: from the exported_at of the manifest among
    `entries` (bundle.read refuses any other date), or now when there is none that parses."""
    when: tuple[int, int, int, int, int, int] | None = None
    for name, data in entries:
        if name == MANIFEST_NAME:
            try:
                when = zip_date_time(str(manifest_of({MANIFEST_NAME: data})["exported_at"]))
            except Exception:  # noqa: BLE001 - a manifest a test broke on purpose: dated now, as zipfile would
                when = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns on a duplicate name: that is the point of some tests
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in entries:
                if isinstance(name, str) and when is not None:
                    info = zipfile.ZipInfo(name, date_time=when)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o600 << 16
                    z.writestr(info, data)
                else:
                    z.writestr(name, data)
    return path


def manifest_of(members: dict[str, bytes]) -> dict[str, object]:
    return json.loads(parse_envelope(json.loads(members[MANIFEST_NAME])).payload)  # type: ignore[no-any-return]


def resign(members: dict[str, bytes], key: SigningKey, **fields: object) -> dict[str, bytes]:
    """`members` with a manifest listing their current bytes, `fields` changed, signed again by `key`."""
    old = manifest_of(members)
    doc = {**old, **fields}
    listed = [Member(n, len(b), hashlib.sha256(b).hexdigest()) for n, b in members.items() if n != MANIFEST_NAME]
    payload = build_manifest(
        session=str(doc["session"]), exported_at=str(doc["exported_at"]), events=int(doc["events"]),  # type: ignore[call-overload]
        chain_head=str(doc["chain_head"]), signer=str(doc["signer"]), members=listed,
    )
    parse_manifest(payload)  # still a well-formed manifest: only the checks after it can refuse the bundle
    out = {n: b for n, b in members.items() if n != MANIFEST_NAME}
    out[MANIFEST_NAME] = canonical_json(sign_envelope(payload, MANIFEST_PAYLOAD_TYPE, key))
    return out


def rebuilt(path: Path, members: dict[str, bytes]) -> Path:
    """The members written again as a bundle at `path` (the manifest last, as export writes it)."""
    order = sorted(n for n in members if n != MANIFEST_NAME) + [MANIFEST_NAME]
    return write_zip(path, [(n, members[n]) for n in order])


def nothing_imported(data2: Path) -> bool:
    root = data2 / "imported"
    return not root.exists() or os.listdir(root) == []


def row(report: object, name: str) -> object:
    return next(c for c in report.checks if c.name == name)  # type: ignore[attr-defined]


# --- round trip -----------------------------------------------------------------------------------------------------


class TestRoundTrip:
    def test_the_exported_bundle_verifies_with_the_signing_key_and_every_row_passes(self, source: Source) -> None:
        report = verify_file(source.bundle, load_trust([source.pub]))
        assert report.verdict == "verified", [c.to_dict() for c in report.checks if c.status != "pass"]
        names = {c.name for c in report.checks}
        assert {f"receipt {p.stem}" for p in source.receipts} <= names
        assert {f"certificate {p.name}" for p in source.certificates} <= names

    def test_every_receipt_and_the_certificate_verify_against_the_imported_folder(self, source: Source, data2: Path) -> None:
        done = import_bundle(data2, source.bundle, trusted=load_trust([source.pub]))
        folder = imported_dir(data2, done.local)
        assert not done.duplicate and done.origin.verdict == "verified" and done.origin.session == SESSION
        for p in source.receipts:
            report = verify_bytes(p.read_bytes(), trusted=source.trusted, data_dir=folder)
            assert report.verdict == "verified", (p.name, [c.to_dict() for c in report.checks if c.status != "pass"])
        for p in source.certificates:
            cert = verify_certificate_bytes(p.read_bytes(), trusted=source.trusted, data_dir=folder)
            assert cert.verdict == "verified", (p.name, [c.to_dict() for c in cert.checks if c.status != "pass"])

    def test_the_imported_ledger_is_the_source_ledger_byte_for_byte(self, source: Source, data2: Path) -> None:
        done = import_bundle(data2, source.bundle, trusted=source.trusted)
        imported = imported_dir(data2, done.local) / "sessions" / SESSION / "events.jsonl"
        assert imported.read_bytes() == (source.data / "sessions" / SESSION / "events.jsonl").read_bytes()

    def test_a_search_after_import_finds_the_same_memories_as_on_the_source(self, source: Source, data2: Path) -> None:
        done = import_bundle(data2, source.bundle, trusted=source.trusted)
        assert any(source.searches.values()), "the source searches must find something"
        assert search_seqs(imported_dir(data2, done.local)) == source.searches

    def test_importing_the_same_bundle_twice_is_a_duplicate_and_changes_nothing(self, source: Source, data2: Path) -> None:
        first = import_bundle(data2, source.bundle, trusted=source.trusted)
        before = listing(data2)
        again = import_bundle(data2, source.bundle, trusted=source.trusted)
        assert again.duplicate and again.local == first.local and again.indexed == 0
        assert listing(data2) == before

    def test_importing_as_an_existing_session_id_is_refused(self, source: Source, tmp_path: Path) -> None:
        data2 = tmp_path / "data2"
        eng = offline(data2)
        eng.remember("bob", "I keep bees")
        close(eng)
        with pytest.raises(BundleError, match="--as bob: a session of that id already exists"):
            import_bundle(data2, source.bundle, as_session="bob", trusted=source.trusted)
        assert nothing_imported(data2)
        done = import_bundle(data2, source.bundle, as_session="mine", trusted=source.trusted)
        assert done.local == "mine" and (data2 / "imported" / "mine" / "origin.json").is_file()

    def test_without_a_trusted_key_the_import_is_refused_and_nothing_is_imported(self, source: Source, data2: Path) -> None:
        with pytest.raises(ImportRefused, match="not verified") as info:
            import_bundle(data2, source.bundle)
        assert info.value.verdict == "unverified"
        assert nothing_imported(data2)

    def test_allow_untrusted_imports_it_and_origin_says_unverified(self, source: Source, data2: Path) -> None:
        done = import_bundle(data2, source.bundle, allow_untrusted=True)
        origin = json.loads((imported_dir(data2, done.local) / "origin.json").read_text())
        assert origin["verdict"] == done.origin.verdict == "unverified"
        assert origin["session"] == SESSION and origin["signer"] == source.key.public_key.key_id

    def test_a_folder_with_other_files_and_no_data_is_refused_and_left_alone(self, source: Source, tmp_path: Path) -> None:
        (tmp_path / "notdata").mkdir()
        (tmp_path / "notdata" / "holiday.jpg").write_bytes(b"x")
        with pytest.raises(BundleError, match="not a data directory"):
            import_bundle(tmp_path / "notdata", source.bundle, trusted=source.trusted)
        assert sorted(p.name for p in (tmp_path / "notdata").iterdir()) == ["holiday.jpg"]

    def test_a_new_or_empty_folder_or_one_with_only_a_key_takes_the_import(self, source: Source, tmp_path: Path) -> None:
        """A fresh machine: the data directory does not exist yet, is empty, or holds only the app's keys."""
        (tmp_path / "empty").mkdir()
        (tmp_path / "keyed" / "keys").mkdir(parents=True)
        events = len((source.data / "sessions" / SESSION / "events.jsonl").read_bytes().splitlines())
        for folder in (tmp_path / "new" / "data", tmp_path / "empty", tmp_path / "keyed"):
            done = import_bundle(folder, source.bundle, trusted=source.trusted)
            assert done.origin.verdict == "verified" and not done.duplicate
            assert done.indexed == events and (imported_dir(folder, done.local) / "origin.json").is_file()

    def test_a_file_given_as_the_data_directory_is_refused(self, source: Source, tmp_path: Path) -> None:
        (tmp_path / "f").write_text("x")
        with pytest.raises(BundleError, match="not a folder"):
            import_bundle(tmp_path / "f", source.bundle, trusted=source.trusted)


# --- the command line's exit status ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tampered(source: Source, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source bundle with one receipt's bytes changed under the signed manifest: members.hashes fails."""
    members = read_members(source.bundle)
    name = next(n for n in members if n.startswith("receipts/"))
    members[name] = members[name].replace(b'"', b"'", 1)
    return rebuilt(tmp_path_factory.mktemp("tampered") / "t.mre.zip", members)


class TestExitStatus:
    def test_verify_exits_0_when_verified(self, source: Source, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["verify", str(source.bundle), "--trust", str(source.pub)]) == 0
        assert "VERIFIED" in capsys.readouterr().out

    def test_verify_exits_1_when_a_check_failed(self, source: Source, tampered: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["verify", str(tampered), "--trust", str(source.pub)]) == 1
        assert "FAIL  members.hashes" in capsys.readouterr().out

    def test_verify_exits_2_for_a_refused_structure_or_a_missing_file(self, source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        cut = tmp_path / "cut.mre.zip"
        cut.write_bytes(source.bundle.read_bytes()[:-30])
        assert main(["verify", str(cut), "--trust", str(source.pub)]) == 2
        assert main(["verify", str(tmp_path / "absent.mre.zip")]) == 2
        assert "refused" in capsys.readouterr().err

    def test_verify_exits_3_without_a_trusted_key(self, source: Source, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["verify", str(source.bundle)]) == 3
        assert "UNVERIFIED" in capsys.readouterr().out

    def test_import_exits_as_verify_does_for_the_same_bundle(self, source: Source, tampered: Path, data2: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["import", str(data2), str(tampered), "--trust", str(source.pub)]) == 1
        assert main(["import", str(data2), str(source.bundle)]) == 3
        assert main(["import", str(data2), str(data2 / "absent.mre.zip")]) == 2
        assert nothing_imported(data2)
        assert main(["import", str(data2), str(source.bundle), "--trust", str(source.pub)]) == 0
        assert "imported session alice as" in capsys.readouterr().out
        assert main(["import", str(data2), str(source.bundle), "--trust", str(source.pub)]) == 0
        assert "already imported" in capsys.readouterr().out

    def test_import_with_allow_untrusted_exits_0_and_says_unverified(self, source: Source, data2: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["import", str(data2), str(source.bundle), "--allow-untrusted"]) == 0
        assert "UNVERIFIED" in capsys.readouterr().out


class TestExportExitStatus:
    def test_export_and_markdown_exit_0_and_write_their_file(self, source: Source, tmp_path: Path) -> None:
        assert main(["export", str(source.data), SESSION, str(tmp_path / "b.mre.zip")]) == 0
        assert main(["verify", str(tmp_path / "b.mre.zip"), "--trust", str(source.pub)]) == 0
        assert main(["markdown", str(source.data), SESSION, str(tmp_path / "s.md")]) == 0
        assert (tmp_path / "s.md").read_text().startswith(f"# Session {SESSION}")

    @pytest.mark.parametrize("session", ["../x", "a/b", "", "nobody"])
    def test_a_bad_or_unknown_session_id_is_bad_input_exit_2_with_nothing_written(
        self, source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str], session: str
    ) -> None:
        assert main(["export", str(source.data), session, str(tmp_path / "b.mre.zip")]) == 2
        assert main(["markdown", str(source.data), session, str(tmp_path / "s.md")]) == 2
        assert "unexpected" not in capsys.readouterr().err
        assert os.listdir(tmp_path) == []


# --- the readable Markdown export -----------------------------------------------------------------------------------

HOSTILE = ("# heading", "![x](http://evil/img)", "<script>alert(1)</script>", "Hello\n===", "[a]: http://evil/x", "&lt;b&gt;")


@pytest.fixture(scope="module")
def markdown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, int]]]:
    data = tmp_path_factory.mktemp("markdown") / "data"
    eng = offline(data)
    seq = {}
    seq["leeds"] = eng.remember(SESSION, "I live in Leeds").seq  # superseded by the statement below (issue 12's rule)
    seq["dog"] = eng.remember(SESSION, "My dog is called Rex").seq  # revoked below
    seq["bristol"] = eng.remember(SESSION, "We've just moved to Bristol").seq
    seq["secret"] = eng.remember(SESSION, "My bank PIN is 4921").seq  # forgotten below
    for i, text in enumerate(HOSTILE):
        seq[f"hostile{i}"] = eng.remember(SESSION, text).seq
    eng.turn(SESSION, "Where do I live now?")
    key = eng.key
    close(eng)
    revoke(data, SESSION, seq["dog"], key=key)
    forget(data, SESSION, [seq["secret"]], key=key)
    text, n = render_markdown(data, SESSION)
    assert n > len(seq)
    yield text, seq
    shutil.rmtree(data, ignore_errors=True)


def _event(text: str, seq: int, lines: int = 1) -> tuple[str, str]:
    """(the header line of event `seq`, its body: the `lines` lines after the blank line under it)."""
    all_lines = text.split("\n")
    i = next(i for i, line in enumerate(all_lines) if line.endswith(f"· seq {seq}") or f"· seq {seq} (" in line)
    return all_lines[i], "\n".join(all_lines[i + 2 : i + 2 + lines])


class TestMarkdown:
    def test_a_forgotten_memory_shows_forgotten_and_not_its_text(self, markdown: tuple[str, dict[str, int]]) -> None:
        text, seq = markdown
        assert _event(text, seq["secret"])[1] == "[forgotten]"
        # the number as a word of its own: digests (hex) and timestamps (microseconds) may hold the digits by chance
        assert re.search(r"(?<![0-9a-f])4921(?![0-9a-f])", text) is None and "PIN" not in text

    def test_a_superseded_memory_is_marked_superseded_by_its_new_seq(self, markdown: tuple[str, dict[str, int]]) -> None:
        text, seq = markdown
        assert _event(text, seq["leeds"])[0].endswith(f"(superseded by seq {seq['bristol']})")

    def test_a_revoked_memory_is_marked_revoked(self, markdown: tuple[str, dict[str, int]]) -> None:
        text, seq = markdown
        assert _event(text, seq["dog"])[0].endswith("(revoked)")

    @pytest.mark.parametrize("i", range(len(HOSTILE)))
    def test_hostile_text_renders_as_the_same_text_never_as_markdown_structure(self, markdown: tuple[str, dict[str, int]], i: int) -> None:
        text, seq = markdown
        body = _event(text, seq[f"hostile{i}"], HOSTILE[i].count("\n") + 1)[1]
        html = MarkdownIt("commonmark").render(body)
        assert html.startswith("<p>") and html.count("<p>") == 1, html  # one paragraph: no heading, no block of its own
        for tag in ("<h1", "<h2", "<img", "<script", "<a ", "<b>"):
            assert tag not in html, (HOSTILE[i], html)
        shown = MarkdownIt("commonmark").parseInline(body)[0].children
        assert shown is not None
        said = "".join(t.content if t.type == "text" else "\n" for t in shown if t.type in ("text", "hardbreak", "softbreak"))
        assert said == HOSTILE[i]

    def test_the_whole_export_renders_no_image_link_or_script(self, markdown: tuple[str, dict[str, int]]) -> None:
        html = MarkdownIt("commonmark").render(markdown[0])
        for tag in ("<img", "<script", "<a "):
            assert tag not in html
