"""No forgotten word from the receipts CLI while an erasure of the session stopped half way (issue 28 item 3): `show`
of a stored receipt (DATA_DIR/sessions/<S>/receipts/rcpt_*.json) finishes it first (control.settle; the reviewer's
test, below) or refuses in one line when it cannot be finished now; `verify` (offline or with
--data, text, --rows or --json) prints no text of the receipt, so it stays a read-only check (a guard: it held before
`show` was fixed). Files backend: the commands read a file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM, Completion
from cli.prog_receipts import main as receipts_main
from control import forget as cf
from control import settle as control_settle
from control import steps
from webui.sessions import new_session_key, session_id

from ..forget_support import NEEDLES, marked_session


class QuietLLM(LLM):
    def complete(self, messages: list[dict[str, str]], **kw: Any) -> Completion:
        return dataclasses.replace(super().complete(messages, **kw), text="Noted; I kept what you told me in mind.")


def io_error(*_a: object, **_k: object) -> None:
    raise OSError(5, "Input/output error")


def half_erased(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, list[Path]]:
    """A data directory whose session's erasure stopped after the ledger forgot (an I/O error on the receipts)."""
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
    assert cf.pending(data)
    receipts = sorted((data / "sessions" / session / "receipts").glob("rcpt_*.json"))
    assert receipts and any(any(n in p.read_bytes().lower() for n in NEEDLES) for p in receipts), "a stored receipt still quotes the word"
    return data, session, receipts


@pytest.mark.parametrize("with_data", [False, True], ids=["offline", "with-data"])
def test_receipts_verify_prints_no_forgotten_word_while_an_erasure_is_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], with_data: bool
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data, _session, receipts = half_erased(tmp_path, monkeypatch)
    for path, mode in [(p, m) for p in receipts for m in (["--rows"], ["--json"])]:
        capsys.readouterr()
        receipts_main(["verify", str(path), *mode, *(["--data", str(data)] if with_data else [])])
        out = capsys.readouterr()
        printed = (out.out + out.err).lower().encode()
        assert not any(n in printed for n in NEEDLES), f"{path.name}: a forgotten word was printed"
    assert cf.pending(data), "verify reads; it changes nothing"

def test_receipts_show_refuses_in_one_line_when_the_erasure_cannot_be_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    data, session, receipts = half_erased(tmp_path, monkeypatch)
    monkeypatch.setattr(control_settle, "recover", io_error)  # the disk still fails
    for extra in ([], ["--json"]):
        capsys.readouterr()
        code = receipts_main(["show", str(receipts[0]), *extra])
        out = capsys.readouterr()
        assert code == 2, extra
        assert out.out == "", extra
        assert out.err.count("\n") == 1 and session in out.err and "erasure" in out.err, out.err
        assert not any(n in (out.out + out.err).lower().encode() for n in NEEDLES)
    assert cf.pending(data), "nothing was finished, nothing lost: the journal stays for the next try"


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review5_receipts_show_pending.py):
# Reviewer finding (issue 28 item 3): `python -m receipts show` on a stored receipt of a session whose erasure
# stopped half way (journal DATA_DIR/erasures/.pending-<session>.json present) prints the forgotten word: it neither
# finishes the erasure (control.settle) nor refuses. The receipt's path names its data directory and session
# (DATA_DIR/sessions/<S>/receipts/rcpt_*.json), so the command can tell. Files backend (the command reads a file).
# --------------------------------------------------------------------------------------------------------------------


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
