"""Session bundles on both backends (issue 14 over issue 13, docs/FORMAT.md §21): a bundle exported from PostgreSQL
verifies offline and, for the same session content and export time, is the file backend's bundle byte for byte; a
bundle imported into PostgreSQL keeps its ledger (verifies), its receipts (verify against the stored lines) and is
found by search, in a schema of its own beside any session of the same id; the bundle CLI follows DATABASE_URL.

The source session (memories, offline turns with receipts, one memory forgotten: a certificate) is
tests/services/test_bundle.py's, built with the file engine."""

from __future__ import annotations

import secrets
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from bundle import (
    export_session,
    import_bundle,
    imported_dir,
    list_imported,
    render_markdown,
    trusted_keys,
    verify_file,
)
from bundle.format import BundleError
from bundle.importer import verify_imported_receipt
from cli.prog_bundle import main
from receipts.verify import PASS
from storage import migrate as pg_migrate
from storage import migrate_receipts as receipts_migrate
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes
from storage.pg import imports as pg_imports
from storage.stores import Stores, file_stores, pg_stores
from tests.services.test_bundle import QUERIES, SESSION, Source, build_source, empty_data_dir

AT = "2026-12-05T09:00:00.123456Z"  # one export time for every bundle compared byte for byte


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("bundle-backends-source"))


@pytest.fixture(params=["file", pytest.param("pg", marks=pytest.mark.pg)])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Empty stores of each backend; DATA_DIR a fresh data directory (on PostgreSQL: keys and staging only)."""
    data = empty_data_dir(tmp_path / "data")
    opened = file_stores(data) if request.param == "file" else pg_stores(request.getfixturevalue("pg_url"), data)
    try:
        yield opened
    finally:
        if opened.kind == "files":
            opened.index.close()
            opened.ledger.close()
        opened.close()


@contextmanager
def imported_stores(stores: Stores, local: str) -> Iterator[Stores]:
    """The stores an imported session lives in: its own data directory, or its own schema."""
    if stores.kind == "files":
        st = file_stores(imported_dir(stores.data_dir, local))
        try:
            yield st
        finally:
            st.index.close()
            st.ledger.close()
    else:
        with stores.ledger.imports().open(local) as st:
            yield st


def export_imported(stores: Stores, local: str, out: Path, source: Source) -> Path:
    """Export an imported session again, with its certificates, at AT under the source's key."""
    with imported_stores(stores, local) as st:
        certs = stores.ledger.imports().certificates(local) if stores.kind == "postgresql" else None
        export_session(st.data_dir, SESSION, out, key=source.key, stores=st, exported_at=AT, certificates=certs)
    return out


def migrated(source: Source, tmp_path: Path, url: str) -> Stores:
    """A copy of the source's data directory moved into PostgreSQL (`ledger migrate` and its receipts step)."""
    data = tmp_path / "migrated"
    shutil.copytree(source.data, data)
    st = pg_stores(url, data)
    assert st.database is not None
    led = st.ledger
    assert not isinstance(led, Ledger)
    assert [m.status for m in pg_migrate.migrate(data, led)] == ["copied"]
    receipts_migrate.migrate_receipts(data, st.database)
    return st


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def every_row_passes(path: Path, source: Source) -> None:
    report = verify_file(path, source.trusted)
    assert report.verdict == "verified", [(c.name, c.status, c.message) for c in report.checks if c.status != PASS]
    assert any(c.name.startswith("receipt ") for c in report.checks) and any(c.name.startswith("certificate ") for c in report.checks)


