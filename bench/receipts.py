"""Receipt speed: offline and with-ledger verification of a K=8 receipt, and turn overhead.

    python bench/receipts.py [--sizes 1000,100000,1000000] [--turns 20]

For each session size it builds a session through the ledger's import path and
the index, runs turns with the offline stand-in (no model call), and measures:
- turn overhead (append, retrieve, prompt, stand-in, append, tree, sign, fsync'd receipt), and how much of
  each turn is retrieval's search (Index.search) and indexing (Index.index_session): the rest is the turn's own;
- offline verification of the last receipt (receipt + public key only);
- verification with the ledger: cold (the auditor walks the ledger from genesis once, on every core:
  receipts/audit_parallel.py), the same cold walk kept serial (the auditor before issue 15, same run),
  the cold CLI `python -m receipts verify R --trust PUB --data D --full` (a fresh process), and warm (its cache: every cached byte re-hashed with a raw sha256, then the K cited lines
  and O(log n) tree nodes), and warm after one more turn (re-hash, then walk the two new lines).
Raw baselines in the same run: the two Ed25519 verifies plus a sha256 of the payload
(the crypto floor of offline verification); a raw sha256 of the ledger file in 1 MiB
reads (the floor of a warm check); a full streaming re-walk of the ledger (what the cache avoids); and two durable appends plus one fsync'd file (the fsync floor of a turn).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench._machine import machine_line  # noqa: E402
from chat.engine import Engine  # noqa: E402
from chat.llm import LLM  # noqa: E402
from receipts.body import checkpoint_bytes, decode_sig, parse_receipt  # noqa: E402
from receipts.keys import format_public_key  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.receipts import audit_parallel  # noqa: E402
from storage.files.receipts.api import verify_bytes  # noqa: E402

WORDS = (
    "cat Miso Lisbon tram sister wedding Porto cello nurse hospital vacuum bed painting camping "
    "support group adoption friends mountains beach guitar novel recipe garden marathon"
).split()
QUESTIONS = ["Tell me about Miso the cat", "When is the wedding in Porto?", "What did I say about the cello?"]


def lines(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(8 + i % 12))
        out.append(orjson.dumps({"role": "user" if i % 2 == 0 else "assistant", "text": f"turn {i}: {words}", "meta": {"i": i}}) + b"\n")
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def timed(fn, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def bench_size(root: Path, n: int, turns: int) -> dict[str, Any]:
    data = root / f"n{n}"
    t0 = time.perf_counter()
    Ledger(data).import_jsonl("s", lines(n))
    t_import = time.perf_counter() - t0
    engine = Engine(data, llm=LLM(api_key=""))
    t0 = time.perf_counter()
    engine.index.index_session("s")
    t_index = time.perf_counter() - t0
    engine.turn("s", "warm-up question about the cat")  # first turn builds the producer's Merkle tree
    spent = [0.0]  # seconds in retrieval (search and indexing) during the current turn

    def timed_call(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[0] += time.perf_counter() - t

        return call

    engine.index.search = timed_call(engine.index.search)  # type: ignore[method-assign]
    engine.index.index_session = timed_call(engine.index.index_session)  # type: ignore[method-assign]
    turn_ms, retrieval_ms, own_ms = [], [], []
    for i in range(turns):
        spent[0] = 0.0
        t = time.perf_counter()
        turn = engine.turn("s", QUESTIONS[i % len(QUESTIONS)], k=8)
        turn_ms.append((time.perf_counter() - t) * 1000)
        retrieval_ms.append(spent[0] * 1000)
        own_ms.append(turn_ms[-1] - retrieval_ms[-1])
    raw = turn.receipt_path.read_bytes()
    assert len(parse_receipt(raw).body["memories"]) == 8
    pub = [engine.key.public_key]
    assert verify_bytes(raw, trusted=pub).verdict == "verified"
    offline = timed(lambda: verify_bytes(raw, trusted=pub), 200)

    body = parse_receipt(raw)
    env_sig = decode_sig(orjson.loads(raw)["signatures"][0]["sig"])
    cp = body.body["checkpoint"]
    cp_sig = decode_sig(cp["sig"])
    from receipts.dsse import pae

    def crypto_floor() -> None:
        import hashlib

        engine.key.public_key.verify(env_sig or b"", pae(body.envelope.payload_type, body.envelope.payload))
        engine.key.public_key.verify(cp_sig or b"", checkpoint_bytes(cp["body"]))
        hashlib.sha256(body.envelope.payload).digest()

    floor = timed(crypto_floor, 200)
    kept = audit_parallel.MIN_PARALLEL_BYTES
    audit_parallel.MIN_PARALLEL_BYTES = 1 << 62  # the same cold walk, serial (the auditor before issue 15), run first
    try:
        t = time.perf_counter()
        serial_report = verify_bytes(raw, trusted=pub, data_dir=data, full=True)
        cold_serial = (time.perf_counter() - t) * 1000
    finally:
        audit_parallel.MIN_PARALLEL_BYTES = kept
    assert serial_report.verdict == "verified", serial_report.failed
    t = time.perf_counter()
    cold_report = verify_bytes(raw, trusted=pub, data_dir=data, full=True)
    cold = (time.perf_counter() - t) * 1000
    assert cold_report.verdict == "verified", cold_report.failed
    pub_file = data / "bench-pub.pem"
    pub_file.write_text(format_public_key(engine.key.public_key))
    cli = [sys.executable, "-m", "receipts", "verify", str(turn.receipt_path), "--trust", str(pub_file), "--data", str(data), "--full"]
    repo = str(Path(__file__).resolve().parents[1])
    t = time.perf_counter()
    subprocess.run(cli, check=True, stdout=subprocess.DEVNULL, cwd=repo)
    cold_cli = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import storage.files.receipts.api"], check=True, cwd=repo)
    start_up = (time.perf_counter() - t) * 1000  # the interpreter and the CLI's imports alone
    warm = timed(lambda: verify_bytes(raw, trusted=pub, data_dir=data), 20)
    log_file = data / "sessions" / "s" / "events.jsonl"
    sha = timed(lambda: raw_sha256(log_file), 20)  # the floor of a warm check: every cached byte is re-hashed
    # one more turn: the warm check re-hashes the cached bytes and walks only the two new lines
    after = engine.turn("s", QUESTIONS[0], k=8).receipt_path.read_bytes()
    t = time.perf_counter()
    inc_report = verify_bytes(after, trusted=pub, data_dir=data)
    incremental = (time.perf_counter() - t) * 1000
    assert inc_report.verdict == "verified", inc_report.failed
    chain_msg = next(c.message for c in inc_report.checks if c.name == "ledger.chain")
    rewalk = timed(lambda: Ledger(data).verify("s"), 1)

    def fsync_floor() -> None:
        fd = os.open(data / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for _ in range(2):
            os.write(fd, b"x" * 600 + b"\n")
            os.fsync(fd)
        os.close(fd)
        with open(data / "floor.json", "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())

    fs = timed(fsync_floor, 20)
    return {
        "n": n, "import_s": t_import, "index_s": t_index,
        "turn_p50": pct(turn_ms, 0.5), "turn_p95": pct(turn_ms, 0.95), "fsync_floor_p50": statistics.median(fs),
        "retrieval_p50": pct(retrieval_ms, 0.5), "retrieval_p95": pct(retrieval_ms, 0.95), "own_p50": pct(own_ms, 0.5), "own_p95": pct(own_ms, 0.95),
        "cold_serial_ms": cold_serial, "cold_cli_ms": cold_cli, "start_up_ms": start_up,
        "offline_p50": pct(offline, 0.5), "offline_p95": pct(offline, 0.95), "crypto_floor_p50": pct(floor, 0.5),
        "ledger_cold_ms": cold, "ledger_warm_p50": pct(warm, 0.5), "ledger_warm_p95": pct(warm, 0.95), "rewalk_ms": rewalk[0],
        "sha_p50": pct(sha, 0.5), "incremental_ms": incremental, "chain_msg": chain_msg, "mb": log_file.stat().st_size / 1e6,
    }


def raw_sha256(path: Path) -> str:
    """hashlib sha256 of the whole file in 1 MiB reads: the raw baseline of the warm check."""
    import hashlib

    h = hashlib.sha256()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,100000,1000000")
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        # the auditor's caches (tens of MB at 1M) go with the sessions, not into the user's ~/.cache
        os.environ["MRE_CACHE_DIR"] = str(Path(tmp) / "audit-cache")
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(bench_size(Path(tmp), n, args.turns))
            print(f"done {n:,}", file=sys.stderr)
    print(f"machine: {machine_line()}\n")
    print("| session events | turn overhead p50 / p95 (ms) | fsync floor of a turn (ms) | offline verify p50 / p95 (ms) | crypto floor (ms) | with ledger, warm p50 / p95 (ms) | with ledger, cold (ms) | full re-walk (ms) | import / index (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['turn_p50']:.1f} / {r['turn_p95']:.1f} | {r['fsync_floor_p50']:.1f} | {r['offline_p50']:.2f} / {r['offline_p95']:.2f} | "
            f"{r['crypto_floor_p50']:.2f} | {r['ledger_warm_p50']:.2f} / {r['ledger_warm_p95']:.2f} | {r['ledger_cold_ms']:.0f} | {r['rewalk_ms']:.0f} | "
            f"{r['import_s']:.1f} / {r['index_s']:.1f} |"
        )
    print("\n| session events | ledger file (MB) | with ledger, warm p50 / p95 (ms) | raw sha256 of the file, p50 (ms) | warm ÷ raw | after one more turn (ms) | with ledger, cold (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['mb']:.0f} | {r['ledger_warm_p50']:.1f} / {r['ledger_warm_p95']:.1f} | {r['sha_p50']:.1f} | "
            f"{r['ledger_warm_p50'] / r['sha_p50']:.2f}× | {r['incremental_ms']:.1f} | {r['ledger_cold_ms']:.0f} |"
        )
    print("\n| session events | turn p50 / p95 (ms) | of which retrieval (search + indexing) p50 / p95 (ms) | the turn's own (the rest) p50 / p95 (ms) | fsync floor (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['turn_p50']:.1f} / {r['turn_p95']:.1f} | {r['retrieval_p50']:.1f} / {r['retrieval_p95']:.1f} | "
            f"{r['own_p50']:.1f} / {r['own_p95']:.1f} | {r['fsync_floor_p50']:.1f} |"
        )
    print("\n| session events | cold, parallel walk (ms) | cold, serial walk, same run (ms) | parallel ÷ serial | full re-walk, Ledger.verify (ms) | CLI `receipts verify --data --full` (ms) | interpreter + imports (ms) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['ledger_cold_ms']:.0f} | {r['cold_serial_ms']:.0f} | {r['ledger_cold_ms'] / r['cold_serial_ms']:.2f}× | "
            f"{r['rewalk_ms']:.0f} | {r['cold_cli_ms']:.0f} | {r['start_up_ms']:.0f} |"
        )
    for r in rows:
        print(f"\n{r['n']:,} events, ledger.chain row after one more turn: {r['chain_msg']}")


if __name__ == "__main__":
    main()
