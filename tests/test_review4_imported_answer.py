"""Reviewer finding (issue 28, item 1; low): the "may quote" closure is built from turns' cites only. A conversation
imported into a session (`python -m ledger import`, Ledger.import_jsonl) brings assistant lines that repeat the
user's words but that no turn cited; once the visitor revokes the user's statement, the imported assistant line that
repeats it still reaches the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat.engine import Engine
from control.revocation import revoke

from .test_llm import KEY, clear_groq_env, serving
from .test_model_withheld import LoggingModel, _absent

MARKER = "Quuxborough"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingModel]:
    clear_groq_env(monkeypatch)
    with serving(LoggingModel()) as server:
        yield server


def test_an_imported_reply_repeating_a_revoked_statement_is_in_no_request(model: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        lines = [
            json.dumps({"role": "user", "text": f"my locker code word is {MARKER}"}).encode(),
            json.dumps({"role": "assistant", "text": f"Got it: your locker code word is {MARKER}."}).encode(),
        ]
        eng.ledger.import_jsonl("s1", lines)
        eng.index.index_session("s1")
        revoke(eng.data_dir, "s1", 0, stores=eng.stores, key=eng.key)
        model.requests.clear()
        eng.turn("s1", "what is my locker code word?")
        _absent(model, MARKER)
    finally:
        eng.close()
