"""`python -m retrieval` through a subprocess: output formats and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.messages import Message
from storage.files.ledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *args], capture_output=True, text=True, env=env, timeout=60, cwd=ROOT
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    ledger = Ledger(tmp)
    filler = ["the weather in Lisbon", "train to Porto", "ramen for lunch", "a novel about sailors"]
    texts = ["a red kayak", *filler, "kayak lessons on Sunday", *filler]  # apart, so neighbours do not match
    ledger.append_many("s1", [Message("user", t, {"i": i}) for i, t in enumerate(texts)])
    ledger.append_many("s2", [Message("user", "kayak elsewhere", {})])
    return tmp


def test_rebuild_prints_a_summary_line_and_no_progress_bar_off_a_terminal(data_dir: Path) -> None:
    r = run("rebuild", str(data_dir))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("rebuilt ") and "2 sessions, 11 events" in r.stdout
    assert r.stderr == ""


def test_search_prints_a_table(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "kayak")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["rank", "seq", "role"]
    assert "kayak" in lines[1] and "kayak" in lines[2] and len(lines) > 3  # direct matches, then neighbours


def test_search_json_is_one_object_scoped_to_the_session(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "kayak", "-k", "1", "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["k"] == 1 and len(obj["results"]) == 1 and obj["results"][0]["session"] == "s1"
    assert set(obj["results"][0]) >= {"event_id", "seq", "digest", "chain", "bm25", "collapse", "score", "rank"}


def test_zero_results_exit_zero(data_dir: Path) -> None:
    r = run("search", str(data_dir), "s1", "zeppelin", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["results"] == []


def test_batch_mode_prints_one_json_line_per_query_in_order(data_dir: Path, tmp_path: Path) -> None:
    qfile = tmp_path / "q.txt"
    qfile.write_text("kayak\n\nPorto?\nAND OR NOT\n", encoding="utf-8")
    r = run("search", str(data_dir), "s1", "--queries", str(qfile), "-k", "5")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["query"] for row in rows] == ["kayak", "", "Porto?", "AND OR NOT"]
    assert [len(row["results"]) for row in rows] == [5, 0, 5, 0]
    assert "Porto" in rows[2]["results"][0]["text"] and rows[1]["reason"] == "the query is empty"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{d}", "nobody", "kayak"], "no such session"),
        (["search", "{d}", "../x", "kayak"], "session id"),
        (["search", "{d}", "s1", "kayak", "-k", "0"], "k 0"),
        (["search", "{d}", "s1", "kayak", "-k", "51"], "k 51"),
        (["search", "{d}", "s1", "kayak", "-k", "many"], "invalid int"),
        (["search", "{d}", "s1"], "either QUERY or --queries"),
        (["search", "{d}", "s1", "--queries", "{d}/missing.txt"], "cannot read"),
        (["search", "{d}/missing", "s1", "kayak"], "not a directory"),
        (["rebuild", "{d}/missing"], "not a directory"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_unusable_arguments_exit_2_without_a_traceback(data_dir: Path, args: list[str], message: str) -> None:
    r = run(*[a.format(d=data_dir) for a in args])
    assert r.returncode == 2
    assert message in r.stderr and "error: " in r.stderr
    assert "Traceback" not in r.stderr


def test_an_unreadable_ledger_exits_2(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append("s", "user", "hello kayak")
    path = ledger.log_path("s")
    path.write_bytes(path.read_bytes().replace(b"kayak", b"kayaq") + b'{"v":1}\n')
    r = run("search", str(tmp_path), "s", "kayak")
    assert r.returncode == 2 and "ledger is corrupted" in r.stderr and "Traceback" not in r.stderr


# -- revoked memories (issue 11; FORMAT.md §17): left out, or shown labelled with --include-revoked -----------------
@pytest.fixture(scope="module")
def revoked_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    import control

    tmp = tmp_path_factory.mktemp("revoked")
    Ledger(tmp).append_many("s1", [Message("user", t, {}) for t in ("a red kayak", "train to Porto", "kayak lessons on Sunday")])
    return tmp, control.revoke(tmp, "s1", 0).control_seq


def _seqs(stdout: str) -> dict[int, object]:
    return {h["seq"]: h["revoked_by"] for h in json.loads(stdout)["results"]}


def test_search_leaves_revoked_memories_and_control_records_out(revoked_dir: tuple[Path, int]) -> None:
    data, _control = revoked_dir
    r = run("search", str(data), "s1", "kayak", "--json")
    assert r.returncode == 0, r.stderr
    found = _seqs(r.stdout)
    assert 2 in found and 0 not in found and set(found.values()) == {None}
    r = run("search", str(data), "s1", "control record revoke", "--json", "--include-revoked")
    assert r.returncode == 0 and json.loads(r.stdout)["results"] == []


def test_include_revoked_shows_them_labelled_as_the_app_labels_them(revoked_dir: tuple[Path, int]) -> None:
    from webui.render import revoked_label

    data, control_seq = revoked_dir
    r = run("search", str(data), "s1", "kayak", "--include-revoked")
    assert r.returncode == 0, r.stderr
    rows = {int(line.split()[1]): line for line in r.stdout.splitlines()[1:] if line.split()[0].isdigit()}
    assert {0, 2} <= set(rows)
    assert revoked_label(control_seq) + "a red kayak" in rows[0]
    assert [s for s, line in rows.items() if "revoked" in line] == [0]
    r = run("search", str(data), "s1", "kayak", "--include-revoked", "--json")
    found = _seqs(r.stdout)
    assert found[0] == control_seq and {s for s, by in found.items() if by is not None} == {0}


def test_batch_mode_leaves_revoked_memories_out_unless_asked(revoked_dir: tuple[Path, int], tmp_path: Path) -> None:
    data, control_seq = revoked_dir
    qfile = tmp_path / "q.txt"
    qfile.write_text("kayak\n", encoding="utf-8")
    plain = json.loads(run("search", str(data), "s1", "--queries", str(qfile)).stdout)
    shown = json.loads(run("search", str(data), "s1", "--queries", str(qfile), "--include-revoked").stdout)
    assert 0 not in [h["seq"] for h in plain["results"]]
    assert {h["seq"]: h["revoked_by"] for h in shown["results"]}[0] == control_seq
