"""Full turns/s through the app on PostgreSQL with 1 and 3 replicas, and on files with 1, side by side.

    python bench/replicas.py [--clients 50] [--turns 20] [--concurrency 16] [--database-url URL]

Each app row starts `python app.py` replicas (each its own --data and loopback port; on PostgreSQL one
DATABASE_URL — a fresh database per row — and one RECEIPT_SIGNING_KEY; GROQ_API_KEY unset: the offline
stand-in) and runs CLIENTS visitors at once, each sending TURNS messages through Gradio's plain HTTP call API
(bench/load.py's light client), every turn to a replica drawn at random. Afterwards, for every row: forks (each
session's chain verified in the database, seqs 0..n-1 holding each message once), cross-session leaks (bench/load.py's
markers, in what was shown and in every receipt), and every receipt read from the database verified offline and
against the session's ledger as stored (its rows exported byte for byte to a scratch data directory, then
storage.files.receipts.api.verify_bytes with the key's public half).

Raw baselines in the same run: Engine.turn in-process from as many threads, on PostgreSQL and on files.

CPU per turn is measured from /proc (utime+stime before and after each row) for the app processes, the
PostgreSQL server (the postmaster, its live children found by parent pid, and the children it reaped) and this process (the load
generator), so the table says which of them the two cores went to: the ceiling a row can reach is
cores / (CPU seconds per turn). Without --database-url a throwaway server is started (tests/pg_support.py:
initdb in /tmp, default settings: fsync on) and stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root first (bench/ would shadow packages)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from bench.load import (  # noqa: E402
    TURN_TIMEOUT,
    Result,
    Visitor,
    free_port,
    leaks_in,
    run_parallel,
    shown,
    sse_turn,
    visitors,
    wait_ready,
)

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- replicas ----------------------------------------------------------------------------
@dataclass
class Replica:
    """One `python app.py` process: where it listens, its data directory and its log."""

    proc: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def app_env(database_url: str | None, signing_key: str | None) -> dict[str, str]:
    """The replicas' environment: no GROQ_API_KEY (the offline stand-in, never the network), the database (or none:
    files) and the shared signing key."""
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "DATABASE_URL")}
    env["GRADIO_ANALYTICS_ENABLED"] = "False"
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    if signing_key is not None:
        env["RECEIPT_SIGNING_KEY"] = signing_key
    return env


def start_replicas(
    n: int, root: Path, *, database_url: str | None, signing_key: str | None, concurrency: int = 16, timeout: float = 120.0
) -> list[Replica]:
    """Start `n` replicas at once and wait until each answers; on a failure every one started is stopped."""
    env = app_env(database_url, signing_key)
    started: list[Replica] = []
    try:
        for i in range(n):
            data, log, port = root / f"replica-{i}", root / f"replica-{i}.log", free_port()
            cmd = [sys.executable, str(ROOT / "app.py"), "--data", str(data), "--create", "--port", str(port), "--concurrency", str(concurrency)]
            with open(log, "wb") as out:  # a pipe nobody reads would fill and stall the app
                proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            started.append(Replica(proc, f"http://127.0.0.1:{port}/", data, log))
        for r in started:
            wait_ready(r.url, r.proc, r.log, timeout=timeout)
    except BaseException:
        stop_replicas(started)
        raise
    return started


def stop_replicas(replicas: Sequence[Replica]) -> None:
    for r in replicas:
        if r.proc.poll() is None:
            r.proc.terminate()
    for r in replicas:
        try:
            r.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait(timeout=10)


@contextlib.contextmanager
def running_replicas(n: int, root: Path, **kw: Any) -> Iterator[list[Replica]]:
    replicas = start_replicas(n, root, **kw)
    try:
        yield replicas
    finally:
        stop_replicas(replicas)


@dataclass
class Router:
    """Sends each turn to a replica drawn at random (a load balancer without sticky sessions); counts per replica."""

    urls: list[str]
    seed: int = 0
    served: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _local: threading.local = field(default_factory=threading.local)

    def pick(self, v: Visitor, t: int) -> str:
        url = random.Random(f"{self.seed}:{v.index}:{t}").choice(self.urls)
        with self._lock:
            self.served[url] = self.served.get(url, 0) + 1
        return url

    def http(self) -> Any:
        import httpx

        h = getattr(self._local, "http", None)
        if h is None:
            h = self._local.http = httpx.Client(timeout=TURN_TIMEOUT)
        return h


def routed_run(label: str, urls: list[str], people: list[Visitor], turns: int, *, seed: int = 0) -> tuple[Result, Router]:
    """bench/load.py's visitors (each one Gradio session hash, as a page), every turn to a random replica."""
    router = Router(list(urls), seed)
    hashes = {v.index: secrets.token_hex(8) for v in people}

    def one(v: Visitor, t: int) -> str:
        call = {"data": [v.message(t), [], 8, v.key, False], "session_hash": hashes[v.index]}
        return shown(sse_turn(router.http(), router.pick(v, t), call))

    return run_parallel(label, people, turns, one), router


