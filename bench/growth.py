"""Growth curves (issue 15): how search, a turn, the CLI, import and verification scale with a session's size,
each beside a raw baseline measured in the same run, drawn as PNGs under bench/plots/.

    python bench/growth.py run [--sizes 1000,10000,100000,1000000] [--label NAME] [--out DIR] [--queries 200]
    python bench/growth.py plot RESULT.json [RESULT.json ...]      # draw bench/plots/*.png from saved runs

`run` builds, per size N, one session of N events made of real LoCoMo sentences recombined (1-3 sentences of
random turns, a random LoCoMo speaker; seeded), and measures:

  import        Ledger.import_jsonl of the N lines (parse, validate, salt, hash, chain, write, fsync), as
                `python -m ledger import` does;  raw: write the same N serialised lines and fsync once
  verify        a cold Ledger(d).verify(s): every digest and chain hash from genesis;  raw: parse each line
                (orjson) and compute two sha256 per line, one process
  index         the first Index.index_session (what the first search after an import waits for);
                raw: a plain FTS5 table (porter) of the same texts
  search        Index.search(s, question, k=8) for LoCoMo questions, p50 / p95;  raw: the question's words OR-ed,
                MATCH ... ORDER BY bm25 LIMIT 8 on the raw table
  cli search    `python -m retrieval search DATA s QUESTION` in a fresh process, minus the same interpreter
                importing the same modules (`python -c "import cli.prog_retrieval"`): what a CLI user waits beyond
                start-up, p50 / p95 over --cli-runs; before them a writer saves the control state once, as the
                app or any turn leaves it (control_first_ms: that derivation)
  turn          Engine.turn with the offline stand-in (no Groq key): retrieval, prompt, the answer and question
                appended with fsync, the receipt signed with its Merkle proofs and written; p50 / p95 after one
                warm-up turn;  raw: the raw search, two ~600-byte lines appended with an fsync each, and a
                receipt-sized file written and fsynced

Results go to DIR/growth-<label>.json (default bench/out/, git-ignored; pass the JSON files of several labels,
e.g. the code before issue 15 via PYTHONPATH, to `plot` to draw them side by side). The script imports only the
project's public API (Ledger, Index, Engine, LLM), so `PYTHONPATH=/tmp/old-mre python bench/growth.py run
--label before` measures older code with the same driver.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.append(str(ROOT))  # appended, not first: PYTHONPATH (older code) wins for the project's packages
if sys.path and Path(sys.path[0]).resolve() == HERE:
    sys.path.pop(0)  # the script's folder would shadow the `bundle` package with bench/bundle.py

LOCOMO = ROOT / ".." / "shared" / "data" / "locomo10.json"
PLOTS = HERE / "plots"
SESSION = "s"
K = 8
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
WORD_RE = re.compile(r"[^\W_]+")


# -- data ------------------------------------------------------------------------------------------------------------
def locomo() -> tuple[list[str], list[str], list[str]]:
    """(sentences, speakers, questions) of the LoCoMo conversations."""
    data = json.loads(LOCOMO.read_text("utf-8"))
    sentences: list[str] = []
    speakers: set[str] = set()
    questions: list[str] = []
    for conv in data:
        c = conv["conversation"]
        for key, turns in c.items():
            if not key.startswith("session_") or key.endswith("date_time") or not isinstance(turns, list):
                continue
            for t in turns:
                speakers.add(t["speaker"])
                sentences.extend(s for s in SENTENCE_RE.split(t.get("text", "")) if s)
        questions.extend(str(q["question"]) for q in conv.get("qa", []) if q.get("question"))
    return sentences, sorted(speakers), questions


def texts(n: int, sentences: list[str], speakers: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        body = " ".join(rng.choice(sentences) for _ in range(rng.choice((1, 1, 2, 2, 3))))
        out.append(f"{rng.choice(speakers)}: {body}")
    return out


def jsonl(items: list[str]) -> list[bytes]:
    return [orjson.dumps({"role": "user" if i % 2 == 0 else "assistant", "text": t}) + b"\n" for i, t in enumerate(items)]


# -- timing ----------------------------------------------------------------------------------------------------------
def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def each_ms(fn: Callable[[Any], Any], items: list[Any]) -> list[float]:
    out = []
    for x in items:
        t = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t) * 1000)
    return out


def match(question: str) -> str | None:
    words = dict.fromkeys(w.lower() for w in WORD_RE.findall(question))
    return " OR ".join(f'"{w}"' for w in words) or None


def raw_search(conn: sqlite3.Connection, question: str) -> list[int]:
    m = match(question)
    if m is None:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM raw WHERE raw MATCH ? ORDER BY bm25(raw) LIMIT ?", (m, K))]


def raw_import(lines: list[bytes], path: Path) -> float:
    t = time.perf_counter()
    with open(path, "wb") as f:
        for i in range(0, len(lines), 65536):
            f.write(b"".join(lines[i : i + 65536]))
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.perf_counter() - t
    path.unlink()
    return elapsed


def raw_verify(path: Path) -> float:
    t = time.perf_counter()
    h = hashlib.sha256
    with open(path, "rb") as f:
        for line in f:
            obj = orjson.loads(line)
            h(h(line).digest() + obj["digest"].encode()).digest()
    return time.perf_counter() - t


def child_ms(args: list[str]) -> float:
    t = time.perf_counter()
    # cwd outside the repository: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (os.environ.get("PYTHONPATH"), str(ROOT)) if x))
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/", env=env)
    return (time.perf_counter() - t) * 1000


def save_control_state(data: Path) -> float | None:
    """Milliseconds a writer's first derivation of the control state took (it saves control-state.json), in a fresh
    process; None for code without control.revocation.current(save=...)."""
    code = (
        "import sys, time\nfrom storage.files.ledger.store import Ledger\nfrom control.revocation import current\n"
        "led = Ledger(sys.argv[1])\nt = time.perf_counter()\n"
        "try:\n    current(led, sys.argv[2], save=True)\nexcept TypeError:\n    sys.exit(3)\n"
        "print((time.perf_counter() - t) * 1000)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (os.environ.get("PYTHONPATH"), str(ROOT)) if x))
    done = subprocess.run([sys.executable, "-c", code, str(data), SESSION], capture_output=True, text=True, cwd="/", env=env)
    return float(done.stdout) if done.returncode == 0 else None


# -- one size --------------------------------------------------------------------------------------------------------
def measure(root: Path, n: int, corpus: tuple[list[str], list[str], list[str]], args: argparse.Namespace) -> dict[str, Any]:
    from chat.engine import Engine
    from chat.llm import LLM
    from storage.files.ledger.store import Ledger
    from storage.files.retrieval.db import Index

    sentences, speakers, questions = corpus
    rng = random.Random(args.seed + n)
    qs = rng.sample(questions, min(args.queries, len(questions)))
    data = root / f"n{n}"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    items = texts(n, sentences, speakers, args.seed + n)
    lines = jsonl(items)
    r: dict[str, Any] = {"n": n}

    t = time.perf_counter()
    Ledger(data).import_jsonl(SESSION, lines)
    r["import_s"] = time.perf_counter() - t
    r["raw_import_s"] = raw_import(lines, root / "raw.jsonl")
    log = data / "sessions" / SESSION / "events.jsonl"
    r["mb"] = log.stat().st_size / 1e6
    del lines

    led = Ledger(data)
    t = time.perf_counter()
    led.verify(SESSION)
    r["verify_s"] = time.perf_counter() - t
    r["raw_verify_s"] = raw_verify(log)
    led.close()

    t = time.perf_counter()
    idx = Index(data, Ledger(data))
    idx.index_session(SESSION)
    r["index_s"] = time.perf_counter() - t
    raw_path = root / f"raw{n}.sqlite"
    raw_path.unlink(missing_ok=True)
    t = time.perf_counter()
    raw = sqlite3.connect(raw_path)
    raw.execute("CREATE VIRTUAL TABLE raw USING fts5(text, tokenize='porter')")
    with raw:
        raw.executemany("INSERT INTO raw (rowid, text) VALUES (?, ?)", enumerate(items))
    r["raw_index_s"] = time.perf_counter() - t
    del items

    idx.search(SESSION, qs[0], k=K)  # warm: the first query opens readers, loads statistics
    raw_search(raw, qs[0])
    ours = each_ms(lambda q: idx.search(SESSION, q, k=K), qs)
    base = each_ms(lambda q: raw_search(raw, q), qs)
    r["search_p50"], r["search_p95"] = pct(ours, 0.5), pct(ours, 0.95)
    r["raw_search_p50"], r["raw_search_p95"] = pct(base, 0.5), pct(base, 0.95)
    idx.close()

    # a writer (the app starting, a turn, a revoke) derives the control state once and saves it
    # (control/state_file.py), as after any turn; the CLI's reader then folds only what is newer. Without it every
    # CLI process scans the whole log for control records (at 1M: 1.25 / 2.33 s p50 / p95 beyond start-up,
    # 2026-12-05 08:10 UTC). Code from before the control state file derives nothing here.
    r["control_first_ms"] = save_control_state(data)
    cli = [child_ms(["-m", "retrieval", "search", str(data), SESSION, q]) for q in qs[: args.cli_runs]]
    start = [child_ms(["-c", "import cli.prog_retrieval"]) for _ in range(args.cli_runs)]
    floor = statistics.median(start)
    r["cli_p50"], r["cli_p95"] = pct(cli, 0.5) - floor, pct(cli, 0.95) - floor
    r["cli_startup_ms"] = floor

    eng = Engine(data, llm=LLM(api_key=""))
    try:
        eng.turn(SESSION, qs[1 % len(qs)], k=K)  # warm-up: the producer's Merkle tree, readers
        tq = [qs[i % len(qs)] for i in range(args.turns)]
        turns = each_ms(lambda q: eng.turn(SESSION, q, k=K), tq)
    finally:
        eng.index.close()
        eng.ledger.close()
    r["turn_p50"], r["turn_p95"] = pct(turns, 0.5), pct(turns, 0.95)
    floor_file = root / "floor.jsonl"

    def raw_turn(q: str) -> None:
        raw_search(raw, q)
        fd = os.open(floor_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(2):
                os.write(fd, b"x" * 600 + b"\n")
                os.fsync(fd)
        finally:
            os.close(fd)
        with open(root / "floor.json", "wb") as f:
            f.write(b"r" * 12_000)
            f.flush()
            os.fsync(f.fileno())

    rt = each_ms(raw_turn, tq)
    r["raw_turn_p50"], r["raw_turn_p95"] = pct(rt, 0.5), pct(rt, 0.95)
    raw.close()
    raw_path.unlink(missing_ok=True)
    if not args.keep:
        shutil.rmtree(data, ignore_errors=True)
    return r


# -- report ----------------------------------------------------------------------------------------------------------
def table(doc: dict[str, Any]) -> str:
    at = f" (commit {doc['commit']})" if doc.get("commit") else ""
    out = [f"{doc['label']}{at}: {doc['machine']}; load average at start {doc['load']}", ""]
    out.append("| events | import ev/s (raw) | verify ev/s (raw) | index s (raw) | search p50 / p95 ms (raw) | CLI search beyond start-up p50 / p95 ms | turn p50 / p95 ms (raw) |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|")
    for r in doc["rows"]:
        n = r["n"]
        out.append(
            f"| {n:,} | {n / r['import_s']:,.0f} ({n / r['raw_import_s']:,.0f}) | {n / r['verify_s']:,.0f} ({n / r['raw_verify_s']:,.0f}) "
            f"| {r['index_s']:,.1f} ({r['raw_index_s']:,.1f}) | {r['search_p50']:.1f} / {r['search_p95']:.1f} ({r['raw_search_p50']:.1f} / {r['raw_search_p95']:.1f}) "
            f"| {r['cli_p50']:,.0f} / {r['cli_p95']:,.0f} | {r['turn_p50']:.1f} / {r['turn_p95']:.1f} ({r['raw_turn_p50']:.1f} / {r['raw_turn_p95']:.1f}) |"
        )
    return "\n".join(out)


def plot(docs: list[dict[str, Any]]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS.mkdir(exist_ok=True)
    written = []
    styles = ["-o", "--s", ":^", "-.v"]

    def figure(name: str, title: str, ylabel: str, series: list[tuple[str, str]], raw: list[tuple[str, str]], logy: bool = True) -> None:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, doc in enumerate(docs):
            ns = [r["n"] for r in doc["rows"]]
            for key, what in series:
                ax.plot(ns, [r[key] for r in doc["rows"]], styles[i % len(styles)], label=f"{doc['label']}: {what}")
        last = docs[-1]
        for key, what in raw:
            ax.plot([r["n"] for r in last["rows"]], [r[key] for r in last["rows"]], ":x", color="grey", label=f"raw baseline: {what}")
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("events in the session")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = PLOTS / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    figure("search_latency", "Search, K = 8, LoCoMo questions", "ms",
           [("search_p50", "p50"), ("search_p95", "p95")], [("raw_search_p50", "p50"), ("raw_search_p95", "p95")])
    figure("turn_overhead", "A turn with the offline stand-in (no model time)", "ms",
           [("turn_p50", "p50"), ("turn_p95", "p95")], [("raw_turn_p50", "p50"), ("raw_turn_p95", "p95")])
    figure("cli_search", "python -m retrieval search, beyond interpreter start-up", "ms", [("cli_p50", "p50"), ("cli_p95", "p95")], [])
    for doc in docs:
        for r in doc["rows"]:
            r["import_evs"], r["raw_import_evs"] = r["n"] / r["import_s"], r["n"] / r["raw_import_s"]
            r["verify_evs"], r["raw_verify_evs"] = r["n"] / r["verify_s"], r["n"] / r["raw_verify_s"]
    figure("import_verify_throughput", "Bulk import and cold verification", "events / s",
           [("import_evs", "import"), ("verify_evs", "verify")], [("raw_import_evs", "write + fsync"), ("raw_verify_evs", "parse + 2 sha256")])
    figure("index_build", "First index build (the first search after an import)", "s", [("index_s", "index")], [("raw_index_s", "plain FTS5 table")])
    return written


def commit() -> str | None:
    """The project's commit the run measured (PYTHONPATH's tree when it names one), '+' when the tree has changes."""
    tree = next((Path(x) for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x), ROOT)
    try:
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+" if dirty.strip() else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--sizes", default="1000,10000,100000,1000000")
    run.add_argument("--label", default="now")
    run.add_argument("--out", type=Path, default=HERE / "out")
    run.add_argument("--queries", type=int, default=200)
    run.add_argument("--turns", type=int, default=30)
    run.add_argument("--cli-runs", type=int, default=10)
    run.add_argument("--seed", type=int, default=15)
    run.add_argument("--keep", action="store_true")
    pl = sub.add_parser("plot")
    pl.add_argument("results", nargs="+", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "plot":
        docs = [json.loads(f.read_text()) for f in args.results]
        for doc in docs:
            print(table(doc), "\n")
        for path in plot(docs):
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    import importlib.util

    spec = importlib.util.spec_from_file_location("_machine", HERE / "_machine.py")  # this tree's, whatever PYTHONPATH says
    assert spec is not None and spec.loader is not None
    machine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(machine)
    machine_line = machine.machine_line

    root = args.out / f"growth-{args.label}"
    root.mkdir(parents=True, exist_ok=True)
    os.environ["MRE_CACHE_DIR"] = str(root / "audit-cache")
    corpus = locomo()
    doc: dict[str, Any] = {"label": args.label, "machine": machine_line(), "load": os.getloadavg(), "commit": commit(), "rows": []}
    result = args.out / f"growth-{args.label}.json"
    for n in (int(x) for x in args.sizes.split(",")):
        t = time.perf_counter()
        doc["rows"].append(measure(root, n, corpus, args))
        doc["load_end"] = os.getloadavg()
        result.write_text(json.dumps(doc, indent=1))
        print(f"n={n:,} done in {time.perf_counter() - t:,.0f} s; load {os.getloadavg()}", file=sys.stderr, flush=True)
    print(table(doc))
    print(f"\nsaved {result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
