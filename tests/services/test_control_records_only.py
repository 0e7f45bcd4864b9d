"""Control records come only from the control commands (issue 28, item 5), on both backends.

`ledger import` (with or without --allow-system) refuses any line that ledger.supersessions.is_control_record /
supersession_of recognise, or that looks like a control, supersession or erasure record (docs/FORMAT.md §4.4, §17,
§19: their reserved texts, or a system line whose meta carries their keys), naming the line; nothing is imported.
A supersession whose `new` is not a user statement is refused on append (control.supersession.supersede) and is no
supersession when a ledger holds one (the control state does not fold it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chat.engine import Engine
from chat.llm import LLM
from control import revocation
from control.state import derive
from control.supersession import SupersedeError, current_supersessions, history, supersede, superseded_seqs
from ledger.controls import CONTROL_TEXTS, RESTORE, REVOKE, control_meta
from ledger.messages import ImportError_, parse_import
from ledger.supersessions import SUPERSEDE_TEXT, VISITOR, is_control_record, supersession_meta
from storage.files.ledger.store import Ledger
from storage.stores import Stores, file_stores, pg_stores

ROOT = Path(__file__).resolve().parents[2]
S = "alice"
ID0, ID1 = "evt_" + "0" * 32, "evt_" + "1" * 32


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "ledger", *args], capture_output=True, text=True, cwd=ROOT, timeout=120, env=full)


# -- the lines an import must refuse -----------------------------------------------------------------------------
EXACT: dict[str, dict[str, Any]] = {  # what is_control_record recognises, at line 3 (seq 2) of the file
    "revoke": {"role": "system", "text": CONTROL_TEXTS[REVOKE], "meta": control_meta(REVOKE, 0, ID0, None)},
    "restore": {"role": "system", "text": CONTROL_TEXTS[RESTORE], "meta": control_meta(RESTORE, 0, ID0, None)},
    "supersede": {
        "role": "system", "text": SUPERSEDE_TEXT,
        "meta": supersession_meta(new_seq=1, new_id=ID1, old_seq=0, old_id=ID0, decided_by=VISITOR),
    },
}
LOOKALIKE: dict[str, dict[str, Any]] = {  # not exactly a record, but shaped like one
    "erasure text": {"role": "system", "text": "[erasure record: 1 event(s) erased]", "meta": {}},
    "erasure meta": {"role": "system", "text": "a note", "meta": {"erasure": {"v": 1, "erased": [], "reason": None}}},
    "revoke text, other meta": {"role": "system", "text": CONTROL_TEXTS[REVOKE], "meta": {"note": 1}},
    "control meta, other text": {"role": "system", "text": "a note", "meta": control_meta(REVOKE, 0, ID0, None)},
    "supersession meta, other text": {"role": "system", "text": "a note", "meta": supersession_meta(new_seq=1, new_id=ID1, old_seq=0, old_id=ID0, decided_by=VISITOR)},
    "supersede text as a user": {"role": "user", "text": SUPERSEDE_TEXT},
    "erasure text as an assistant": {"role": "assistant", "text": "[erasure record: 2 event(s) erased]"},
}
USERS = [{"role": "user", "text": "I live in Quuxborough"}, {"role": "user", "text": "we moved to Bristol, so I live there now"}]


def test_the_crafted_lines_are_exactly_what_the_control_state_recognises() -> None:
    for name, row in EXACT.items():
        assert is_control_record(row["role"], row["text"], row["meta"], 2), name


def _file(tmp_path: Path, row: dict[str, Any]) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [*USERS, row]))
    return src


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """(the DATA argument of `ledger import`, its environment) for each backend."""
    if request.param == "files":
        return str(tmp_path / "data"), {}
    url = request.getfixturevalue("pg_url")
    return url, {}


def _exists(data: str, session: str) -> bool:
    if data.startswith("postgresql://"):
        from storage.pg.ledger import PgLedger

        led = PgLedger(data)
        try:
            return led.exists(session)
        finally:
            led.close()
    return Ledger(data).exists(session)


@pytest.mark.parametrize("allow_system", [True, False], ids=["allow-system", "default"])
@pytest.mark.parametrize("name", [*EXACT, *LOOKALIKE])
def test_import_refuses_a_line_that_is_or_looks_like_a_control_or_erasure_record_naming_it(
    tmp_path: Path, target: tuple[str, dict[str, str]], name: str, allow_system: bool
) -> None:
    data, env = target
    row = EXACT.get(name) or LOOKALIKE[name]
    done = run_cli("import", "--create", data, S, str(_file(tmp_path, row)), *(["--allow-system"] if allow_system else []), env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 3" in lines[0] and "nothing was imported" in lines[0], done.stderr
    assert "record" in lines[0] and "control commands" in lines[0], lines[0]
    assert not _exists(data, S)


def test_the_library_import_refuses_them_too(tmp_path: Path) -> None:
    for row in [*EXACT.values(), *LOOKALIKE.values()]:
        raw = [json.dumps(r).encode() for r in [*USERS, row]]
        with pytest.raises(ImportError_) as err:
            parse_import(raw, allow_system=True)
        assert err.value.line == 3
        with pytest.raises(ImportError_) as err:
            Ledger(tmp_path).import_jsonl(S, raw, allow_system=True)  # the bulk encoder's fast path
        assert err.value.line == 3
    assert not Ledger(tmp_path).exists(S)


def test_an_ordinary_system_line_still_imports_with_allow_system(tmp_path: Path) -> None:
    src = _file(tmp_path, {"role": "system", "text": "the person prefers short answers", "meta": {"note": 1}})
    done = run_cli("import", "--create", str(tmp_path / "data"), S, str(src), "--allow-system")
    assert done.returncode == 0, done.stderr
    assert [e.role for e in Ledger(tmp_path / "data").events(S)] == ["user", "user", "system"]


# -- a supersession's `new` is a user statement ------------------------------------------------------------------
@dataclass
class Deployment:
    kind: str
    data: Path
    stores: Stores


@pytest.fixture(params=["files", pytest.param("pg", marks=pytest.mark.pg)])
def dep(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deployment]:
    data = tmp_path / "data"
    data.mkdir()
    if request.param == "files":
        stores = file_stores(data)
    else:
        stores = pg_stores(request.getfixturevalue("pg_url"), data, pool_size=2)
    Engine(data, llm=LLM(api_key=""), stores=stores).remember(S, "I live in Quuxborough")  # seq 0
    try:
        yield Deployment(request.param, data, stores)
    finally:
        stores.close()


def test_supersede_refuses_a_new_event_that_is_not_a_user_statement(dep: Deployment) -> None:
    led = dep.stores.ledger
    answer = led.append(S, "assistant", "you live in Bristol now")
    note = led.append(S, "system", "the person prefers short answers")
    for new in (answer, note):
        before = led.head(S)
        with pytest.raises(SupersedeError, match="not a user statement"):
            supersede(dep.data, S, new.seq, 0, stores=dep.stores)
        assert led.head(S) == before  # nothing appended
    assert superseded_seqs(dep.data, S, stores=dep.stores) == {}


def test_a_recorded_supersession_whose_new_is_not_a_user_statement_is_no_supersession(dep: Deployment) -> None:
    led = dep.stores.ledger
    old = led.read_events(S, [0])[0]
    answer = led.append(S, "assistant", "you live in Bristol now")
    meta = supersession_meta(new_seq=answer.seq, new_id=answer.id, old_seq=0, old_id=old.id, decided_by=VISITOR)
    led.append(S, "system", SUPERSEDE_TEXT, meta)  # as an imported or hand-made ledger might hold it
    assert current_supersessions(led, S).superseded == {}
    assert superseded_seqs(dep.data, S, stores=dep.stores) == {}
    assert [h.state for h in history(dep.data, S, 0, stores=dep.stores)] == ["live"]
    user = led.append(S, "user", "we moved to Bristol, so I live there now")
    supersede(dep.data, S, user.seq, 0, stores=dep.stores)  # a user statement still supersedes it
    assert superseded_seqs(dep.data, S, stores=dep.stores) == {0: user.seq}


def test_a_fresh_process_derives_the_same_on_files(tmp_path: Path) -> None:
    """The state derived from the file alone (no cache of this process, no control-state.json) ignores it too."""
    data = tmp_path / "data"
    led = Ledger(data)
    old = led.append(S, "user", "I live in Quuxborough")
    answer = led.append(S, "assistant", "you live in Bristol now")
    led.append(S, "system", SUPERSEDE_TEXT, supersession_meta(new_seq=answer.seq, new_id=answer.id, old_seq=old.seq, old_id=old.id, decided_by=VISITOR))
    code = (
        "import sys; from storage.files.ledger.store import Ledger; from control.supersession import current_supersessions;"
        f"print(len(current_supersessions(Ledger(sys.argv[1]), {S!r}).links))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(data)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_a_control_state_file_written_before_the_rule_is_not_trusted(tmp_path: Path) -> None:
    """control-state.json written by the code before this rule may hold a link whose `new` is not a user statement:
    such a file (version 1) is derived again, so the link goes."""
    import hashlib

    import orjson

    from control import revocation, state_file
    from control.state import ControlState
    from storage.files.ledger import control_scan

    data = tmp_path / "data"
    led = Ledger(data)
    old = led.append(S, "user", "I live in Quuxborough")
    answer = led.append(S, "assistant", "you live in Bristol now")
    led.append(S, "system", SUPERSEDE_TEXT, supersession_meta(new_seq=answer.seq, new_id=answer.id, old_seq=old.seq, old_id=old.id, decided_by=VISITOR))
    stale = ControlState()
    for ev in led.events(S):
        stale.apply(ev)  # folded as the old code did: no role asked
    assert len(stale.supersessions.links) == 1
    with open(led.log_path(S), "rb") as f:
        raw = f.read()
    start = raw.rstrip(b"\n").rfind(b"\n") + 1
    body = orjson.loads(state_file.encode(state_file.Saved(stale, start, len(raw))).partition(b"\n")[0])
    body["v"] = 1
    line = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    control_scan.state_path(led.session_dir(S)).write_bytes(line + b"\n" + hashlib.sha256(line).hexdigest().encode() + b"\n")
    revocation._cache.clear()  # a fresh process: only the file and the log
    assert current_supersessions(Ledger(data), S).links == []


def test_a_turn_over_such_a_record_hands_the_memory_on_and_its_receipt_verifies_with_the_ledger(tmp_path: Path) -> None:
    """The app serves the older statement as live (the record is none); the verifier, checking the ledger's states,
    agrees: a record whose `new` is not a user statement supersedes nothing there either."""
    from storage.files.receipts.api import verify_bytes

    data = tmp_path / "data"
    eng = Engine(data, llm=LLM(api_key=""))
    old = eng.remember(S, "my dev server port is 47113")
    answer = eng.ledger.append(S, "assistant", "your dev server port is 8080")
    eng.ledger.append(S, "system", SUPERSEDE_TEXT, supersession_meta(new_seq=answer.seq, new_id=answer.id, old_seq=old.seq, old_id=old.id, decided_by=VISITOR))
    turn = eng.turn(S, "what is my dev server port?")
    # served live, first; the answer appended without the engine is indexed before the turn searches (issue 34: a
    # turn's search sees every event before its question) and ranks too
    assert [h.seq for h in turn.hits] == [old.seq, answer.seq]
    report = verify_bytes(turn.receipt_path.read_bytes(), trusted=[eng.key.public_key], data_dir=data)
    assert report.verdict == "verified", [(c.name, c.message) for c in report.failed]


# --------------------------------------------------------------------------------------------------------------------
# Why (was tests/test_review_pg_role_column.py):
# Review (issue 14): the control state on PostgreSQL trusts the `events.role` column, which no check reads.
#
# control.revocation.current derives a PostgreSQL session's state from the rows `WHERE role = 'system'`
# (sql.CONTROL_SYSTEM_LINES). The role column is a copy of the line's role, outside the chain: `ledger verify` and
# receipts verify --data walk the lines only. Whoever can write the table flips a revoke row's role to 'user' and the
# revoked memory is back in retrieval (and in the model's prompt), while every verification still passes; on files
# the state is derived from the line bytes themselves.
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.pg
def test_a_revoke_stays_in_force_when_its_rows_role_column_is_edited(tmp_path: Path, pg_url: str) -> None:
    with pg_stores(pg_url, tmp_path, pool_size=2) as stores:
        eng = Engine(tmp_path, llm=LLM(api_key=""), stores=stores)
        m = eng.remember(S, "The garage door code is 4455")
        eng.remember(S, "I bought a new bicycle")
        done = revocation.revoke(tmp_path, S, m.seq, stores=stores, key=eng.key)
        control_seq = stores.ledger.head(S)[0] - 1
        assert revocation.current(stores.ledger, S).revoked.keys() == {m.seq}
        with stores.database.transaction() as conn:  # type: ignore[union-attr]
            conn.execute("UPDATE events SET role = 'user' WHERE session = %s AND seq = %s", (S, control_seq))
        revocation._cache.clear()  # another replica, or this app after a restart
        assert stores.ledger.verify(S).ok  # the lines are untouched: every check passes
        from_lines = derive(list(stores.ledger.events(S)))
        state = revocation.current(stores.ledger, S)
        assert (set(from_lines.revoked), set(state.revoked)) == ({m.seq}, {m.seq}), done
        hits = [h.seq for h in stores.index.search(S, "garage door code", 8, exclude_seqs=state.excluded()).results]
        assert m.seq not in hits
