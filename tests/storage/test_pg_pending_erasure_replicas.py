"""Issue 28 item 3 on PostgreSQL with several replicas: an erasure that stopped half way on one replica is seen by all.

Replica A's forget stops right after PgLedger.erase committed (an I/O error before the receipts were redacted).
Its journal used to be DATA_DIR/erasures/.pending-<session>.json in A's DATA_DIR only, so replica B (its own
DATA_DIR, the same database) copied the unredacted receipt rows and the index rows out: its bundle export, Markdown
export, receipt download, search and turn all carried the forgotten word. On PostgreSQL the pending erasure is a row
of `erasures_pending`, written in the erase's own transaction and removed when its steps finish: every replica's
copy finishes it first (the word in no output byte, no pending state left anywhere, a certificate written), and A's
own recover (at a restart) still finishes it when B has not. A whole-session deletion stopped half way is the same.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bundle import export_session, render_markdown, verify_file
from bundle.format import BundleError
from chat.engine import Engine, Turn
from control import forget as cf
from control import steps
from control.settle import unfinished
from receipts.stores import ReceiptNotFound
from storage.stores import pg_stores
from webui import forget as wf
from webui.mcp_tools import make_tools
from webui.service import BadInput, Service
from webui.sessions import new_session_key, session_id

from ..forget_support import NEEDLES, _blobs, files_with_marker, marked_session
from ..services.test_erasure_pending_copies import QuietLLM, io_error

pytestmark = pytest.mark.pg
SIGNING_KEY = "5a" * 32  # one key for every replica (README "Scaling out")


@dataclass
class Replicas:
    a: Service
    b: Service
    url: str
    tmp: Path
    key: str = ""
    session: str = ""
    mem: int = -1
    turns: list[Turn] = field(default_factory=list)

    def open(self, name: str) -> Service:
        """Another process on replica `name`'s DATA_DIR (a restart)."""
        data = self.tmp / name
        return Service(Engine(data, llm=QuietLLM(api_key=""), stores=pg_stores(self.url, data, pool_size=4)))


def _service(url: str, data: Path) -> Service:
    data.mkdir(exist_ok=True)
    return Service(Engine(data, llm=QuietLLM(api_key=""), stores=pg_stores(url, data, pool_size=4)))


def has_marker(raw: bytes) -> bool:
    return any(n in blob for blob in _blobs(raw) for n in NEEDLES)


def rows_with_marker(svc: Service, session: str) -> list[str]:
    rec = svc.engine.stores.receipts
    return [rid for rid in rec.receipt_ids(session) if has_marker(rec.read_receipt(session, rid))]


@pytest.fixture
def reps(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Replicas]:
    monkeypatch.setenv("RECEIPT_SIGNING_KEY", SIGNING_KEY)
    made: list[Service] = []
    try:
        made.append(_service(pg_url, tmp_path / "a"))
        made.append(_service(pg_url, tmp_path / "b"))
        yield Replicas(made[0], made[1], pg_url, tmp_path)
    finally:
        for s in made:
            s.engine.close()
            s.downloads.close()


@pytest.fixture
def half(reps: Replicas) -> Replicas:
    """The marked session, answered on replica B; its forget of the memory stopped half way on replica A."""
    reps.key = new_session_key()
    reps.session = session_id(reps.key)
    reps.mem, reps.turns = marked_session(reps.b.engine, reps.session)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "apply_receipts", io_error)
        with pytest.raises(OSError, match="Input/output error"):
            cf.forget(reps.a.data_dir, reps.session, [reps.mem], cascade=False, stores=reps.a.engine.stores, key=reps.a.engine.key)
    assert rows_with_marker(reps.b, reps.session), "the receipt rows still disclose the forgotten word"
    assert unfinished(reps.a.data_dir, reps.session, reps.a.engine.stores), "replica A sees its erasure pending"
    return reps


def finished(r: Replicas) -> None:
    """No pending state on either replica or in the database, no stored copy of the word, a certificate written."""
    for svc in (r.a, r.b):
        assert not unfinished(svc.data_dir, r.session, svc.engine.stores)
        assert cf.pending(svc.data_dir) == []
    assert rows_with_marker(r.b, r.session) == []
    assert files_with_marker(r.a.data_dir, r.b.data_dir) == []
    certs = [p for svc in (r.a, r.b) for p in (svc.data_dir / "erasures").glob(f"erasure-{r.session}-*.json")]
    assert len(certs) == 1, certs


