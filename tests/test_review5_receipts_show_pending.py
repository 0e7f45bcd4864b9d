"""Reviewer finding (issue 28 item 3): `python -m receipts show` on a stored receipt of a session whose erasure
stopped half way (journal DATA_DIR/erasures/.pending-<session>.json present) prints the forgotten word: it neither
finishes the erasure (control.settle) nor refuses. The receipt's path names its data directory and session
(DATA_DIR/sessions/<S>/receipts/rcpt_*.json), so the command can tell. Files backend (the command reads a file)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM, Completion
from cli.prog_receipts import main as receipts_main
from control import forget as cf
from control import steps
from webui.sessions import new_session_key, session_id

from .forget_support import NEEDLES, marked_session


class QuietLLM(LLM):
    def complete(self, messages: list[dict[str, str]], **kw: Any) -> Completion:
        return dataclasses.replace(super().complete(messages, **kw), text="Noted; I kept what you told me in mind.")


def io_error(*_a: object, **_k: object) -> None:
    raise OSError(5, "Input/output error")


def test_receipts_show_copies_no_forgotten_word_while_an_erasure_is_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    eng = Engine(data, llm=QuietLLM(api_key=""))
    try:
        session = session_id(new_session_key())
        mem, _turns = marked_session(eng, session)
        with monkeypatch.context() as mp:
            mp.setattr(steps, "apply_receipts", io_error)
            with pytest.raises(OSError):
                cf.forget(data, session, [mem], cascade=False, stores=eng.stores, key=eng.key)
    finally:
        eng.close()
    assert cf.pending(data), "the journal stays after the I/O error"
    receipts = sorted((data / "sessions" / session / "receipts").glob("rcpt_*.json"))
    assert receipts
    capsys.readouterr()
    code = receipts_main(["show", str(receipts[0])])
    out = capsys.readouterr()
    printed = (out.out + out.err).lower().encode()
    # finished first (no word, journal gone) or refused (exit 2, one line): either way no forgotten word is printed
    assert not any(n in printed for n in NEEDLES), f"exit {code}: the forgotten word was printed"