class TestExport:
    @pytest.mark.pg
    def test_a_migrated_session_exports_from_postgresql_the_same_bytes_as_from_the_files(self, source: Source, tmp_path: Path, pg_url: str) -> None:
        st = migrated(source, tmp_path, pg_url)
        try:
            from_files = export_session(st.data_dir, SESSION, tmp_path / "files.mre.zip", key=source.key, exported_at=AT)
            from_pg = export_session(st.data_dir, SESSION, tmp_path / "pg.mre.zip", key=source.key, stores=st, exported_at=AT)
        finally:
            st.close()
        assert from_pg.path.read_bytes() == from_files.path.read_bytes()
        assert (from_pg.events, from_pg.receipts, from_pg.certificates) == (from_files.events, from_files.receipts, from_files.certificates)
        every_row_passes(from_pg.path, source)

    @pytest.mark.pg
    def test_a_session_written_on_postgresql_exports_a_bundle_that_verifies_offline(self, tmp_path: Path, pg_url: str) -> None:
        data = empty_data_dir(tmp_path / "data")
        with pg_stores(pg_url, data) as st:
            for i in range(30):
                st.ledger.append("bob", "user" if i % 2 == 0 else "assistant", f"message {i} about the harbour")
            done = export_session(data, "bob", tmp_path / "bob.mre.zip", stores=st)
            led = st.ledger
            assert not isinstance(led, Ledger)
            with open(tmp_path / "bob.jsonl", "wb") as f:
                led.export("bob", f)
            assert st.receipts.latest_checkpoint("bob") is not None  # issued by the export, kept in the database
        assert not (data / "sessions" / "bob").exists()  # nothing of the session written to DATA_DIR
        assert members(done.path)["ledger/events.jsonl"] == (tmp_path / "bob.jsonl").read_bytes()
        report = verify_file(done.path, trusted_keys_of(data))
        assert report.verdict == "verified" and done.events == 30, [(c.name, c.message) for c in report.failed]

    @pytest.mark.pg
    def test_markdown_from_postgresql_is_the_markdown_from_the_files(self, source: Source, tmp_path: Path, pg_url: str) -> None:
        st = migrated(source, tmp_path, pg_url)
        try:
            assert render_markdown(st.data_dir, SESSION, stores=st) == render_markdown(st.data_dir, SESSION)
        finally:
            st.close()

    def test_an_export_time_that_is_not_a_utc_timestamp_is_refused(self, source: Source, tmp_path: Path) -> None:
        with pytest.raises(BundleError, match="exported_at"):
            export_session(source.data, SESSION, tmp_path / "x.mre.zip", key=source.key, exported_at="yesterday")
        assert not (tmp_path / "x.mre.zip").exists()

    def test_the_same_session_exported_twice_at_the_same_time_gives_the_same_bytes(self, source: Source, tmp_path: Path) -> None:
        a = export_session(source.data, SESSION, tmp_path / "a.mre.zip", key=source.key, exported_at=AT)
        b = export_session(source.data, SESSION, tmp_path / "b.mre.zip", key=source.key, exported_at=AT)
        assert a.sha256 == b.sha256
        with zipfile.ZipFile(a.path) as z:
            assert {i.date_time for i in z.infolist()} == {(2026, 12, 5, 9, 0, 0)}  # AT, not the clock at export


def trusted_keys_of(data: Path) -> list:  # type: ignore[type-arg]
    from storage.common.keyfiles import load_or_create

    return [load_or_create(data).public_key]


class TestImport:
    def test_an_imported_bundle_keeps_a_ledger_that_verifies_and_is_found_by_search(self, source: Source, stores: Stores) -> None:
        done = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
        assert not done.duplicate and done.indexed == done.origin.events
        assert [o.local for o in list_imported(stores.data_dir, stores=stores)] == [done.local]
        assert [k.key_id for k in trusted_keys(stores.data_dir, done.local, stores=stores)] == [source.key.key_id]
        with imported_stores(stores, done.local) as st:
            report = st.ledger.verify(SESSION)
            assert report.ok and (report.events, report.head) == (done.origin.events, done.origin.chain_head)
            found = {q: [h.seq for h in st.index.search(SESSION, q, k=5).results] for q in QUERIES}
        assert found == source.searches

    def test_every_imported_receipt_verifies_against_the_stored_ledger(self, source: Source, stores: Stores, tmp_path: Path) -> None:
        done = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
        check = tmp_path / "check"  # the stored lines written out as a data directory, the receipts read back from the store
        with imported_stores(stores, done.local) as st:
            (check / "sessions" / SESSION).mkdir(parents=True)
            with open(check / "sessions" / SESSION / "events.jsonl", "wb") as f:
                if isinstance(st.ledger, Ledger):
                    f.write(st.ledger.log_path(SESSION).read_bytes())
                else:
                    st.ledger.export(SESSION, f)
            raws = [st.receipts.read_receipt(SESSION, r) for r in st.receipts.receipt_ids(SESSION)]
        assert sorted(raws) == sorted(p.read_bytes() for p in source.receipts)
        for raw in raws:
            report = verify_bytes(raw, trusted=source.trusted, data_dir=check)
            assert report.verdict == "verified", [(c.name, c.message) for c in report.failed]

    def test_a_file_exported_bundle_imported_here_exports_again_byte_for_byte(self, source: Source, stores: Stores, tmp_path: Path) -> None:
        original = export_session(source.data, SESSION, tmp_path / "original.mre.zip", key=source.key, exported_at=AT)
        done = import_bundle(stores.data_dir, original.path, trusted=source.trusted, stores=stores)
        again = export_imported(stores, done.local, tmp_path / "again.mre.zip", source)
        assert again.read_bytes() == original.path.read_bytes()
        every_row_passes(again, source)

    def test_the_same_bundle_imported_twice_is_a_duplicate_that_changes_nothing(self, source: Source, stores: Stores) -> None:
        first = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
        second = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
        assert second.duplicate and second.local == first.local and second.indexed == 0
        assert len(list_imported(stores.data_dir, stores=stores)) == 1

    def test_an_untrusted_bundle_is_refused_and_leaves_nothing(self, source: Source, stores: Stores) -> None:
        from bundle import ImportRefused

        with pytest.raises(ImportRefused) as caught:
            import_bundle(stores.data_dir, source.bundle, stores=stores)
        assert caught.value.verdict == "unverified"
        assert list_imported(stores.data_dir, stores=stores) == []
        if stores.kind == "postgresql":
            assert import_schemas(stores) == []

    def test_a_bundle_of_a_session_this_store_holds_is_imported_beside_it_not_into_it(self, source: Source, stores: Stores) -> None:
        stores.ledger.append(SESSION, "user", "a different conversation under the same session id")
        before = stores.ledger.head(SESSION)
        done = import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, stores=stores)
        assert stores.ledger.head(SESSION) == before
        with imported_stores(stores, done.local) as st:
            assert st.ledger.head(SESSION) == (done.origin.events, done.origin.chain_head)

    def test_as_a_local_id_a_session_of_the_store_already_has_is_refused(self, source: Source, stores: Stores) -> None:
        stores.ledger.append("taken", "user", "hello")
        with pytest.raises(BundleError, match="--as taken: a session of that id already exists"):
            import_bundle(stores.data_dir, source.bundle, trusted=source.trusted, as_session="taken", stores=stores)
        assert list_imported(stores.data_dir, stores=stores) == []