class TestAnotherReplicaFinishesTheErasureBeforeItCopies:
    def test_replica_b_sees_the_erasure_replica_a_left_pending(self, half: Replicas) -> None:
        assert unfinished(half.b.data_dir, half.session, half.b.engine.stores)

    def test_replica_b_s_bundle_export_finishes_it_and_carries_no_copy(self, half: Replicas, tmp_path: Path) -> None:
        out = tmp_path / "b.mrebundle"
        export_session(half.b.data_dir, half.session, out, stores=half.b.engine.stores)  # as `python -m bundle export`
        raw = out.read_bytes()
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            assert not has_marker(raw) and [n for n in z.namelist() if has_marker(z.read(n))] == []
        assert verify_file(out, [half.b.engine.key.public_key]).verdict == "verified"
        finished(half)

    def test_replica_b_s_markdown_export_finishes_it_first(self, half: Replicas) -> None:
        text, _n = render_markdown(half.b.data_dir, half.session, stores=half.b.engine.stores)
        assert not has_marker(text.encode())
        finished(half)

    def test_replica_b_s_search_finishes_it_first(self, half: Replicas) -> None:
        found = half.b.search(half.key, "locker code word", 8)
        assert found.results and not has_marker(repr(found.results).encode())
        finished(half)

    def test_replica_b_s_turn_finishes_it_first(self, half: Replicas) -> None:
        turn = half.b.engine.turn(half.session, "What is my locker code word?")
        assert half.mem not in [h.seq for h in turn.hits]
        assert not has_marker(turn.assistant_event.text.encode())
        assert not has_marker(half.b.engine.stores.receipts.read_receipt(half.session, turn.receipt_id))
        finished(half)

    def test_replica_b_s_mcp_ask_finishes_it_first(self, half: Replicas) -> None:
        tools = {fn.__name__: fn for fn in make_tools(half.b)}
        assert not has_marker(tools["ask"](half.key, "Tell me the locker code word").encode())
        finished(half)

    def test_replica_b_s_receipt_download_finishes_it_first(self, half: Replicas) -> None:
        path = half.b.receipt_download(half.turns[-1])  # that receipt cited the forgotten memory
        assert path is not None and not has_marker(Path(path).read_bytes())
        finished(half)

    def test_replica_b_s_start_up_recover_finishes_it(self, half: Replicas) -> None:
        written = wf.recover(half.b)  # what app.py runs at start
        assert len(written) == 1 and written[0].parent == half.b.data_dir / "erasures"
        finished(half)


class TestAnotherReplicaRefusesWhileItCannotBeFinished:
    """The steps still fail on replica B too: its copies are refused in one line naming no server path, nothing written."""

    @pytest.fixture(autouse=True)
    def still_failing(self, half: Replicas, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(steps, "apply_receipts", io_error)

    def test_replica_b_s_exports_search_and_turn_are_refused_in_one_line(self, half: Replicas, tmp_path: Path) -> None:
        out = tmp_path / "b.mrebundle"
        head = half.b.engine.ledger.head(half.session)
        calls = [
            lambda: export_session(half.b.data_dir, half.session, out, stores=half.b.engine.stores),
            lambda: render_markdown(half.b.data_dir, half.session, stores=half.b.engine.stores),
            lambda: half.b.search(half.key, "locker code word", 8),
            lambda: half.b.turn(half.key, "What is my locker code word?", 8),
            lambda: half.b.receipt_bytes(half.session, half.turns[-1].receipt_id),
        ]
        for call in calls:
            with pytest.raises((BundleError, BadInput)) as caught:
                call()
            said = str(caught.value)
            assert "stopped half way" in said and "\n" not in said, said
            assert str(half.a.data_dir) not in said and str(half.b.data_dir) not in said and str(tmp_path) not in said, said
        assert not out.exists() and half.b.engine.ledger.head(half.session) == head
        assert unfinished(half.b.data_dir, half.session, half.b.engine.stores)


class TestReplicaAItself:
    def test_replica_a_s_recover_after_a_restart_finishes_it(self, half: Replicas) -> None:
        half.a.engine.close()
        half.a = half.open("a")
        written = wf.recover(half.a)
        assert len(written) == 1 and written[0].parent == half.a.data_dir / "erasures"
        finished(half)

    def test_replica_a_finds_nothing_left_once_b_finished_it(self, half: Replicas) -> None:
        half.b.settle(half.session)
        assert cf.recover(half.a.data_dir, stores=half.a.engine.stores, key=half.a.engine.key) == []
        assert half.a.engine.turn(half.session, "What is my locker code word?").receipt_id
        finished(half)


def test_a_session_deletion_stopped_half_way_on_a_is_finished_before_b_hands_out_a_receipt(reps: Replicas) -> None:
    reps.key = new_session_key()
    reps.session = session_id(reps.key)
    _mem, turns = marked_session(reps.b.engine, reps.session)
    backend = type(reps.a.engine.stores.receipts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(backend, "forget_session", lambda *_a, **_k: io_error())  # after the ledger's rows went
        with pytest.raises(OSError, match="Input/output error"):
            cf.forget_session(reps.a.data_dir, reps.session, stores=reps.a.engine.stores, key=reps.a.engine.key)
    assert not reps.b.engine.ledger.exists(reps.session)
    assert rows_with_marker(reps.b, reps.session), "the receipt rows of the deleted session are still there"
    assert unfinished(reps.b.data_dir, reps.session, reps.b.engine.stores)
    with pytest.raises(ReceiptNotFound):
        reps.b.receipt_bytes(reps.session, turns[-1].receipt_id)  # finished first: the session's receipts are gone
    assert reps.b.engine.stores.receipts.receipt_ids(reps.session) == []
    for svc in (reps.a, reps.b):
        assert not unfinished(svc.data_dir, reps.session, svc.engine.stores) and cf.pending(svc.data_dir) == []
    assert list((reps.b.data_dir / "erasures").glob(f"erasure-{reps.session}-all-*.json")), "B keeps the certificate too"