# -- checks against the database ------------------------------------------------------------
@dataclass
class Checked:
    """What the checks after a row found: forks (chains that are not one line of the acknowledged turns)."""

    forks: list[str] = field(default_factory=list)


def check_chain(ledger: Any, session: str, messages: Sequence[str]) -> list[str]:
    """One linear chain holding each acknowledged message once: the ledger verifies from genesis in the database
    (PgLedger.verify: every digest and chain hash, seqs 0..n-1 and the sessions row's tail), its seqs are 0..n-1,
    and each of `messages` is a user event exactly once."""
    problems = []
    report = ledger.verify(session)
    if not report.ok:
        problems.append(f"session {session}: the chain does not verify: {report.first_break}")
    events = list(ledger.events(session))
    if [e.seq for e in events] != list(range(len(events))):
        problems.append(f"session {session}: seqs are not 0..{len(events) - 1}")
    size, head = ledger.head(session)
    if events and (size, head) != (len(events), events[-1].chain):
        problems.append(f"session {session}: the recorded tail ({size}, {head}) is not the last event's")
    asked = [e.text for e in events if e.role == "user"]
    for m in messages:
        if asked.count(m) != 1:
            problems.append(f"session {session}: message {m[:40]!r} is there {asked.count(m)} times")
    return problems


def export_ledger(ledger: Any, session: str, data_dir: Path) -> None:
    """The session's stored lines, byte for byte, as `data_dir/sessions/<session>/events.jsonl` (what the verifier
    reads): the receipts' ledger checks then run over exactly what the database holds."""
    folder = data_dir / "sessions" / session
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "events.jsonl", "wb") as f:
        ledger.export(session, f)


def check_receipts(
    res: Result, stores: Any, people: list[Visitor], trusted: Any, scratch: Path, expected: dict[str, list[str]] | None = None
) -> None:
    """Every visitor's receipts, read from the stores (the database's rows on PostgreSQL): each verified offline (the
    public key only) and with the session's ledger as stored (on PostgreSQL exported byte for byte into `scratch`, on
    files the data directory itself); none names another session or holds another visitor's marker."""
    from receipts.body import parse_receipt
    from storage.files.receipts.api import verify_bytes
    from storage.files.receipts.audit import forget_cache

    on_files = stores.kind == "files"
    for v in people:
        ids = stores.receipts.receipt_ids(v.session)
        if expected is not None and len(ids) != len(expected[v.session]):
            res.receipts_failed.append(f"visitor {v.index}: {len(ids)} receipts for {len(expected[v.session])} acknowledged turns")
        ledger_dir = stores.data_dir if on_files else scratch
        if not on_files:
            export_ledger(stores.ledger, v.session, scratch)
        try:
            for rid in ids:
                raw = stores.receipts.read_receipt(v.session, rid)
                res.receipts_checked += 1
                offline = verify_bytes(raw, trusted=[trusted])
                if offline.verdict != "verified":
                    res.receipts_failed.append(f"{rid} offline: {offline.verdict}: {[c.name for c in offline.failed]}")
                report = verify_bytes(raw, trusted=[trusted], data_dir=ledger_dir)
                if report.verdict != "verified":
                    res.receipts_failed.append(f"{rid} with the ledger: {report.verdict}: {[c.name for c in report.failed]}")
                receipt = parse_receipt(raw)
                res.leaks.extend(leaks_in(json.dumps(receipt.body, ensure_ascii=False), v, people))
                if receipt.session != v.session:
                    res.leaks.append(f"{rid} names session {receipt.session}, not visitor {v.index}'s")
        finally:
            forget_cache(ledger_dir, v.session)
            if not on_files:
                shutil.rmtree(scratch / "sessions" / v.session, ignore_errors=True)


