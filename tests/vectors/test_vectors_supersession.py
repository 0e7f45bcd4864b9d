"""The committed supersession vector (docs/FORMAT.md §19) is reproduced byte for byte, verifies as a ledger,
and parses to the records and state written here by hand (not read back from the generator)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import orjson

from control.state import derive
from ledger.event import event_from_dict
from ledger.supersessions import supersession_of
from storage.files.ledger.store import Ledger

VECTORS = Path(__file__).resolve().parent


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("generate_supersession", VECTORS / "generate_supersession.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _events():  # type: ignore[no-untyped-def]
    lines = (VECTORS / "ledger_v1_supersession.jsonl").read_bytes().splitlines()
    return [event_from_dict(orjson.loads(line), n + 1) for n, line in enumerate(lines)]


def test_code_reproduces_the_committed_supersession_vector_exactly() -> None:
    files = _generator().build()
    assert set(files) == {"ledger_v1_supersession.jsonl", "ledger_v1_supersession.json"}
    for name, text in files.items():
        assert (VECTORS / name).read_text(encoding="utf-8") == text, name


def test_the_supersession_vector_verifies_as_a_ledger(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "vector-supersede"
    folder.mkdir(parents=True)
    shutil.copy(VECTORS / "ledger_v1_supersession.jsonl", folder / "events.jsonl")
    report = Ledger(tmp_path).verify("vector-supersede")
    described = json.loads((VECTORS / "ledger_v1_supersession.json").read_text())
    v = described["verify"]
    assert report.ok and (report.events, report.head, list(report.erased)) == (v["events"], v["head"], v["erased"]) == (9, v["head"], [0])


def test_the_records_parse_to_what_they_say() -> None:
    evs = _events()
    got = {ev.seq: supersession_of(ev.role, ev.text, ev.meta, ev.seq) for ev in evs}
    assert [s for s, r in got.items() if r is not None] == [3, 5, 7]
    assert [(r.new_seq, r.old_seq, r.decided_by, r.checked_by, r.reason) for r in got.values() if r is not None] == [
        (2, 0, "rule:same-attribute", None, "residence changed"),
        (4, 1, "visitor", None, None),
        (6, 2, "model:vector-model", "rule:shortlist", "new residence"),
    ]
    assert all(got[s] is not None and got[s].old_id == evs[got[s].old_seq].id and got[s].new_id == evs[got[s].new_seq].id for s in (3, 5, 7))  # type: ignore[union-attr]


def test_the_derived_state_survives_the_older_statement_being_forgotten() -> None:
    evs = _events()
    assert evs[0].erased and b"Leeds" not in (VECTORS / "ledger_v1_supersession.jsonl").read_bytes()
    state = derive(evs).supersessions
    assert {s: x.new_seq for s, x in state.superseded.items()} == {0: 2, 1: 4, 2: 6}
    assert state.history(0) == state.history(6) == [0, 2, 6] and state.history(4) == [1, 4]
    assert (state.live(0), state.live(1), state.live(6)) == (6, 4, 6)
