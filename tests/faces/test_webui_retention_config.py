"""RETENTION_HOURS and the app's options (no server)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from chat.engine import Engine
from chat.llm import LLM
from receipts.body import MAX_RECEIPT_BYTES
from storage.files.receipts.audit import cache_dir
from storage.files.receipts.certificate_io import verify_certificate_bytes
from storage.stores import Stores, file_stores, pg_stores
from webui.config import ConfigError, delete_cache, launch_options, parse_args
from webui.downloads import Downloads
from webui.retention import Sweeper, idle_sessions, parse_hours, sweep
from webui.service import Service
from webui.sessions import new_session_key, session_id


def offline_engine(path: Path) -> Engine:
    """An engine whose model is the offline stand-in, whatever the environment says (tests never touch the network)."""
    return Engine(path, llm=LLM(api_key=""))


def age(data_dir: Path, session: str, hours: float) -> None:
    """Make a session look idle for `hours`."""
    t = time.time() - hours * 3600
    for p in (data_dir / "sessions" / session).rglob("*"):
        os.utime(p, (t, t))


class TestParseHours:
    @pytest.mark.parametrize("off", [None, "", "0", "off", "OFF", " no ", "false", 0])
    def test_off_values(self, off: object) -> None:
        assert parse_hours(off) is None  # type: ignore[arg-type]

    @pytest.mark.parametrize(("value", "hours"), [("24", 24.0), ("0.5", 0.5), (48, 48.0)])
    def test_positive_hours(self, value: object, hours: float) -> None:
        assert parse_hours(value) == hours  # type: ignore[arg-type]

    @pytest.mark.parametrize("bad", ["-1", "abc", "nan", "inf", "24h"])
    def test_a_typo_is_refused_rather_than_keeping_forever(self, bad: str) -> None:
        with pytest.raises(ValueError, match="RETENTION_HOURS"):
            parse_hours(bad)


class TestSweep:
    def test_idle_sessions_go_with_everything_derived_from_them(self, tmp_path: Path) -> None:
        service = Service(offline_engine(tmp_path))
        engine = service.engine
        old, new = new_session_key(), new_session_key()
        for key in (old, new):
            service.turn(key, "the walrus sings at dawn", 8)
            turn = service.turn(key, "when does the walrus sing?", 8)
            service.verify(turn.receipt_path.read_bytes(), key)  # fills the auditor's cache
        s_old, s_new = session_id(old), session_id(new)
        assert cache_dir(tmp_path, s_old).is_dir()  # the verifier's own cache, outside the data directory
        age(tmp_path, s_old, 30)
        assert sweep(engine, 24) == [s_old]
        for gone in (
            tmp_path / "sessions" / s_old,
            cache_dir(tmp_path, s_old),
            tmp_path / "merkle" / s_old,
            tmp_path / "merkle" / f"{s_old}.lock",
        ):
            assert not gone.exists(), gone
        assert service.search(old, "walrus", 8).results == []
        (cert,) = (tmp_path / "erasures").glob(f"erasure-{s_old}-all-*.json")  # what RETENTION_HOURS leaves: hashes
        report = verify_certificate_bytes(cert.read_bytes(), trusted=[engine.key.public_key], data_dir=tmp_path)
        assert report.verdict == "verified" and b"walrus" not in cert.read_bytes()
        with engine.index.read() as conn:
            assert conn.execute("SELECT count(*) FROM receipts WHERE session = ?", [s_old]).fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM receipts WHERE session = ?", [s_new]).fetchone()[0] == 2
        assert len(service.search(new, "walrus", 8).results) > 0

    def test_a_deleted_session_key_starts_again_from_nothing(self, tmp_path: Path) -> None:
        service = Service(offline_engine(tmp_path))
        key = new_session_key()
        service.turn(key, "about to be forgotten", 8)
        age(tmp_path, session_id(key), 2)
        sweep(service.engine, 1)
        turn = service.turn(key, "hello again", 8)
        assert turn.user_event.seq == 0 and turn.hits == []
        assert service.verify(turn.receipt_path.read_bytes(), key)[0].verdict == "verified"

    def test_off_deletes_nothing(self, tmp_path: Path) -> None:
        service = Service(offline_engine(tmp_path))
        key = new_session_key()
        service.turn(key, "keep me", 8)
        age(tmp_path, session_id(key), 10_000)
        assert sweep(service.engine, None) == []
        assert service.engine.ledger.exists(session_id(key))

    def test_an_active_session_is_kept(self, tmp_path: Path) -> None:
        service = Service(offline_engine(tmp_path))
        key = new_session_key()
        service.turn(key, "still here", 8)
        assert sweep(service.engine, 1) == []

    def test_the_sweeper_survives_a_failing_job(self) -> None:
        ran = []

        def bad() -> None:
            raise RuntimeError("boom")

        s = Sweeper([bad, lambda: ran.append(1)], interval=3600)
        s.run_once()
        assert ran == [1]

    def test_download_copies_are_swept_but_the_public_key_stays(self, tmp_path: Path) -> None:
        d = Downloads(tmp_path)
        key_path = d.put_static("signing.pub", b"k")
        copy = d.put("rcpt_x.json", b"{}")
        assert d.sweep(max_age=0, now=time.time() + 10) == 1
        assert not Path(copy).exists() and Path(key_path).exists()
        with pytest.raises(ValueError):
            d.put("../escape", b"")
        d.close()


class TestConfig:
    def test_defaults(self) -> None:
        cfg = parse_args([], {})
        assert (cfg.data_dir, cfg.host, cfg.port, cfg.retention_hours, cfg.concurrency, cfg.mcp) == (
            Path("./data"),
            "127.0.0.1",
            7860,
            None,
            16,
            True,
        )

    def test_the_environment_sets_the_defaults_as_a_space_does(self) -> None:
        env = {"DATA_DIR": "/d", "GRADIO_SERVER_NAME": "0.0.0.0", "GRADIO_SERVER_PORT": "7861", "RETENTION_HOURS": "24"}
        cfg = parse_args([], env)
        assert (cfg.data_dir, cfg.host, cfg.port, cfg.retention_hours) == (Path("/d"), "0.0.0.0", 7861, 24.0)

    def test_flags_override_the_environment(self) -> None:
        cfg = parse_args(
            ["--data", "x", "--host", "::1", "--port", "9000", "--retention-hours", "off"], {"RETENTION_HOURS": "5"}
        )
        assert (cfg.data_dir, cfg.host, cfg.port, cfg.retention_hours) == (Path("x"), "::1", 9000, None)

    @pytest.mark.parametrize(
        "argv",
        [
            ["--port", "0"],
            ["--port", "http"],
            ["--port", "70000"],
            ["--retention-hours", "soon"],
            ["--concurrency", "0"],
            ["--bogus"],
        ],
    )
    def test_unusable_options_are_refused(self, argv: list[str]) -> None:
        with pytest.raises(ConfigError):
            parse_args(argv, {})

    def test_launch_caps_uploads_and_never_serves_the_data_directory(self, tmp_path: Path) -> None:
        opts = launch_options(parse_args(["--data", str(tmp_path)], {}))
        assert opts["max_file_size"] == MAX_RECEIPT_BYTES
        assert str(tmp_path.resolve()) in opts["blocked_paths"]
        assert opts["mcp_server"] is True and opts["run_history"] is False

    def test_gradio_cache_is_bounded_and_follows_a_shorter_retention(self) -> None:
        assert delete_cache(None) == (3600, 86400)
        assert delete_cache(48) == (3600, 86400)
        assert delete_cache(2) == (3600, 7200)
        assert delete_cache(0.01) == (60, 60)


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_retention_ts.py):
# Review (issue 14): retention on PostgreSQL dates a session by its last event's `ts` (PgLedger.last_written),
# which `python -m ledger import` takes from the imported file (ledger/importer.py: "A message without `ts` gets the
# time the import started"). On files the same session is dated by its log's mtime: the moment of the import. So a
# history imported a minute ago with its original dates is "idle" on PostgreSQL and the next retention sweep deletes
# it (forget_session_if_idle), while on files it is kept for RETENTION_HOURS.
# --------------------------------------------------------------------------------------------------------------------


S = "alice"


OLD = [{"role": "user", "text": f"note {i} from my old diary", "ts": "2023-05-01T10:00:00Z"} for i in range(3)]


def _imported_just_now(stores: Stores, data: Path) -> list[str]:
    lines = [orjson.dumps(m) + b"\n" for m in OLD]
    stores.ledger.import_jsonl(S, lines)
    eng = Engine(data, llm=LLM(api_key=""), stores=stores)
    return idle_sessions(data, 24.0, time.time(), engine=eng)


def test_on_files_a_session_imported_just_now_is_not_idle(tmp_path: Path) -> None:
    stores = file_stores(tmp_path)
    assert _imported_just_now(stores, tmp_path) == []


@pytest.mark.pg
def test_on_postgresql_a_session_imported_just_now_is_not_idle(tmp_path: Path, pg_url: str) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        assert _imported_just_now(stores, tmp_path) == [], "retention would delete a session written a moment ago"