def import_schemas(stores: Stores) -> list[str]:
    assert stores.database is not None
    with stores.database.connection() as conn:
        return [r[0] for r in conn.execute(r"SELECT nspname FROM pg_namespace WHERE nspname LIKE 'mre\_import\_%'")]


@pytest.mark.pg
class TestPostgresqlImports:
    def test_a_crashed_import_schema_is_dropped_once_stale_and_a_live_one_is_kept(self, source: Source, tmp_path: Path, pg_url: str) -> None:
        with pg_stores(pg_url, empty_data_dir(tmp_path / "data")) as st:
            done = import_bundle(st.data_dir, source.bundle, trusted=source.trusted, stores=st)
            assert st.database is not None
            with st.database.transaction() as conn:
                conn.execute("CREATE SCHEMA mre_import_1000000000_0badc0de")  # no bundle_imports row: a crash in 2001
                conn.execute("CREATE SCHEMA mre_import_9999999999_0badc0de")  # no row, but not stale yet
            assert st.ledger.imports().sweep() == ["mre_import_1000000000_0badc0de"]
            assert "mre_import_9999999999_0badc0de" in import_schemas(st) and len(import_schemas(st)) == 2
            with st.ledger.imports().open(done.local) as imp:
                assert imp.ledger.verify(SESSION).ok

    def test_a_failure_during_the_import_leaves_no_schema_and_no_row(self, source: Source, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        def broken(*_: object) -> None:
            raise RuntimeError("disk full (simulated)")

        monkeypatch.setattr(pg_imports, "_write_members", broken)
        with pg_stores(pg_url, empty_data_dir(tmp_path / "data")) as st:
            with pytest.raises(RuntimeError, match="simulated"):
                import_bundle(st.data_dir, source.bundle, trusted=source.trusted, stores=st)
            assert import_schemas(st) == [] and list_imported(st.data_dir, stores=st) == []

    def test_an_import_that_loses_the_race_to_the_same_ledger_is_a_duplicate_and_leaves_no_schema(
        self, source: Source, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with pg_stores(pg_url, empty_data_dir(tmp_path / "data")) as st:
            first = import_bundle(st.data_dir, source.bundle, trusted=source.trusted, stores=st)
            real = pg_imports.same_ledger
            calls: list[int] = []

            def stale_then_real(*a: object) -> object:
                calls.append(1)  # the first check (before the copy) misses the winner, as in a race; the commit's sees it
                return None if len(calls) == 1 else real(*a)  # type: ignore[arg-type]

            monkeypatch.setattr(pg_imports, "same_ledger", stale_then_real)
            monkeypatch.setattr(pg_imports, "local_taken", lambda *_a: False)
            second = import_bundle(st.data_dir, source.bundle, trusted=source.trusted, stores=st)
            assert second.duplicate and second.local == first.local and calls == [1, 1]
            assert len(import_schemas(st)) == 1 and len(list_imported(st.data_dir, stores=st)) == 1

    def test_a_role_that_may_not_create_a_schema_is_told_so_and_nothing_is_imported(self, source: Source, tmp_path: Path, pg_url: str) -> None:
        role = f"limited_{secrets.token_hex(4)}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {role} LOGIN")
            admin.execute(f"GRANT CREATE ON SCHEMA public TO {role}")  # its own tables, but no CREATE on the database
        with pg_stores(pg_url.replace("://mre@", f"://{role}@"), empty_data_dir(tmp_path / "data")) as st:
            with pytest.raises(BundleError, match="may not create one"):
                import_bundle(st.data_dir, source.bundle, trusted=source.trusted, stores=st)
            assert import_schemas(st) == [] and list_imported(st.data_dir, stores=st) == []

    def test_the_schema_url_keeps_the_url_and_adds_the_search_path(self) -> None:
        url = pg_imports.schema_url("postgresql://u:pw@127.0.0.1:5432/db?sslmode=disable", "mre_import_1700000000_00ff00ff")
        info = psycopg.conninfo.conninfo_to_dict(url)
        assert (info["sslmode"], info["options"], info["password"]) == ("disable", "-c search_path=mre_import_1700000000_00ff00ff", "pw")
        with pytest.raises(ValueError, match="not an import schema"):
            pg_imports.schema_url("postgresql://u@h/db", "public; DROP TABLE events")

    def test_the_schema_url_keeps_a_query_password_with_plus_and_escapes_as_libpq_reads_it(self) -> None:
        url = "postgresql://u@h:5432/db?password=a%2Bb+c%20d&options=-c%20work_mem%3D4MB"
        info = psycopg.conninfo.conninfo_to_dict(pg_imports.schema_url(url, "mre_import_1700000000_00ff00ff"))
        assert info["password"] == psycopg.conninfo.conninfo_to_dict(url)["password"] == "a+b+c d"
        assert info["options"] == "-c work_mem=4MB -c search_path=mre_import_1700000000_00ff00ff"


@pytest.mark.pg
class TestCli:
    def test_bundle_export_and_import_follow_database_url(self, source: Source, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        data = empty_data_dir(tmp_path / "data")
        monkeypatch.setenv("DATABASE_URL", pg_url)
        assert main(["import", str(data), str(source.bundle), "--trust", str(source.pub)]) == 0
        assert "imported session alice as" in capsys.readouterr().out
        assert not any((data / "imported").iterdir())  # only the (removed) staging folder was on disk
        with pg_stores(pg_url, data) as st:
            for i in range(3):
                st.ledger.append("carol", "user", f"line {i}")
            [origin] = list_imported(data, stores=st)
        assert main(["list", str(data)]) == 0
        assert origin.local in capsys.readouterr().out
        assert main(["export", str(data), "carol", str(tmp_path / "carol.mre.zip")]) == 0
        assert verify_file(tmp_path / "carol.mre.zip", trusted_keys_of(data)).verdict == "verified"
        assert main(["markdown", str(data), "carol", str(tmp_path / "carol.md")]) == 0
        assert "line 2" in (tmp_path / "carol.md").read_text()



@pytest.mark.pg
class TestApp:
    def test_the_app_on_postgresql_exports_imports_searches_and_verifies_an_imported_receipt(self, tmp_path: Path, pg_url: str) -> None:
        from chat.engine import Engine
        from chat.llm import LLM
        from webui import bundles as bd
        from webui.service import Service
        from webui.sessions import new_session_key

        secret = "the spare key is under the blue pot"
        data = empty_data_dir(tmp_path / "data")
        service = Service(Engine(data, llm=LLM(api_key=""), stores=pg_stores(pg_url, data)))
        try:
            key = new_session_key()
            service.turn(key, secret, 8)
            service.turn(key, "where is the spare key?", 8)
            done = bd.export_bundle(service, key)
            report = verify_file(done.path, [service.engine.key.public_key])
            assert report.verdict == "verified" and done.receipts == 2, [(c.name, c.message) for c in report.failed]
            outcome = bd.import_upload(service, key, str(done.path))
            assert outcome.imported is not None and outcome.refused is None
            (origin,) = bd.imported_sessions(service, key)
            _origin, resp = bd.search_imported(service, key, origin.local, "spare key", 8)
            assert any(secret in hit.text for hit in resp.results)
            with service.engine.stores.ledger.imports().open(origin.local) as st:
                raws = [st.receipts.read_receipt(origin.session, r) for r in st.receipts.receipt_ids(origin.session)]
            assert len(raws) == 2
            for raw in raws:
                checked = verify_imported_receipt(raw, data, origin.local, stores=service.engine.stores)
                assert checked.verdict == "verified", [(c.name, c.message) for c in checked.failed]
            assert not (data / "sessions").exists() or not any((data / "sessions").iterdir())  # nothing of a session on disk
            assert [p.name for p in (data / "imported").iterdir()] == []  # staging and verify folders removed
        finally:
            service.engine.close()
