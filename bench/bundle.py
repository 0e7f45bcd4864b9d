"""Session bundles (issue 13): export, verify, import and the first search after import of one big session, each
beside a raw baseline measured in the same run.

    python bench/bundle.py [--events 100000] [--turns 5] [--repeat 3] [--out DIR] [--keep] [--profile]

Setup (not timed as a result): one session of --events events written through the ledger's import path
(bench/ledger.py's messages), a signed checkpoint over it (receipts.checkpoints.issue), then --turns real turns of
the offline engine (no Groq key: retrieval, receipt, checkpoint), so the bundle carries receipts. Then --repeat
rounds, each:

  export        bundle.export_session: under the turn lock, the ledger copied into a (stored) zip with the
                checkpoint, receipts and key, manifest hashed and signed, the file fsynced and renamed
  verify        bundle.verify_file with the signing key as --trust: every structural check, every member
                extracted to a temp folder and hashed, the ledger re-walked from genesis, the checkpoint's root
                and consistency proof, every receipt against the carried ledger; and, on its own, the part
                before the ledger walk (structure, extraction, member hashes: bundle.read.open_bundle)
  import        bundle.import_bundle into a fresh data directory: the same verification, the rename into
                DATA2/imported/<local>/, and the index of every event (what makes the session searchable)
  first search  a fresh retrieval.Index over the imported folder and its first query

and the raw baselines of the same bytes: read + sha256 + write a copy (fsynced where the operation fsyncs) of
the ledger file (for export) and of the bundle file (for verify and import). Each figure is the best of its
rounds; "÷ raw" is time ÷ its baseline; the verify goal (issue 13) is raw ÷ verify ≥ 0.5 (at least half the
throughput of copying and hashing the same file), the round-trip goal export + verify + import + first search
≤ 30 s for a 100k-event session.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import os
import pstats
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The script's own folder would shadow the `bundle` package: put the repository root first instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import machine  # noqa: E402
from bench.ledger import messages  # noqa: E402
from bundle import export_session, import_bundle, imported_dir, verify_file  # noqa: E402
from bundle.verify import staged  # noqa: E402
from chat.engine import Engine  # noqa: E402
from chat.llm import LLM  # noqa: E402
from storage.common.keyfiles import load_or_create  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.receipts import checkpoint_files as checkpoints_files  # noqa: E402
from storage.files.receipts import files  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

SESSION = "bench"
QUESTIONS = ("Where did I move?", "What about the support group?", "Tell me about the painting", "Any camping plans?", "What did the cat do yesterday?")
QUERY = "camping Lisbon painting"
GOAL_ROUND_TRIP = 30.0
GOAL_VERIFY = 0.5


def raw_copy_sha256(src: Path, dst: Path, *, fsync: bool) -> float:
    """The raw baseline: read `src` in 1 MiB blocks, sha256 them, write them to `dst` (fsynced if asked)."""
    t0 = time.perf_counter()
    h = hashlib.sha256()
    with open(src, "rb", buffering=0) as r, open(dst, "wb") as w:
        while block := r.read(1 << 20):
            h.update(block)
            w.write(block)
        if fsync:
            w.flush()
            os.fsync(w.fileno())
    h.hexdigest()
    elapsed = time.perf_counter() - t0
    dst.unlink()
    return elapsed


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def build(data: Path, n: int, turns: int) -> dict[str, float]:
    setup: dict[str, float] = {}
    led = Ledger(data)
    setup["import events"], _ = timed(lambda: led.import_jsonl(SESSION, messages(n)))
    key = load_or_create(data)

    def checkpoint() -> None:
        with files.session_turn_lock(data, SESSION):
            checkpoints_files.issue(data, led, SESSION, key)

    setup["checkpoint"], _ = timed(checkpoint)
    led.close()
    eng = Engine(data, llm=LLM(api_key=""), key=key)
    try:
        setup["index"], _ = timed(lambda: eng.index.index_session(SESSION))
        t0 = time.perf_counter()
        for q in (QUESTIONS * (turns // len(QUESTIONS) + 1))[:turns]:
            eng.turn(SESSION, q)
        setup[f"{turns} turns"] = time.perf_counter() - t0
    finally:
        eng.index.close()
        eng.ledger.close()
    return setup


def extract_only(bundle: Path) -> None:
    """The part of verify before the ledger walk: structural checks, every member inflated to a temp folder and
    hashed against the manifest (bundle.read.open_bundle)."""
    with staged(bundle) as opened:
        assert not opened.mismatches and not opened.extra and not opened.missing


def first_search(folder: Path) -> list[int]:
    idx = Index(folder)
    try:
        return [h.seq for h in idx.search(SESSION, QUERY, k=8).results]
    finally:
        idx.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=100_000)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "bundle")
    p.add_argument("--keep", action="store_true", help="keep the data folders and bundles (default: removed)")
    p.add_argument("--profile", action="store_true", help="also profile one verify (cProfile, top functions by own time)")
    args = p.parse_args(argv)
    repeat = max(1, args.repeat)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    os.environ["MRE_CACHE_DIR"] = str(args.out / "audit-cache")  # the auditor's cache, not ~/.cache
    print(machine())
    data = args.out / "src"
    setup = build(data, args.events, args.turns)
    log = Ledger(data).log_path(SESSION)
    key = load_or_create(data)
    trusted = [key.public_key]
    rows: dict[str, list[float]] = {
        k: []
        for k in ("export", "raw ledger", "raw ledger nofsync", "extract", "verify", "raw bundle", "import", "raw bundle fsync", "search", "round trip")
    }
    sizes: dict[str, Any] = {"ledger": log.stat().st_size}
    expected_hits: list[int] | None = None
    for r in range(repeat):
        bundle = args.out / f"b{r}.mre.zip"
        rows["raw ledger"].append(raw_copy_sha256(log, args.out / "raw.copy", fsync=True))
        t_export, done = timed(lambda: export_session(data, SESSION, bundle, key=key))  # noqa: B023
        rows["export"].append(t_export)
        sizes.update(bundle=done.bytes, receipts=done.receipts, events=done.events)
        rows["raw bundle"].append(raw_copy_sha256(bundle, args.out / "raw.copy", fsync=False))
        rows["raw ledger nofsync"].append(raw_copy_sha256(log, args.out / "raw.copy", fsync=False))
        rows["extract"].append(timed(lambda: extract_only(bundle))[0])  # noqa: B023
        t_verify, report = timed(lambda: verify_file(bundle, trusted))  # noqa: B023
        assert report.verdict == "verified", [c.to_dict() for c in report.checks if c.status != "pass"]
        rows["verify"].append(t_verify)
        rows["raw bundle fsync"].append(raw_copy_sha256(bundle, args.out / "raw.copy", fsync=True))
        data2 = args.out / f"data2-{r}"
        (data2 / "sessions").mkdir(parents=True)
        t_import, imported = timed(lambda: import_bundle(data2, bundle, trusted=trusted))  # noqa: B023
        assert not imported.duplicate and imported.indexed == done.events
        rows["import"].append(t_import)
        t_search, hits = timed(lambda: first_search(imported_dir(data2, imported.local)))  # noqa: B023
        assert hits and (expected_hits is None or hits == expected_hits), hits
        expected_hits = hits
        rows["search"].append(t_search)
        rows["round trip"].append(t_export + t_verify + t_import + t_search)
        if not args.keep:
            shutil.rmtree(data2, ignore_errors=True)
            bundle.unlink()
    source_hits = first_search(data)
    assert source_hits == expected_hits, (source_hits, expected_hits)

    profile = ""
    if args.profile:
        bundle = args.out / "profile.mre.zip"
        export_session(data, SESSION, bundle, key=key)
        prof = cProfile.Profile()
        prof.enable()
        verify_file(bundle, trusted)
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
        profile = buf.getvalue()
    if not args.keep:
        shutil.rmtree(args.out, ignore_errors=True)

    best = {k: min(v) for k, v in rows.items()}
    mb = sizes["ledger"] / 1e6
    print(
        f"session: {sizes['events']:,} events, ledger {mb:,.1f} MB, bundle {sizes['bundle'] / 1e6:,.1f} MB, {sizes['receipts']} receipts; "
        f"best of {repeat}; setup: " + ", ".join(f"{k} {v:,.1f} s" for k, v in setup.items())
    )
    print()
    print("| step | time (ms) | raw baseline: copy + sha256 of | raw (ms) | ÷ raw | raw ÷ step (throughput ratio) |")
    print("|---|---:|---|---:|---:|---:|")

    def line(step: str, t: float, what: str, raw: float | None) -> None:
        if raw is None:
            print(f"| {step} | {t * 1e3:,.0f} | {what} | — | — | — |")
        else:
            print(f"| {step} | {t * 1e3:,.0f} | {what} | {raw * 1e3:,.0f} | {t / raw:,.1f}× | {raw / t:,.2f} |")

    line("export", best["export"], f"the ledger file ({mb:,.1f} MB), fsynced", best["raw ledger"])
    line("verify (--trust)", best["verify"], f"the bundle file ({sizes['bundle'] / 1e6:,.1f} MB)", best["raw bundle"])
    line("verify (--trust)", best["verify"], f"the ledger file ({mb:,.1f} MB: the bytes it walks)", best["raw ledger nofsync"])
    line("  of which: structure + extract + member sha256", best["extract"], "the ledger file (uncompressed)", best["raw ledger nofsync"])
    line("import (verify + rename + index)", best["import"], "the bundle file, fsynced", best["raw bundle fsync"])
    line("first search after import", best["search"], "(no raw analogue)", None)
    line("round trip (export → verify → import → search)", best["round trip"], "(sum of one round)", None)
    print()
    ratio = best["raw bundle"] / best["verify"]
    print(f"round trip {best['round trip']:,.1f} s vs goal ≤ {GOAL_ROUND_TRIP:.0f} s: {'met' if best['round trip'] <= GOAL_ROUND_TRIP else 'NOT met'}")
    ratio_ledger = best["raw ledger nofsync"] / best["verify"]
    print(f"verify throughput {ratio:,.2f}× the raw copy + sha256 of the bundle vs goal ≥ {GOAL_VERIFY}: {'met' if ratio >= GOAL_VERIFY else 'NOT met'}")
    print(f"  (of the ledger's uncompressed bytes, the ones it walks: {ratio_ledger:,.2f}×: {'met' if ratio_ledger >= GOAL_VERIFY else 'NOT met'})")
    print(f"verify throughput: {mb / best['verify']:,.1f} MB/s of ledger; raw: {sizes['bundle'] / 1e6 / best['raw bundle']:,.1f} MB/s of bundle")
    if profile:
        print()
        print(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
