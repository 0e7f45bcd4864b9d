"""Load on the running app: concurrent visitors chatting through the same endpoint the browser uses.

    python bench/load.py [--clients 50] [--turns 20] [--concurrency 16]

Starts `python app.py` on a free loopback port with a fresh data directory and
the offline stand-in (GROQ_API_KEY removed), then runs CLIENTS gradio_client
visitors in parallel, each with its own session key, each sending TURNS
messages to /chat. Every message shares words with every other visitor's (so a
leak would be retrieved) plus a marker unique to its visitor. Reported:
errors; cross-session leaks (another visitor's marker in an answer, the stamps
or a receipt); receipts that fail verification against the ledger; p50/p95
turn latency and turns per second. The same load is run a second time with a
light HTTP client (Gradio's call API and its event stream) because
gradio_client's polling costs the load generator ~50 ms of CPU per call, which
on a small machine competes with the server. The raw baseline, in the same
run: the same number of Engine.turn calls from as many threads, in-process,
without HTTP or Gradio.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root first (bench/ would shadow packages)
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from chat.engine import Engine  # noqa: E402
from chat.llm import LLM  # noqa: E402
from receipts.body import parse_receipt  # noqa: E402
from storage.files.receipts import files  # noqa: E402
from storage.files.receipts.api import data_dir_key, verify_bytes  # noqa: E402
from webui.sessions import new_session_key, session_id  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = "I like pizza, long walks by the river and the old jazz records"
TURN_TIMEOUT = 120.0


@dataclass
class Visitor:
    index: int
    key: str
    marker: str  # a word only this visitor ever says

    @property
    def session(self) -> str:
        return session_id(self.key)

    def message(self, turn: int) -> str:
        return f"note {turn} from {self.marker}: {SHARED}"


@dataclass
class Result:
    label: str
    clients: int
    turns: int
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    receipts_checked: int = 0
    receipts_failed: list[str] = field(default_factory=list)
    wall: float = 0.0

    def row(self) -> str:
        lat = sorted(self.latencies)
        p50 = statistics.median(lat) * 1000 if lat else float("nan")
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] * 1000 if lat else float("nan")
        rate = len(lat) / self.wall if self.wall else float("nan")
        return (
            f"| {self.label} | {self.clients} × {self.turns} | {len(self.errors)} | {len(self.leaks)} | "
            f"{len(self.receipts_failed)} of {self.receipts_checked} | {p50:.0f} | {p95:.0f} | {rate:.1f} |"
        )


HEADER = (
    "| run | clients × turns | errors | cross-session leaks | receipts failing verification | p50 turn (ms) | p95 turn (ms) | turns/s |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|"
)


def visitors(n: int) -> list[Visitor]:
    return [Visitor(i, new_session_key(), f"zq{i:03d}{secrets.token_hex(3)}") for i in range(n)]


def leaks_in(text: str, me: Visitor, everyone: list[Visitor]) -> list[str]:
    return [f"visitor {me.index} saw visitor {o.index}'s marker" for o in everyone if o is not me and o.marker in text]


def run_parallel(label: str, people: list[Visitor], turns: int, one: Callable[[Visitor, int], str]) -> Result:
    """Each visitor's turns in order, all visitors at once; `one` returns what the visitor was shown."""
    res = Result(label, len(people), turns)
    lock = threading.Lock()
    start = threading.Barrier(len(people) + 1)

    def visit(v: Visitor) -> None:
        start.wait()
        for t in range(turns):
            t0 = time.perf_counter()
            try:
                shown = one(v, t)
            except Exception as exc:  # noqa: BLE001 - counted, reported, never fatal
                with lock:
                    res.errors.append(f"visitor {v.index} turn {t}: {type(exc).__name__}: {exc}"[:300])
                continue
            dt = time.perf_counter() - t0
            with lock:
                res.latencies.append(dt)
                res.leaks.extend(leaks_in(shown, v, people))

    with ThreadPoolExecutor(max_workers=len(people)) as pool:
        futures = [pool.submit(visit, v) for v in people]
        start.wait()
        t0 = time.perf_counter()
        for f in futures:
            f.result()
        res.wall = time.perf_counter() - t0
    return res