def acknowledged(res: Result, people: list[Visitor], turns: int) -> dict[str, list[str]]:
    """Each visitor's session → the messages of its turns that were not counted as errors."""
    failed = {(int(e.split()[1]), int(e.split()[3].rstrip(":"))) for e in res.errors}
    return {v.session: [v.message(t) for t in range(turns) if (v.index, t) not in failed] for v in people}


# -- CPU from /proc ---------------------------------------------------------------------------
def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) of a process and of the children it has reaped."""
    try:
        f = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return sum(int(x) for x in f[11:15]) / CLK_TCK


def cpu_of_server(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster, its live children (each backend calls setsid, so they are
    not in its process group: found by parent pid) and what the postmaster reaped from children that exited."""
    total = 0.0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        pid = int(d.name)
        try:
            f = _stat(pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if pid == postmaster:
            total += sum(int(x) for x in f[11:15]) / CLK_TCK
        elif int(f[1]) == postmaster:
            total += sum(int(x) for x in f[11:13]) / CLK_TCK
    return total


def cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Cpu:
    """CPU seconds spent during a row, by whom."""

    app: float = 0.0
    postgres: float = 0.0
    client: float = 0.0

    @property
    def total(self) -> float:
        return self.app + self.postgres + self.client


@contextlib.contextmanager
def cpu_meter(app_pids: Sequence[int], pg_pid: int | None) -> Iterator[Cpu]:
    cpu = Cpu()
    a0 = sum(cpu_of(p) for p in app_pids)
    p0 = cpu_of_server(pg_pid) if pg_pid is not None else 0.0
    c0 = cpu_self()
    yield cpu
    cpu.app = sum(cpu_of(p) for p in app_pids) - a0
    cpu.postgres = (cpu_of_server(pg_pid) if pg_pid is not None else 0.0) - p0
    cpu.client = cpu_self() - c0


# -- the bench ----------------------------------------------------------------------------------
@dataclass
class Row:
    result: Result
    backend: str
    replicas: str
    cpu: Cpu
    forks: list[str]
    served: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        r = self.result
        lat = sorted(r.latencies)
        n = len(lat)
        p50 = statistics.median(lat) * 1000 if lat else float("nan")
        p95 = lat[min(n - 1, int(0.95 * n))] * 1000 if lat else float("nan")
        rate = n / r.wall if r.wall else float("nan")

        def per(seconds: float) -> float:
            return seconds / n * 1000 if n else float("nan")

        ceiling = (os.cpu_count() or 1) / (self.cpu.total / n) if n and self.cpu.total else float("nan")
        return (
            f"| {r.label} | {self.backend} | {self.replicas} | {len(r.errors)} | {len(self.forks)} | {len(r.leaks)} | "
            f"{len(r.receipts_failed)} of {r.receipts_checked} | {p50:.0f} | {p95:.0f} | **{rate:.1f}** | "
            f"{per(self.cpu.app):.1f} | {per(self.cpu.postgres):.1f} | {per(self.cpu.client):.1f} | {ceiling:.0f} |"
        )


HEADER = (
    "| run | backend | replicas | errors | forks | leaks | receipts failing | p50 (ms) | p95 (ms) | turns/s | "
    "CPU ms/turn: app | postgres | load generator | cores ÷ CPU/turn (turns/s) |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def app_row(
    n: int, tmp: Path, people: list[Visitor], turns: int, *, url: str | None, key: str, concurrency: int, pg_pid: int | None
) -> Row:
    from receipts.keys import parse_private_key
    from storage.stores import open_stores

    root = tmp / f"{'pg' if url else 'files'}-{n}"
    root.mkdir()
    label = f"app: plain HTTP → /chat, {n} replica{'s' if n > 1 else ''}"
    with running_replicas(n, root, database_url=url, signing_key=key, concurrency=concurrency) as reps:
        with cpu_meter([r.proc.pid for r in reps], pg_pid) as cpu:
            res, router = routed_run(label, [r.url for r in reps], people, turns)
    trusted = parse_private_key(key, source="bench").public_key
    forks: list[str] = []
    # files: the one replica's data directory; PostgreSQL: the database, opened as another replica would
    with open_stores(reps[0].data_dir, url, environ={}) as stores:
        acked = acknowledged(res, people, turns)
        for session, messages in acked.items():
            forks.extend(check_chain(stores.ledger, session, messages))
        check_receipts(res, stores, people, trusted, root / "verify", acked)
    served = {str(i): router.served.get(r.url, 0) for i, r in enumerate(reps)}
    return Row(res, "PostgreSQL" if url else "files", str(n), cpu, forks, served)


def raw_row(tmp: Path, people: list[Visitor], turns: int, *, url: str | None, key: str, pg_pid: int | None) -> Row:
    from chat.engine import Engine
    from chat.llm import LLM
    from receipts.keys import parse_private_key
    from storage.stores import open_stores

    data = tmp / f"raw-{'pg' if url else 'files'}"
    data.mkdir()
    signing = parse_private_key(key, source="bench")
    stores = open_stores(data, url, environ={})
    engine = Engine(data, stores=stores, llm=LLM(api_key=""), key=signing)

    def one(v: Visitor, t: int) -> str:
        turn = engine.turn(v.session, v.message(t), 8)
        return turn.answer + json.dumps(turn.body["memories"], ensure_ascii=False)

    try:
        with cpu_meter([], pg_pid) as cpu:
            res = run_parallel("raw: Engine.turn in-process, same threads", people, turns, one)
        forks: list[str] = []
        acked = acknowledged(res, people, turns)
        for session, messages in acked.items():
            forks.extend(check_chain(stores.ledger, session, messages))
        check_receipts(res, stores, people, signing.public_key, data.parent / f"verify-raw-{'pg' if url else 'files'}", acked)
    finally:
        engine.close()
    return Row(res, "PostgreSQL" if url else "files", "in-process", cpu, forks)


@contextlib.contextmanager
def database(url: str | None) -> Iterator[tuple[Any, int | None]]:
    """(a function giving a fresh database URL per row, the postmaster's pid or None when the server is not ours)."""
    if url:
        yield (lambda: url), None
        return
    sys.path.insert(0, str(ROOT))
    from tests import pg_support

    with pg_support.started_server() as server:
        yield (lambda: pg_support.fresh_database(server)), server.pid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=16, help="each replica's --concurrency")
    ap.add_argument("--database-url", default=None, help="an existing database for every row (default: a throwaway server, a fresh database per row)")
    ap.add_argument("--rows", default="pg1,pg3,files1,rawpg,rawfiles", help="which rows, in order")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a TERM stops the replicas and the server on the way out
    os.environ.pop("GROQ_API_KEY", None)
    key = secrets.token_hex(32)  # one RECEIPT_SIGNING_KEY for every replica (the 32-byte seed as hex)
    rows: list[Row] = []
    start_load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp, database(args.database_url) as (fresh, server_pid):
        tmpd = Path(tmp)
        os.environ.setdefault("MRE_CACHE_DIR", str(tmpd / "audit-cache"))  # the verifier's cache, not ~/.cache
        for name in args.rows.split(","):
            people = visitors(args.clients)
            if name.startswith("raw"):
                url = fresh() if name == "rawpg" else None
                rows.append(raw_row(tmpd, people, args.turns, url=url, key=key, pg_pid=server_pid if url else None))
            else:
                n = int(name[-1])
                url = fresh() if name.startswith("pg") else None
                rows.append(app_row(n, tmpd, people, args.turns, url=url, key=key, concurrency=args.concurrency, pg_pid=server_pid if url else None))
            print(f"# done: {name} ({rows[-1].result.wall:.1f} s)", file=sys.stderr, flush=True)
    print(f"Replicas: {args.clients} concurrent visitors × {args.turns} turns, offline stand-in, each replica --concurrency {args.concurrency}, every turn to a random replica")
    print(machine_line() + f"; load average {start_load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print()
    print(HEADER)
    for row in rows:
        print(row.line())
    print()
    for row in rows:
        if row.served:
            print(f"- {row.result.label} ({row.backend}): turns served per replica {row.served}")
    problems = [p for row in rows for p in row.result.errors + row.result.leaks + row.result.receipts_failed + row.forks]
    for p in problems[:20]:
        print(f"- {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
