"""A model's proposal the rules do not confirm is left to a person (issue 28, item 2): never recorded as a
supersession, kept as a suggestion (control.suggestions: seqs, ids, the model's id, when; never a text) that the
person sees in `python -m control suggestions`, the app's History and MCP memory_history, and confirms by recording
the supersession themselves — recorded then as the visitor's decision. On both backends."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from cli.prog_control import main as control_main
from control.revocation import current, revoke
from control.suggestions import SUGGESTIONS_FILE, open_suggestions, suggestion_store
from control.supersession import supersede
from webui.handlers import UI
from webui.service import Service
from webui.sessions import new_session_key

from .test_facts_model_gate import BRISTOL, LEEDS, PARIS
from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel


@pytest.fixture
def greedy(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


@pytest.fixture(params=["files", pytest.param("postgresql", marks=pytest.mark.pg)])
def engine(request: pytest.FixtureRequest, tmp_path: Path, greedy: LoggingModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    from storage.stores import file_stores, pg_stores

    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    data = tmp_path / "data"
    data.mkdir()
    stores = file_stores(data) if url is None else pg_stores(url, data)
    if url is not None:
        monkeypatch.setenv("DATABASE_URL", url)
    else:
        monkeypatch.delenv("DATABASE_URL", raising=False)
    eng = Engine(stores.data_dir, stores=stores, llm=greedy.llm(api_key=KEY))
    yield eng
    eng.close()


def _three(eng: Engine, session: str = "s1") -> None:
    eng.remember(session, PARIS)  # seq 0: another subject
    eng.remember(session, LEEDS)  # seq 1: the same fact
    eng.remember(session, BRISTOL)  # seq 2: the greedy model proposes both


def test_an_unconfirmed_model_proposal_is_kept_as_a_suggestion_and_not_recorded(engine: Engine) -> None:
    _three(engine)
    held = current(engine.ledger, "s1").supersessions.superseded
    assert sorted(held) == [1]
    got = open_suggestions(engine.stores, "s1")  # Leeds (seq 1) was proposed over Paris too: another subject
    assert [(x.new_seq, x.older_seq, x.suggested_by) for x in got] == [(1, 0, "model:served-model-id"), (2, 0, "model:served-model-id")]
    assert got[1].new_id == engine.ledger.read_events("s1", [2])[0].id


def test_a_suggestion_holds_no_statement_text(engine: Engine) -> None:
    _three(engine)
    raw = json.dumps([x.to_dict() for x in suggestion_store(engine.stores).all("s1")])
    for word in ("Paris", "sister", "Bristol", "Leeds", "residence", "changed"):
        assert word not in raw


def test_the_cli_lists_it_and_confirming_records_the_visitors_decision(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    _three(engine)
    assert control_main(["suggestions", str(engine.data_dir), "s1"]) == 0
    out = capsys.readouterr().out
    assert "2 open suggestion(s)" in out and "seq 2 may supersede seq 0" in out and "Paris" not in out
    supersede(engine.data_dir, "s1", 2, 0, stores=engine.stores, key=engine.key)
    assert current(engine.ledger, "s1").supersessions.superseded[0].decided_by == "visitor"
    assert open_suggestions(engine.stores, "s1") == []
    assert control_main(["suggestions", str(engine.data_dir), "s1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_suggestion_about_a_revoked_or_forgotten_statement_is_no_longer_offered(engine: Engine) -> None:
    _three(engine)
    revoke(engine.data_dir, "s1", 0, stores=engine.stores, key=engine.key)
    assert open_suggestions(engine.stores, "s1") == []


def test_forgetting_the_session_removes_its_suggestions(engine: Engine) -> None:
    _three(engine)
    assert suggestion_store(engine.stores).all("s1")
    assert engine.forget("s1")
    assert suggestion_store(engine.stores).all("s1") == []


def test_the_cli_refuses_an_unknown_session_in_one_line(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    engine.remember("s1", LEEDS)
    assert control_main(["suggestions", str(engine.data_dir), "nobody"]) == 2
    err = capsys.readouterr().err
    assert "no such session" in err and "Traceback" not in err


def test_the_suggestions_file_is_private_whatever_the_umask(tmp_path: Path, greedy: LoggingModel) -> None:
    old = os.umask(0o022)
    try:
        eng = Engine(tmp_path / "d", llm=greedy.llm(api_key=KEY))
        _three(eng)
        path = eng.data_dir / "sessions" / "s1" / SUGGESTIONS_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        eng.close()
    finally:
        os.umask(old)


def test_the_apps_history_and_mcp_history_show_the_suggestion(tmp_path: Path, greedy: LoggingModel) -> None:
    ui = UI(Service(Engine(tmp_path / "data", llm=greedy.llm(api_key=KEY))))
    key = new_session_key()
    for text in (PARIS, LEEDS, BRISTOL):
        ui.service.remember(key, text)
    try:
        table = ui.memory_history(key, "0")
        assert "suggested that seq 2 supersedes seq 0" in table and r"model:served\-model\-id" in table and "Correct this" in table
        assert "suggested" not in UI(ui.service).memory_history(key, "0").split("| seq |")[0]  # a line of its own, after the table
    finally:
        ui.service.engine.close()