def check_receipts(res: Result, data_dir: Path, people: list[Visitor]) -> None:
    """Every visitor's receipts verify against the ledger, number one per turn, and cite only their session."""
    trusted = data_dir_key(data_dir)
    assert trusted is not None, "the data directory has no public key"
    for v in people:
        paths = files.list_receipts(data_dir, v.session)
        if len(paths) != res.turns:
            res.receipts_failed.append(f"visitor {v.index}: {len(paths)} receipts for {res.turns} turns")
        for p in paths:
            raw = p.read_bytes()
            res.receipts_checked += 1
            report = verify_bytes(raw, trusted=[trusted], data_dir=data_dir)
            if report.verdict != "verified":
                res.receipts_failed.append(f"{p.name}: {report.verdict}: {[c.name for c in report.failed]}")
            receipt = parse_receipt(raw)  # the signed body: every memory the model was handed
            res.leaks.extend(leaks_in(json.dumps(receipt.body, ensure_ascii=False), v, people))
            if receipt.session != v.session:
                res.leaks.append(f"{p.name} names session {receipt.session}, not visitor {v.index}'s")


# -- the app over HTTP ---------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(data_dir: Path, port: int, concurrency: int, log: Path) -> subprocess.Popen[bytes]:
    """`python app.py` in the background, its output in `log` (a pipe nobody reads would fill and stall it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY")}
    env["GRADIO_ANALYTICS_ENABLED"] = "False"
    cmd = [
        sys.executable,
        str(ROOT / "app.py"),
        "--data",
        str(data_dir),
        "--create",  # a fresh folder for each run (the app makes a non-default DATA_DIR only when told: issue 31)
        "--port",
        str(port),
        "--concurrency",
        str(concurrency),
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the app did not answer at {url} within {timeout:.0f} s")


def http_run(
    url: str, people: list[Visitor], turns: int, label: str = "app: gradio_client → /chat over HTTP"
) -> Result:
    from gradio_client import Client

    clients = {}
    with ThreadPoolExecutor(max_workers=min(16, len(people))) as pool:  # connecting is not part of a turn
        for v, c in zip(
            people,
            pool.map(lambda _v: Client(url, verbose=False, analytics_enabled=False, download_files=False), people),
            strict=True,
        ):
            clients[v.index] = c

    def one(v: Visitor, t: int) -> str:
        history, _box, stamps, _download = (
            clients[v.index].submit(v.message(t), [], 8, v.key, False, api_name="/chat").result(timeout=TURN_TIMEOUT)
        )
        return json.dumps(history, ensure_ascii=False) + stamps

    try:
        return run_parallel(label, people, turns, one)
    finally:
        for c in clients.values():
            c.close()


def sse_run(url: str, people: list[Visitor], turns: int, *, page_sessions: bool = True) -> Result:
    """The same endpoint through Gradio's plain HTTP API (POST /gradio_api/call/chat, then its SSE stream).

    gradio_client polls (it spends ~50 ms of CPU per call in the caller's process), so with many
    visitors in one process it measures itself; this light client shows what the server sustains.
    With `page_sessions` each visitor sends one Gradio session hash for all its turns, as a browser page
    (and a gradio_client Client) does; without it every call opens a new Gradio session, which Gradio
    builds by serialising every component's config (~15 ms of server CPU here, once per page in a browser).
    """
    import httpx

    local = threading.local()
    hashes = {v.index: secrets.token_hex(8) for v in people}

    def one(v: Visitor, t: int) -> str:
        h = getattr(local, "http", None)
        if h is None:
            h = local.http = httpx.Client(timeout=TURN_TIMEOUT)
        call: dict[str, object] = {"data": [v.message(t), [], 8, v.key, False]}
        if page_sessions:
            call["session_hash"] = hashes[v.index]
        try:
            return shown(sse_turn(h, url, call))
        except TurnRefused as exc:
            raise RuntimeError(f"the app refused the turn: {str(exc)[:200]}") from None

    label = "app: plain HTTP → /chat (Gradio call API + SSE)" + ("" if page_sessions else ", a new Gradio session per call")
    return run_parallel(label, people, turns, one)


# -- the light HTTP client, one turn to one app (or replica) ---------------------------------------
class TurnRefused(RuntimeError):
    """The app answered the turn with an error event; the message is what the visitor was shown."""


def sse_turn(http: Any, url: str, call: dict[str, Any]) -> list[Any]:
    """POST /gradio_api/call/chat to `url`, then read its event stream from the same replica (the event id is that
    replica's); the outputs of the complete event, or TurnRefused with the error event's data."""
    event_id = http.post(f"{url}gradio_api/call/chat", json=call).raise_for_status().json()["event_id"]
    event = None
    with http.stream("GET", f"{url}gradio_api/call/chat/{event_id}") as stream:
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                if event == "error":
                    raise TurnRefused(line[5:].strip())
                outputs: list[Any] = json.loads(line[5:])
                return outputs
    raise RuntimeError("the event stream ended without a result")


def shown(outputs: list[Any]) -> str:
    """What a visitor was shown for a completed turn: the chat history and the stamps."""
    history, _box, stamps, _download = outputs
    return json.dumps(history, ensure_ascii=False) + str(stamps)


# -- the raw baseline -----------------------------------------------------------------
def raw_run(data_dir: Path, people: list[Visitor], turns: int) -> Result:
    engine = Engine(data_dir, llm=LLM(api_key=""))  # the offline stand-in, as in the app run

    def one(v: Visitor, t: int) -> str:
        turn = engine.turn(v.session, v.message(t), 8)
        return turn.answer + json.dumps(turn.body["memories"], ensure_ascii=False)

    return run_parallel("raw: Engine.turn in-process, same threads", people, turns, one)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--concurrency", type=int, default=16, help="the app's --concurrency")
    ap.add_argument(
        "--new-session-per-call",
        action="store_true",
        help="the plain-HTTP visitors send no Gradio session hash (each call a new Gradio session, as before issue 15)",
    )
    args = ap.parse_args(argv)
    os.environ.pop("GROQ_API_KEY", None)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmpd = Path(tmp)
        port = free_port()
        log = tmpd / "app.log"
        proc = start_server(tmpd / "app-data", port, args.concurrency, log)
        url = f"http://127.0.0.1:{port}/"
        try:
            wait_ready(url, proc, log)
            people = visitors(args.clients)
            app_res = http_run(url, people, args.turns)
            sse_people = visitors(args.clients)
            sse_res = sse_run(url, sse_people, args.turns, page_sessions=not args.new_session_per_call)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        server_log = log.read_text(errors="replace")
        server_errors = [line for line in server_log.splitlines() if line.startswith("ERROR")]
        if os.environ.get("BENCH_KEEP_LOG"):
            Path(os.environ["BENCH_KEEP_LOG"]).write_text(server_log)
        check_receipts(app_res, tmpd / "app-data", people)
        check_receipts(sse_res, tmpd / "app-data", sse_people)
        raw_people = visitors(args.clients)
        raw_res = raw_run(tmpd / "raw-data", raw_people, args.turns)
        check_receipts(raw_res, tmpd / "raw-data", raw_people)
    print(
        f"Load: {args.clients} concurrent visitors × {args.turns} turns, offline stand-in, app --concurrency {args.concurrency}"
    )
    print(machine_line())
    print()
    print(HEADER)
    runs = (app_res, sse_res, raw_res)
    for res in runs:
        print(res.row())
    problems = [p for res in runs for p in res.errors + res.leaks + res.receipts_failed]
    for p in problems[:20]:
        print(f"- {p}")
    for line in server_errors[:20]:
        print(f"- server log: {line[:300]}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
