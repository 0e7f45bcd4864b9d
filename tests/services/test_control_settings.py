"""control.settings: a session's "ask me first" kept on the server — off by default, stored atomically and
privately, a corrupt file an error naming it (never a silent off), gone with the session; and the one-step turn
(Engine.turn, so MCP `ask` and `python -m chat`) refused while it is on, with nothing stored."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from chat.engine import Engine, InputError
from chat.llm import LLM
from cli.prog_chat import main as chat_main
from control.forget import forget, forget_session
from control.settings import (
    SETTINGS_FILE,
    ConsentRequired,
    SettingsError,
    get_consent,
    refuse_direct_turn,
    set_consent,
    settings_path,
)
from webui.retention import sweep


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return Engine(tmp_path / "data", llm=LLM(api_key=""))


def with_events(engine: Engine, session: str = "alice") -> str:
    engine.remember(session, "my dog Pip likes carrots")
    engine.remember(session, "my dog Pip snores")
    return session


class TestGetSet:
    def test_a_session_never_set_is_off(self, engine: Engine) -> None:
        assert get_consent(engine.data_dir, with_events(engine)) is False
        assert get_consent(engine.data_dir, "nobody-yet") is False

    def test_set_on_is_read_back_and_off_again(self, engine: Engine) -> None:
        s = with_events(engine)
        assert set_consent(engine.data_dir, s, True) is True
        assert get_consent(engine.data_dir, s) is True
        set_consent(engine.data_dir, s, False)
        assert get_consent(engine.data_dir, s) is False

    def test_the_setting_is_per_session(self, engine: Engine) -> None:
        a, b = with_events(engine, "alice"), with_events(engine, "bob")
        set_consent(engine.data_dir, a, True)
        assert get_consent(engine.data_dir, b) is False

    def test_the_file_is_private_and_no_temp_file_is_left(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        path = settings_path(engine.data_dir, s)
        assert path.name == SETTINGS_FILE and path.parent == engine.data_dir / "sessions" / s
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []

    def test_an_unknown_session_is_refused_in_one_line_and_nothing_is_created(self, engine: Engine) -> None:
        with pytest.raises(SettingsError, match=r"^settings: session ghost is unknown in .*data$"):
            set_consent(engine.data_dir, "ghost", True)
        assert not (engine.data_dir / "sessions" / "ghost").exists()

    def test_create_makes_a_new_sessions_private_folder_for_it(self, engine: Engine) -> None:
        set_consent(engine.data_dir, "fresh", True, create=True)
        assert get_consent(engine.data_dir, "fresh") is True
        assert stat.S_IMODE((engine.data_dir / "sessions" / "fresh").stat().st_mode) == 0o700
        assert not engine.ledger.exists("fresh")  # no events appear for it

    @pytest.mark.parametrize("bad", ["../x", "a b", "", "x" * 65])
    def test_an_invalid_session_id_is_one_line_and_touches_nothing(self, engine: Engine, bad: str) -> None:
        before = sorted(engine.data_dir.rglob("*"))
        for call in (
            lambda: get_consent(engine.data_dir, bad),
            lambda: set_consent(engine.data_dir, bad, True, create=True),
        ):
            with pytest.raises(SettingsError, match=r"^session id .*must be") as info:
                call()
            assert "\n" not in str(info.value)
        assert sorted(engine.data_dir.rglob("*")) == before

    def test_a_value_that_is_not_a_bool_is_refused(self, engine: Engine) -> None:
        with pytest.raises(SettingsError, match="true or false"):
            set_consent(engine.data_dir, with_events(engine), "yes")  # type: ignore[arg-type]


class TestCorrupt:
    @pytest.mark.parametrize(
        "raw",
        [
            b"",
            b"{not json",
            b"\xff\xfe",
            b"[]",
            b'{"consent": true}',
            b'{"consent": "yes", "v": 1}',
            b'{"consent": 1, "v": 1}',
            b'{"consent": true, "v": 2}',
            b'{"consent": false, "v": 1, "x": 0}',
            b" " * 5000,
        ],
    )
    def test_a_corrupt_file_is_an_error_naming_it_never_a_silent_off(self, engine: Engine, raw: bytes) -> None:
        s = with_events(engine)
        path = settings_path(engine.data_dir, s)
        path.write_bytes(raw)
        with pytest.raises(SettingsError) as info:
            get_consent(engine.data_dir, s)
        assert str(path) in str(info.value) and "\n" not in str(info.value)

    def test_a_corrupt_file_refuses_the_one_step_turn(self, engine: Engine) -> None:
        s = with_events(engine)
        settings_path(engine.data_dir, s).write_bytes(b"{broken")
        before = engine.ledger.head(s)[0]
        with pytest.raises(InputError, match="settings.json"):
            engine.turn(s, "what about Pip?")
        assert engine.ledger.head(s)[0] == before

    def test_setting_it_again_rewrites_a_corrupt_file(self, engine: Engine) -> None:
        s = with_events(engine)
        settings_path(engine.data_dir, s).write_bytes(b"{broken")
        set_consent(engine.data_dir, s, True)
        assert get_consent(engine.data_dir, s) is True


class TestOneStepTurn:
    def test_a_turn_on_a_session_with_consent_on_is_refused_and_nothing_is_stored(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        before = engine.ledger.head(s)[0]
        with pytest.raises(ConsentRequired, match="ask me first is on"):
            refuse_direct_turn(engine.data_dir, s)
        with pytest.raises(InputError, match=r"ask me first is on.*propose.*answer") as info:
            engine.turn(s, "what about Pip?")
        assert "\n" not in str(info.value)
        assert engine.ledger.head(s)[0] == before
        assert not (engine.data_dir / "sessions" / s / "receipts").exists() or not any(
            (engine.data_dir / "sessions" / s / "receipts").glob("*.json")
        )

    def test_propose_and_answer_still_work_with_consent_on(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        p = engine.propose(s, "what about Pip?", 8)
        turn = engine.answer(p.token, [p.candidates[0].event_id], session=s)
        assert turn.body["consent"]["approved"] == [p.candidates[0].seq]

    def test_off_again_lets_the_turn_through(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        set_consent(engine.data_dir, s, False)
        assert engine.turn(s, "what about Pip?").answer

    def test_the_cli_refuses_it_in_one_line_exit_2_and_appends_nothing(
        self, engine: Engine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("GROQ_API_KEY", raising=False)
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        before = engine.ledger.head(s)[0]
        assert chat_main([str(engine.data_dir), s, "what about Pip?"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: session alice: ask me first is on") and err.count("\n") == 1
        assert "python -m chat propose" in err
        assert Engine(engine.data_dir, llm=LLM(api_key="")).ledger.head(s)[0] == before


class TestGoesWithTheSession:
    def test_forget_session_removes_it(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        forget_session(engine.data_dir, s, ledger=engine.ledger, index=engine.index, key=engine.key)
        assert not settings_path(engine.data_dir, s).exists()
        assert get_consent(engine.data_dir, s) is False

    def test_retention_removes_it(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        old = 1_000_000_000
        os.utime(engine.ledger.log_path(s), (old, old))
        assert sweep(engine, 1.0) == [s]
        assert not (engine.data_dir / "sessions" / s).exists()

    def test_retention_removes_a_session_that_has_only_its_setting(self, engine: Engine) -> None:
        set_consent(engine.data_dir, "fresh", True, create=True)
        old = 1_000_000_000
        os.utime(engine.data_dir / "sessions" / "fresh", (old, old))
        assert sweep(engine, 1.0) == ["fresh"]
        assert not (engine.data_dir / "sessions" / "fresh").exists()

    def test_erasing_an_event_leaves_the_setting_as_it_was(self, engine: Engine) -> None:
        s = with_events(engine)
        set_consent(engine.data_dir, s, True)
        before = settings_path(engine.data_dir, s).read_bytes()
        forget(engine.data_dir, s, [0], ledger=engine.ledger, index=engine.index, key=engine.key)
        assert settings_path(engine.data_dir, s).read_bytes() == before and b"Pip" not in before
