"""Reviewer finding (issue 28 item 1, chat.withheld): the rule withholds every *assistant* line after a revoked event
that no turn's cites account for (it may repeat anything said before it), but not a *system* line imported after it
(`ledger import --allow-system`), which may repeat it just as well and is indexed and retrieved like any memory: once
the visitor revokes the statement, the imported system line that repeats it still reaches the model."""

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


def test_an_imported_system_line_repeating_a_revoked_statement_is_in_no_request(model: LoggingModel, tmp_path: Path) -> None:
    eng = Engine(tmp_path / "d", llm=model.llm(api_key=KEY))
    try:
        lines = [
            json.dumps({"role": "user", "text": f"my locker code word is {MARKER}"}).encode(),
            json.dumps({"role": "system", "text": f"Summary so far: the locker code word is {MARKER}."}).encode(),
        ]
        eng.ledger.import_jsonl("s1", lines, allow_system=True)
        eng.index.index_session("s1")
        revoke(eng.data_dir, "s1", 0, stores=eng.stores, key=eng.key)
        model.requests.clear()
        eng.turn("s1", "what is my locker code word?")
        _absent(model, MARKER)
    finally:
        eng.close()
