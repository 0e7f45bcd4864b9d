"""Limits set once, with the margin a receipt needs, and the same at import, append and in both verifiers.

Issue 17 §4. The event-meta depth limit is the receipt depth limit minus where a receipt holds meta
(body.memories[i].event.meta), so the deepest meta the ledger accepts can be cited; a meta one level
deeper, a text one byte longer or a meta one byte larger is refused at import and append with one line
and nothing written, and a ledger line holding one is a break in both verifier paths (so a ledger that
verifies can always be appended to). Sizes: a receipt cites only as many memories as fit its size cap,
and any one memory of the largest size the ledger accepts always fits.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from cli.prog_ledger import main as ledger_main
from ledger.canonical import MAX_DEPTH, canonical_json, check_domain
from ledger.corrupted import LedgerCorrupted
from ledger.event import (
    GENESIS,
    MAX_META_BYTES,
    MAX_META_DEPTH,
    MAX_TEXT_BYTES,
    META_NESTING_IN_RECEIPT,
    EventError,
    make_event,
)
from ledger.verify import MALFORMED_EVENT, ChainWalker, split_lines, verify_stream
from receipts import body as rbody
from storage.files.ledger.store import Ledger
from storage.files.receipts.api import verify_bytes

SESSION = "limits"


@pytest.fixture(autouse=True)
def no_groq(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROQ_API_KEY", "GROQ_MODEL", "GROQ_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def nested(levels: int, leaf: Any = 1) -> dict[str, Any]:
    """An object nested `levels` deep (the outermost object counts as one level)."""
    value: Any = leaf
    for _ in range(levels):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


def worst_text(size: int = MAX_TEXT_BYTES, word: str = "zebra") -> str:
    """`size` UTF-8 bytes, nearly all control characters: each is 6 bytes (\\u00XX) as JCS."""
    head = f"{word} "
    return head + "\x01" * (size - len(head))


def largest_meta(levels: int = MAX_META_DEPTH, size: int = MAX_META_BYTES) -> dict[str, Any]:
    """A meta `levels` deep whose canonical bytes are exactly `size`."""
    meta = nested(levels, "")
    pad = size - len(canonical_json(meta))
    return nested(levels, "x" * pad)


def import_file(tmp: Path, *messages: dict[str, Any]) -> Path:
    path = tmp / "in.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


def careful_report(data: bytes) -> tuple[bool, str | None]:
    walker = ChainWalker(SESSION)
    for raw, torn in split_lines([data]):
        brk = walker.step(raw, last=torn)
        if brk is not None:
            return False, brk.kind
    return True, None


def forged_line(meta: dict[str, Any], text: str = "hi") -> bytes:
    """A correctly hashed line the ledger's own checks would refuse (written by hand, not by append)."""
    ev = make_event(
        session=SESSION, seq=0, prev=GENESIS, role="user", text=text, meta=meta, ts="2026-01-02T03:04:05.000000Z",
        event_id="evt_" + "ab" * 16, salt=bytes(32), validated=True,
    )
    return ev.to_line()


