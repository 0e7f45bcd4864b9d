"""The control commands on both backends (files and PostgreSQL), through storage.stores: forget (erasure with a
certificate, receipts redacted, the index forgetting), forget a whole session, recover an interrupted erasure,
revoke and restore, supersede and correct, the control state, and `python -m control` with DATABASE_URL.

`stores` yields a Stores for each backend and an offline engine on it (chat.engine.Engine(stores=…)) that builds
a session whose three answers cite a marked memory (tests/forget_support.marked_session).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import forget as cf
from control import revocation, steps
from control.forget import forget_session, recover
from control.plan import PlanError
from control.revocation import ControlError, current, restore, revoke
from control.settings import get_consent, set_consent
from control.state import derive
from control.supersession import correct, history, supersede
from ledger.controls import CONTROL_TEXTS, REVOKE, control_meta
from receipts.verify import WITHHELD
from storage import BackendError
from storage.files.receipts.api import verify_bytes
from storage.stores import Stores, file_stores, pg_stores

from ..forget_support import MARKER, NEEDLES, files_with_marker, marked_session

ROOT = Path(__file__).resolve().parents[2]
S = "alice"


@dataclass
class Deployment:
    kind: str
    data: Path
    stores: Stores
    engine: Engine
    url: str | None = None


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def dep(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    data = tmp_path / "data"
    data.mkdir()
    url = None
    if request.param == "files":
        stores = file_stores(data)
    else:
        url = request.getfixturevalue("pg_url")
        stores = pg_stores(url, data, pool_size=4, receipt_copies=True)  # as python -m chat: copies a forget must redact
    eng = Engine(data, llm=LLM(api_key=""), stores=stores)
    try:
        yield Deployment(request.param, data, stores, eng, url)
    finally:
        stores.close()


def _has_marker(raw: bytes) -> bool:
    low = raw.lower()
    return any(n in low for n in NEEDLES)


def _stored_bytes_with_marker(dep: Deployment) -> list[str]:
    """Where the live stores still hold the marker: each event line and each receipt, on either backend."""
    out = [f"event {ev.seq}" for ev in dep.stores.ledger.events(S) if not ev.erased and _has_marker((ev.text or "").encode())]
    for rid in dep.stores.receipts.receipt_ids(S):
        if _has_marker(dep.stores.receipts.read_receipt(S, rid)):
            out.append(f"receipt {rid}")
    if dep.kind == "pg":
        with dep.stores.database.connection() as conn:  # type: ignore[union-attr]
            for (line,) in conn.execute("SELECT line FROM events WHERE session = %s", (S,)):
                if _has_marker(bytes(line)):
                    out.append("an events row")
    return out


def _hits(dep: Deployment, query: str, exclude: list[int] | None = None) -> list[int]:
    return [h.seq for h in dep.stores.index.search(S, query, 20, exclude or []).results]


class TestForget:
    def test_a_forgotten_memory_is_erased_its_receipts_redacted_and_still_verifying(self, dep: Deployment) -> None:
        mem, _turns = marked_session(dep.engine)
        before = dep.stores.receipts.receipt_ids(S)
        assert files_with_marker(dep.data)  # the receipts (on PostgreSQL their copies in DATA_DIR) quote it now
        result = cf.forget(dep.data, S, [mem], stores=dep.stores, key=dep.engine.key)
        report = dep.stores.ledger.verify(S)
        assert report.ok and mem in report.erased and set(result.erased) <= set(report.erased)
        assert set(result.redacted) == set(before) and result.withdrawn == ()
        for rid in result.redacted:
            raw = dep.stores.receipts.read_receipt(S, rid)
            offline = verify_bytes(raw, trusted=[dep.engine.key.public_key])
            assert offline.verdict == "verified" and any(c.status == WITHHELD for c in offline.checks), rid
        assert _stored_bytes_with_marker(dep) == []
        assert files_with_marker(dep.data) == []  # on PostgreSQL: the receipt copies a visitor keeps were redacted too
        for q in (MARKER, "locker code word"):
            assert not set(_hits(dep, q)) & set(result.erased)
        cp = dep.stores.receipts.latest_checkpoint(S)
        assert cp is not None and cp["body"]["tree_size"] == dep.stores.ledger.head(S)[0]
        assert result.certificate_path.is_file() and cf.pending_sessions(dep.data, dep.stores) == []

    def test_a_refused_forget_changes_nothing(self, dep: Deployment) -> None:
        mem, _turns = marked_session(dep.engine)
        head = dep.stores.ledger.head(S)
        with pytest.raises(PlanError, match="no event at seq|holds"):
            cf.forget(dep.data, S, [head[0] + 5], stores=dep.stores, key=dep.engine.key)
        assert dep.stores.ledger.head(S) == head and mem in _hits(dep, "locker code word")

    def test_the_preview_names_what_forget_then_erases(self, dep: Deployment) -> None:
        mem, _turns = marked_session(dep.engine)
        plan = cf.preview(dep.data, S, [mem], stores=dep.stores)
        result = cf.forget(dep.data, S, [mem], stores=dep.stores, key=dep.engine.key)
        assert plan.erase == result.erased and set(plan.redact) == set(result.redacted)

    def test_an_answer_without_a_receipt_is_found_by_its_cites_record_and_erased_with_the_memory(self, dep: Deployment) -> None:
        mem, _turns = marked_session(dep.engine)
        rid = "rcpt_" + "ab" * 16
        q = dep.stores.ledger.append(S, "user", "where is my locker code?")
        answer = dep.stores.ledger.append(S, "assistant", "It is the word you told me.", {"receipt_id": rid})
        dep.stores.receipts.write_cites(S, rid, q.seq, [mem])  # a turn killed before its receipt was written
        result = cf.forget(dep.data, S, [mem], stores=dep.stores, key=dep.engine.key)
        assert answer.seq in result.cascaded
        assert dep.stores.receipts.pending_cites(S) == []

    def test_recover_finishes_an_erasure_stopped_after_the_ledger_changed(self, dep: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
        mem, _turns = marked_session(dep.engine)

        def crash(*_a: object, **_k: object) -> None:
            raise SystemExit("killed")  # stands in for a SIGKILL after the ledger was rewritten

        with monkeypatch.context() as mp:
            mp.setattr(steps, "apply_receipts", crash)
            with pytest.raises(SystemExit):
                cf.forget(dep.data, S, [mem], stores=dep.stores, key=dep.engine.key)
        assert cf.pending_sessions(dep.data, dep.stores) == [S] and _stored_bytes_with_marker(dep)  # the receipts still hold it
        written = cf.recover(dep.data, stores=dep.stores, key=dep.engine.key)
        assert len(written) == 1 and cf.pending_sessions(dep.data, dep.stores) == []
        assert _stored_bytes_with_marker(dep) == [] and mem not in _hits(dep, "locker code word")

    def test_forgetting_the_whole_session_leaves_nothing_of_it_but_a_certificate(self, dep: Deployment) -> None:
        marked_session(dep.engine)
        set_consent(dep.stores, S, True)
        result = cf.forget_session(dep.data, S, stores=dep.stores, key=dep.engine.key)
        assert not dep.stores.ledger.exists(S)
        assert get_consent(dep.stores, S) is False  # its settings went with it (a row on PostgreSQL)
        assert dep.stores.receipts.receipt_ids(S) == [] and dep.stores.receipts.latest_checkpoint(S) is None
        assert dep.stores.receipts.pending_cites(S) == []
        assert result.certificate_path.is_file() and len(result.withdrawn) == 3
        with pytest.raises(PlanError, match="no such session"):
            cf.forget_session(dep.data, S, stores=dep.stores, key=dep.engine.key)


class TestRevokeSupersede:
    def test_a_revoked_memory_is_left_out_and_a_restored_one_comes_back(self, dep: Deployment) -> None:
        mem = dep.engine.remember(S, "I keep my bicycle in the blue shed")
        revoke(dep.data, S, mem.seq, stores=dep.stores, key=dep.engine.key)
        state = current(dep.stores.ledger, S)
        assert state.excluded() == [mem.seq]
        assert mem.seq not in _hits(dep, "bicycle shed", state.excluded())
        turn = dep.engine.turn(S, "Where is my bicycle?")
        assert mem.seq not in [h.seq for h in turn.hits]
        with pytest.raises(ControlError, match="already revoked"):
            revoke(dep.data, S, mem.seq, stores=dep.stores, key=dep.engine.key)
        restore(dep.data, S, mem.seq, stores=dep.stores, key=dep.engine.key)
        state = current(dep.stores.ledger, S)
        assert state.excluded() == [] and mem.seq in _hits(dep, "bicycle shed", state.excluded())
        cp = dep.stores.receipts.latest_checkpoint(S)
        assert cp is not None and cp["body"]["tree_size"] == dep.stores.ledger.head(S)[0]

    def test_a_supersession_is_in_the_state_and_the_history(self, dep: Deployment) -> None:
        old = dep.engine.remember(S, "The plumber comes on Tuesday")  # no rule links these two: the visitor does
        new = dep.engine.remember(S, "Grandmother's recipe needs saffron")
        supersede(dep.data, S, new.seq, old.seq, stores=dep.stores, key=dep.engine.key)
        state = current(dep.stores.ledger, S)
        assert state.supersessions.superseded_by(old.seq) == new.seq
        rows = history(dep.data, S, old.seq, stores=dep.stores)
        assert [(r.seq, r.superseded_by) for r in rows] == [(old.seq, new.seq), (new.seq, None)]

    def test_a_correction_is_appended_superseding_and_searchable(self, dep: Deployment) -> None:
        old = dep.engine.remember(S, "My dentist is Doctor Almeida")
        result = correct(dep.data, S, old.seq, "My dentist is Doctor Figueira", stores=dep.stores, key=dep.engine.key)
        assert current(dep.stores.ledger, S).supersessions.superseded_by(old.seq) == result.new_seq
        assert result.new_seq in _hits(dep, "Figueira")

    def test_the_state_equals_a_replay_of_the_ledger_in_a_fresh_process(self, dep: Deployment) -> None:
        a = dep.engine.remember(S, "first statement about tea")
        b = dep.engine.remember(S, "the bus pass expires in June")
        c = dep.engine.remember(S, "my neighbour plays the cello")
        revoke(dep.data, S, a.seq, stores=dep.stores, key=dep.engine.key)
        supersede(dep.data, S, c.seq, b.seq, stores=dep.stores, key=dep.engine.key)
        revoke(dep.data, S, b.seq, stores=dep.stores, key=dep.engine.key)
        restore(dep.data, S, a.seq, stores=dep.stores, key=dep.engine.key)
        cached = current(dep.stores.ledger, S)
        revocation._cache.clear()  # another process: nothing cached
        fresh = current(dep.stores.ledger, S)
        replay = derive(dep.stores.ledger.events(S))
        for st in (cached, fresh):
            assert (st.size, st.head, st.revoked, st.controls) == (replay.size, replay.head, replay.revoked, replay.controls)
            assert st.supersessions.links == replay.supersessions.links

    def test_the_state_follows_a_revoke_another_replica_appended(self, dep: Deployment) -> None:
        a = dep.engine.remember(S, "a memory about the garden")
        b = dep.engine.remember(S, "a memory about the kitchen")
        assert current(dep.stores.ledger, S).excluded() == []  # cached in this process now
        # what another replica's revoke writes, unseen by this process's cache
        dep.stores.ledger.append(S, "system", CONTROL_TEXTS[REVOKE], control_meta(REVOKE, b.seq, b.id, None))
        dep.engine.remember(S, "a memory about the attic")
        state = current(dep.stores.ledger, S)
        assert state.excluded() == [b.seq] and a.seq not in state.revoked
        assert state.size == dep.stores.ledger.head(S)[0]


@pytest.mark.pg
def test_the_control_cli_works_on_postgresql_with_database_url(tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with pg_stores(pg_url, data, pool_size=2) as stores:
        eng = Engine(data, llm=LLM(api_key=""), stores=stores)
        mem = eng.remember(S, "I park on the third floor")
    env = {**os.environ, "DATABASE_URL": pg_url, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "control", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    done = run("revoke", str(data), S, str(mem.seq))
    assert done.returncode == 0, done.stderr
    assert f"seq {mem.seq}" in done.stdout and not (data / "sessions").exists()  # nothing of the record in DATA_DIR
    refused = run("revoke", str(data), S, "99")
    assert refused.returncode == 2 and "no event at seq 99" in refused.stderr
    forgot = run("forget", str(data), S, str(mem.seq))
    assert forgot.returncode == 0, forgot.stderr
    assert forgot.stdout.strip().splitlines()[-1].startswith("certificate: ")
    with pg_stores(pg_url, data, pool_size=2) as stores:
        report = stores.ledger.verify(S)
        assert report.ok and mem.seq in report.erased
    missing = run("revoke", str(tmp_path / "nowhere"), S, "0")
    assert missing.returncode == 2 and "not a folder" in missing.stderr


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_forget_index.py):
# Review (issue 14; fixed: Engine.forget now drops the search rows first, under the turn lock, so a failure there
# leaves the session whole and a retry deletes everything). As found: Engine.forget on PostgreSQL dropped the session's search rows after its turn lock was released
# (PgIndex.drop_session), and nothing drops them later if that step fails (a lost connection, a replica stopped
# between the two): PgIndex.search reads search_sessions/search_events without asking the ledger, and only
# `retrieval rebuild` (catch_up) drops sessions that left the ledger. So the deleted session's words stay in the
# database and are returned, with their text, to whoever searches that session id — the same visitor after
# "delete my session", or a new visitor whose session starts under that id.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
def test_a_forget_whose_index_drop_fails_keeps_the_session_whole_and_a_retry_leaves_nothing_searchable(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "My passport number is Q9371X and it expires next spring")
        eng.turn(S, "What is my passport number?")

        def lost(_session: str) -> None:
            raise BackendError("PostgreSQL at …: server closed the connection unexpectedly")

        monkeypatch.setattr(stores.index, "drop_session", lost)
        with pytest.raises(BackendError):
            eng.forget(S)
        monkeypatch.undo()
        # the search rows go first, inside the turn lock: a failure there leaves the session whole, to be deleted again
        assert stores.ledger.exists(S)
        assert eng.forget(S) is True and not stores.ledger.exists(S)
        again = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)  # a restart, or another replica
        texts = [h.text for h in again.index.search(S, "passport number", 8).results]
        assert texts == [], f"the deleted session still answers searches: {texts}"


@pytest.mark.pg
def test_a_forget_session_whose_index_drop_fails_keeps_the_session_whole_and_recover_leaves_nothing_searchable(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """control.forget.forget_session runs the same deletion (control.steps.delete_session): the search rows go
    first there too, and the journal it leaves lets recover finish what the failure stopped."""
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        eng.remember(S, "My passport number is Q9371X and it expires next spring")
        eng.turn(S, "What is my passport number?")

        def lost(_session: str) -> None:
            raise BackendError("PostgreSQL at …: server closed the connection unexpectedly")

        monkeypatch.setattr(stores.index, "drop_session", lost)
        with pytest.raises(BackendError):
            forget_session(tmp_path, S, key=eng.key, stores=stores)
        monkeypatch.undo()
        assert stores.ledger.exists(S) and stores.receipts.receipt_ids(S) != []
        assert len(recover(tmp_path, key=eng.key, stores=stores)) == 1
        assert not stores.ledger.exists(S)
        again = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        texts = [h.text for h in again.index.search(S, "passport number", 8).results]
        assert texts == [], f"the deleted session still answers searches: {texts}"
