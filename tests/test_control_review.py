"""A hostile review of forgetting (issue 10): the words of a forgotten memory must not survive in a field the
receipt's signature covers, where redaction cannot reach — a provider's error message quoted into the answer's
`fallback_reason` — and the confirmation (preview) names what forget then does."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from control import forget as control
from receipts import files

from .forget_support import MARKER, engine, files_with_marker


def _echoing_engine(data: Path) -> Any:
    """An engine whose provider error quoted the prompt (a proxy or a 400 that echoes its input): the words land in
    the signed `response.fallback_reason` of the receipt."""
    eng = engine(data)
    real = eng.llm.complete

    def complete(*args: Any, **kwargs: Any) -> Any:
        done = real(*args, **kwargs)
        said = f"Groq failed: 400 BadRequestError (request failed; server said: cannot process '{MARKER}s')"
        return dataclasses.replace(done, fallback_reason=said)

    eng.llm.complete = complete  # type: ignore[method-assign]
    return eng


def test_a_receipt_whose_signed_fallback_reason_quotes_the_forgotten_memory_is_withdrawn_not_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    eng = _echoing_engine(data)
    mem = eng.remember("alice", f"My locker code word is {MARKER}")
    eng.remember("alice", "I adopted a grey cat named Miso")
    leaky = eng.turn("alice", "What is my locker code word?")
    assert mem.seq in [h.seq for h in leaky.hits]
    eng.llm = engine(data).llm  # later answers: a plain offline stand-in, whose reason quotes nothing
    clean = eng.turn("alice", "What is my locker code word again?")
    assert mem.seq in [h.seq for h in clean.hits]
    plan = control.preview(data, "alice", [mem.seq], ledger=eng.ledger)
    assert leaky.receipt_id in plan.withdraw and leaky.receipt_id not in plan.redact
    result = control.forget(data, "alice", [mem.seq], ledger=eng.ledger, index=eng.index, key=eng.key)
    assert leaky.receipt_id in result.withdrawn and clean.receipt_id in result.redacted  # only the one that quotes it
    assert [p.stem for p in files.list_receipts(data, "alice")] == [clean.receipt_id]
    assert files_with_marker(data) == []