class TestTheLimitsAreOne:
    def test_the_meta_depth_limit_is_the_receipt_limit_minus_where_a_receipt_holds_meta(self) -> None:
        assert MAX_META_DEPTH == MAX_DEPTH - META_NESTING_IN_RECEIPT == 32

    def test_a_receipt_body_holds_meta_exactly_that_deep(self) -> None:
        ev = make_event(
            session=SESSION, seq=0, prev=GENESIS, role="user", text="t", meta={"probe": 1},
            ts="2026-01-02T03:04:05.000000Z", event_id="evt_" + "cd" * 16, salt=bytes(32),
        )
        body = rbody.build_body(
            receipt_id="rcpt_" + "0" * 32, issued_at=ev.ts, session=SESSION, k=1, retrieval="r", query=ev,
            query_proof=[], memories=[(ev, [])], response=ev, response_proof=[], provider="p", model="m",
            fallback_reason=None, template="t", prompt_sha256="0" * 64, checkpoint={},
        )
        # meta objects sit at depth 4 (body 0, memories 1, [i] 2, event 3, meta 4) — and no deeper
        assert body["memories"][0]["event"]["meta"] == {"probe": 1}
        for where in (body["query"]["event"], body["response"]["event"]):
            assert where["meta"] == {"probe": 1}  # query/response meta: depth 3, shallower
        deepest = nested(MAX_META_DEPTH)
        check_domain({"memories": [{"event": {"meta": deepest}}]})  # fits MAX_DEPTH
        with pytest.raises(ValueError, match="nesting deeper"):
            check_domain({"memories": [{"event": {"meta": nested(MAX_META_DEPTH + 1)}}]})

    def test_any_one_memory_of_the_largest_accepted_size_fits_in_a_receipt(self) -> None:
        ev = make_event(
            session=SESSION, seq=0, prev=GENESIS, role="assistant", text=worst_text(), meta=largest_meta(),
            ts="2026-01-02T03:04:05.000000Z", event_id="evt_" + "ef" * 16, salt=bytes(32),
        )
        record = canonical_json(rbody.event_record(ev))
        assert len(record) <= rbody.MAX_EVENT_RECORD_BYTES
        assert len(record) > 6 * MAX_TEXT_BYTES - 100  # the reserve is not slack: the worst case is real
        assert rbody.citable(ev, [ev] * rbody.MAX_MEMORIES) >= 1
        # ...but not K of them: the engine must cap what it cites
        assert rbody.citable(ev, [ev] * rbody.MAX_MEMORIES) < rbody.MAX_MEMORIES
        assert 4 * ((rbody.MAX_PAYLOAD_BYTES + 2) // 3) + rbody.ENVELOPE_OVERHEAD <= rbody.MAX_RECEIPT_BYTES


class TestDepthBoundary:
    def test_one_import_line_nested_40_deep_is_refused_and_does_not_brick_the_session(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        data = tmp_path / "data"
        src = import_file(tmp_path, {"role": "user", "text": "ok"}, {"role": "user", "text": "deep", "meta": nested(40)})
        assert ledger_main(["import", str(data), SESSION, str(src), "--create"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "line 2" in err[0] and f"nesting deeper than {MAX_META_DEPTH}" in err[0], err
        led = Ledger(data)
        assert not led.exists(SESSION) or led.head(SESSION)[0] == 0
        led.append(SESSION, "user", "the session still works")
        assert led.verify(SESSION).ok

    @pytest.mark.parametrize("levels", [MAX_META_DEPTH + 1, 40])
    def test_meta_past_the_depth_limit_is_refused_at_append(self, tmp_path: Path, levels: int) -> None:
        led = Ledger(tmp_path)
        led.append(SESSION, "user", "first")
        size = led.log_path(SESSION).stat().st_size
        with pytest.raises(EventError, match=f"nesting deeper than {MAX_META_DEPTH}"):
            led.append(SESSION, "user", "deep", nested(levels))
        assert led.log_path(SESSION).stat().st_size == size

    @pytest.mark.parametrize("levels", [MAX_META_DEPTH + 1, 40])
    def test_a_line_past_the_depth_limit_is_a_break_on_both_paths_and_refuses_appends(
        self, tmp_path: Path, levels: int
    ) -> None:
        line = forged_line(nested(levels))
        assert verify_stream(SESSION, [line]).brk is not None
        assert verify_stream(SESSION, [line]).brk.kind == MALFORMED_EVENT  # type: ignore[union-attr]
        assert careful_report(line) == (False, MALFORMED_EVENT)
        led = Ledger(tmp_path)
        led.session_dir(SESSION).mkdir(parents=True)
        led.log_path(SESSION).write_bytes(line)
        assert not led.verify(SESSION).ok
        with pytest.raises(LedgerCorrupted, match=MALFORMED_EVENT):
            Ledger(tmp_path).append(SESSION, "user", "after")

    def test_meta_at_the_depth_limit_imports_verifies_appends_and_is_cited_in_a_verified_receipt(
        self, tmp_path: Path
    ) -> None:
        data = tmp_path / "data"
        line = forged_line(nested(MAX_META_DEPTH))
        assert verify_stream(SESSION, [line]).ok and careful_report(line) == (True, None)
        src = import_file(
            tmp_path,
            {"role": "user", "text": "my llama is called Pablo", "meta": nested(MAX_META_DEPTH)},
            {"role": "assistant", "text": "noted"},
        )
        assert ledger_main(["import", str(data), SESSION, str(src), "--create"]) == 0
        assert Ledger(data).verify(SESSION).ok
        engine = Engine(data, llm=LLM(api_key=""))
        turn = engine.turn(SESSION, "what is my llama called?", k=5)
        cited = [m["event"]["meta"] for m in turn.body["memories"]]
        assert nested(MAX_META_DEPTH) in cited
        report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[engine.key.public_key], data_dir=data)
        assert report.verdict == "verified", [c.to_dict() for c in report.failed]
        Ledger(data).append(SESSION, "user", "and after it")
        assert Ledger(data).verify(SESSION).ok


class TestSizeBoundary:
    @pytest.mark.parametrize(
        ("text", "meta", "what"),
        [
            (worst_text(MAX_TEXT_BYTES + 1), {}, f"over the limit of {MAX_TEXT_BYTES}"),
            ("é" * (MAX_TEXT_BYTES // 2) + "x", {}, f"over the limit of {MAX_TEXT_BYTES}"),
            ("hi", largest_meta(size=MAX_META_BYTES + 1), f"over the limit of {MAX_META_BYTES}"),
        ],
        ids=["text-escaped-6x-one-byte-over", "text-2-byte-chars-one-byte-over", "meta-one-byte-over"],
    )
    def test_one_past_a_size_limit_is_refused_at_import_and_append_and_is_a_break_in_both_verifiers(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, meta: dict[str, Any], what: str
    ) -> None:
        data = tmp_path / "data"
        src = import_file(tmp_path, {"role": "user", "text": text, "meta": meta})
        assert ledger_main(["import", str(data), SESSION, str(src), "--create"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and what in err[0], err
        led = Ledger(data)
        with pytest.raises(EventError, match=what):
            led.append(SESSION, "user", text, meta)
        assert not led.exists(SESSION) or led.log_path(SESSION).stat().st_size == 0
        line = forged_line(meta, text)
        assert verify_stream(SESSION, [line]).brk is not None and careful_report(line) == (False, MALFORMED_EVENT)
        assert verify_stream(SESSION, [line]).brk.kind == MALFORMED_EVENT  # type: ignore[union-attr]

    def test_fifty_memories_of_the_largest_size_give_a_receipt_that_fits_and_verifies(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        rows = [
            {"role": "user", "text": worst_text(word=f"zebra{i} zebra"), "meta": largest_meta()} for i in range(rbody.MAX_MEMORIES)
        ]
        src = import_file(tmp_path, *rows)
        assert ledger_main(["import", str(data), SESSION, str(src), "--create"]) == 0
        assert Ledger(data).verify(SESSION).ok
        engine = Engine(data, llm=LLM(api_key=""))
        turn = engine.turn(SESSION, "zebra", k=rbody.MAX_MEMORIES)
        raw = turn.receipt_path.read_bytes()
        cited = len(turn.body["memories"])
        assert 1 <= cited < rbody.MAX_MEMORIES and len(turn.hits) == cited
        assert len(raw) <= rbody.MAX_RECEIPT_BYTES
        assert len(base64.b64decode(json.loads(raw)["payload"])) <= rbody.MAX_PAYLOAD_BYTES
        report = verify_bytes(raw, trusted=[engine.key.public_key], data_dir=data)
        assert report.verdict == "verified", [c.to_dict() for c in report.failed]
        Ledger(data).append(SESSION, "user", "and after it")
        assert Ledger(data).verify(SESSION).ok
