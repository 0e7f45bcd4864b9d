"""Shared helpers for the benchmark scripts: LoCoMo loading, the raw baseline, machine info."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT / ".." / "shared" / "data" / "locomo10.json"
DIA_ID_RE = re.compile(r"D\d+:\d+")
RAW_TOKEN_RE = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str
    role: str
    text: str
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Question:
    conv: int
    question: str
    category: int
    gold: tuple[str, ...]


def load(path: Path = LOCOMO) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        data: list[dict[str, Any]] = json.load(f)
    return data


def turns(conv: dict[str, Any]) -> list[Turn]:
    """One turn per event, in session order then turn order (the issue's mapping)."""
    c = conv["conversation"]
    a = c["speaker_a"]
    out = []
    n = 1
    while f"session_{n}_date_time" in c or f"session_{n}" in c:
        for t in c.get(f"session_{n}", []) or []:
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [image: {t['blip_caption']}]"
            meta = {
                "dia_id": t["dia_id"],
                "speaker": t["speaker"],
                "session": n,
                "session_date": c.get(f"session_{n}_date_time", ""),
            }
            out.append(Turn(t["dia_id"], "user" if t["speaker"] == a else "assistant", text, meta))
        n += 1
    return out


def gold_ids(evidence: list[Any]) -> tuple[str, ...]:
    ids: list[str] = []
    for item in evidence:
        for part in re.split(r"[;,\s]+", str(item)):
            if DIA_ID_RE.fullmatch(part) and part not in ids:
                ids.append(part)
    return tuple(ids)


def questions(conv: dict[str, Any], i: int) -> list[Question]:
    return [Question(i, str(q["question"]), int(q["category"]), gold_ids(q.get("evidence", []))) for q in conv["qa"]]


def turn_ts(session_date: str, turn_no: int) -> str | None:
    """A ledger timestamp for a turn: its LoCoMo session's date ("1:56 pm on 8 May, 2023"), plus
    `turn_no` seconds so the session's turns keep their order. None if the date does not parse."""
    try:
        when = datetime.strptime(session_date, "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return (when + timedelta(seconds=turn_no)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def import_lines(ts: list[Turn], *, dates: bool = True) -> Iterator[bytes]:
    """One import line per turn; with `dates`, each carries its session's date as `ts` (as an
    import of a dated chat history would), so date rules can see when a turn was said."""
    for n, t in enumerate(ts):
        line: dict[str, Any] = {"role": t.role, "text": t.text, "meta": t.meta}
        stamp = turn_ts(str(t.meta.get("session_date", "")), n) if dates else None
        if stamp is not None:
            line["ts"] = stamp
        yield orjson.dumps(line)


def recall(gold: tuple[str, ...], retrieved: list[str]) -> float:
    """LoCoMo's evidence recall: |gold ∩ retrieved| / |gold|, 1.0 for an empty gold list."""
    if not gold:
        return 1.0
    got = set(retrieved)
    return sum(1 for g in gold if g in got) / len(gold)


class RawBaseline:
    """Plain FTS5: porter tokenizer, the question's words OR-ed, ORDER BY bm25, nothing else."""

    def __init__(self, texts: list[str]) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE raw USING fts5(text, tokenize='porter')")
        self.conn.executemany("INSERT INTO raw (rowid, text) VALUES (?, ?)", enumerate(texts))

    @staticmethod
    def match(question: str) -> str | None:
        words = dict.fromkeys(w.lower() for w in RAW_TOKEN_RE.findall(question))
        return " OR ".join(f'"{w}"' for w in words) or None

    def search(self, question: str, k: int) -> list[int]:
        m = self.match(question)
        if m is None:
            return []
        sql = "SELECT rowid FROM raw WHERE raw MATCH ? ORDER BY bm25(raw) LIMIT ?"
        return [r[0] for r in self.conn.execute(sql, (m, k))]


def machine() -> str:
    from bench._machine import machine_line

    return machine_line()


@contextlib.contextmanager
def pg_database(url: str | None) -> Iterator[str]:
    """`url`, or a fresh database on a throwaway server (tests/pg_support.py) for as long as the block runs."""
    if url:
        yield url
        return
    from tests import pg_support

    with pg_support.started_server() as server:
        yield pg_support.fresh_database(server)
