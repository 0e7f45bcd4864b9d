"""The semantic extra's cost (issue 35): embedding speed, search p95 at a 100k-event session, bytes per event.

    python bench/semantic_cost.py [--events 100000] [--embed-sample 1500] [--queries 200] [--out DIR]
        [--skip-embedding] [--skip-search] [--candidate ONNX_FILE]

1. Embedding: `--embed-sample` LoCoMo turns embedded by the shipped model (all-MiniLM-L6-v2 int8 ONNX) as the app
   embeds them (one onnxruntime thread) and as import/rebuild do (one thread a core), beside the earlier setting
   (one thread, texts cut at 256 word pieces: the baseline of this run); the min cosine of each setting's vectors
   with the baseline's says whether they mean the same.
2. Search: one session of `--events` events, each a LoCoMo turn drawn at random (seeded), written through the ledger
   and indexed; every event then embedded through Index.embed_pending, the vector of a text computed once (the
   session repeats LoCoMo's 5,882 turns: a dense scan's cost does not depend on which vectors it scans). Each of
   `--queries` LoCoMo questions is searched at K = 10 lexically (the default install) and hybrid (query embedded,
   the dense top 25 over every vector of the session, fused) in the same run, warm: p50 and p95 of each.
3. Bytes: index.sqlite's size before and after the vectors, per event.
Built data is kept in --out (default bench/out/, git-ignored) and reused.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import load, machine, questions, turns  # noqa: E402
from bench.search import pct  # noqa: E402
from ledger.messages import Message  # noqa: E402
from retrieval.semantic import BLOB_BYTES, DIM, LEXICAL_POOL  # noqa: E402
from storage.common import semantic  # noqa: E402
from storage.files.ledger.store import Ledger  # noqa: E402
from storage.files.retrieval.db import Index  # noqa: E402

K = 10


def _rate(model: semantic.Embedder, texts: list[str]) -> tuple[float, np.ndarray]:
    model.embed(texts[:64])  # warm
    t0 = time.perf_counter()
    vecs = model.embed(texts)
    return len(texts) / (time.perf_counter() - t0), vecs


def _candidate_rate(path: Path, texts: list[str], base: semantic.Embedder) -> float:
    """Events/s of another ONNX sentence model over the same batches (the vendored tokenizer: MiniLM's vocabulary), for
    speed alone: its vectors are not the shipped model's (recall is measured by bench/semantic.py, not here)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    sess = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    order = sorted(texts, key=len)

    def run(batch: list[str]) -> None:
        enc = base._tokenizer.encode_batch(batch)
        feed = {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }
        sess.run(None, {k: v for k, v in feed.items() if k in names})

    run(order[:64])
    t0 = time.perf_counter()
    for i in range(0, len(order), semantic.BATCH):
        run(order[i : i + semantic.BATCH])
    return len(texts) / (time.perf_counter() - t0)


def embedding(texts: list[str], candidate: Path | None = None) -> list[str]:
    rows = []
    base = semantic.load(threads=1)
    base._tokenizer.enable_truncation(max_length=256)  # the earlier cut, one thread: this run's baseline
    rate0, v0 = _rate(base, texts)
    rows.append(f"| baseline: 1 thread, cut at 256 | {rate0:.0f} | 1.000000 | {os.getloadavg()[0]:.1f} |")
    for label, threads in (("shipped, app: 1 thread, cut at 128", 1), ("shipped, import/rebuild: 1 thread a core", 0)):
        rate, v = _rate(semantic.load(threads=threads), texts)
        rows.append(f"| {label} | {rate:.0f} | {float((v * v0).sum(axis=1).min()):.6f} | {os.getloadavg()[0]:.1f} |")
    if candidate is not None:
        rows.append(f"| candidate {candidate.name}: 1 thread, speed only (another model) | {_candidate_rate(candidate, texts, base):.0f} | — | {os.getloadavg()[0]:.1f} |")
    base._tokenizer.no_padding()  # the word pieces of each text, unpadded
    lens = [len(e.ids) for e in base._tokenizer.encode_batch(texts)]
    head = [
        f"Embedding {len(texts)} LoCoMo turns (mean {np.mean(lens):.0f} word pieces, longest {max(lens)}):",
        "",
        "| setting | events/s | min cosine with the baseline | load (1 min) |",
        "| --- | ---: | ---: | ---: |",
    ]
    return head + rows


class _Once:
    """The shipped model, each distinct text embedded once (the session repeats LoCoMo's turns)."""

    def __init__(self, model: semantic.Embedder) -> None:
        self.model = model
        self.known: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        new = sorted({t for t in texts if t not in self.known})
        if new:
            for t, v in zip(new, self.model.embed(new), strict=True):
                self.known[t] = v
        return np.array([self.known[t] for t in texts], dtype=np.float32).reshape(len(texts), DIM)

    def describe(self) -> dict[str, str]:
        return self.model.describe()


def _size(d: Path) -> int:
    """index.sqlite's bytes once its write-ahead log is folded in (the log holds pages twice until then)."""
    import sqlite3

    conn = sqlite3.connect(d / "index.sqlite")
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return sum(p.stat().st_size for p in d.glob("index.sqlite*") if p.is_file())


def _parts(hybrid: Index, session: str, model: semantic.Embedder, qs: list[str]) -> str:
    """Where a hybrid search's extra time goes: the query's embedding, the check that the cached vectors are current
    (count and sum of the session's vector rows), and the vectorised scan (one matrix product, argpartition)."""
    from retrieval import sql
    from retrieval.semantic import cosines, nearest

    num = int(hybrid._reader().execute("SELECT num FROM watermarks WHERE session = ?", (session,)).fetchone()[0])
    lo, hi = sql.session_range(num)
    seqs, matrix = hybrid._session_vectors(num)
    t_q, t_state, t_count, t_scan = [], [], [], []
    for q in qs:
        t0 = time.perf_counter()
        v = model.embed([q])[0]
        t1 = time.perf_counter()
        hybrid._vector_state(num)
        t2 = time.perf_counter()
        nearest(cosines(matrix, v), 25)
        t3 = time.perf_counter()
        hybrid._reader().execute(sql.VECTORS_COUNTED, (lo, lo, hi)).fetchone()  # the check before vector_state
        t4 = time.perf_counter()
        t_q.append(1000 * (t1 - t0))
        t_state.append(1000 * (t2 - t1))
        t_scan.append(1000 * (t3 - t2))
        t_count.append(1000 * (t4 - t3))
    return (
        f"Parts of the hybrid's extra time ({len(qs)} queries, {seqs.size:,} vectors, p50/p95 ms): the query's "
        f"embedding {pct(t_q, 0.5):.1f}/{pct(t_q, 0.95):.1f}, the vectors' state check (vector_state row) "
        f"{pct(t_state, 0.5):.2f}/{pct(t_state, 0.95):.2f} (counting the vectors' rows instead, as before: "
        f"{pct(t_count, 0.5):.1f}/{pct(t_count, 0.95):.1f}), the dense scan {pct(t_scan, 0.5):.1f}/{pct(t_scan, 0.95):.1f}."
    )


@contextlib.contextmanager
def _pool(n: int) -> Iterator[None]:
    """A lexical search that reads `n` rows from FTS5 (as the hybrid does) instead of candidates_for(K)."""
    from storage.common.retrieval import searcher

    shipped = searcher.candidates_for
    searcher.candidates_for = lambda k: max(shipped(k), n)
    try:
        yield
    finally:
        searcher.candidates_for = shipped


def search_cost(out: Path, n: int, n_queries: int, data: list[dict]) -> list[str]:
    pool = [t.text for conv in data for t in turns(conv)]
    d = out / f"semantic-cost-{n}"
    session = "big"
    built = (d / "built").is_file()
    if not built:
        import shutil

        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        rng = random.Random(35)
        texts = [rng.choice(pool) for _ in range(n)]
        ledger = Ledger(d)
        for i in range(0, n, 50_000):
            ledger.append_many(session, [Message("user" if j % 2 == 0 else "assistant", t, {}) for j, t in enumerate(texts[i : i + 50_000])])
        index = Index(d, Ledger(d))
        t0 = time.perf_counter()
        index.catch_up()
        print(f"indexed {n} events in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        index.close()
    ledger = Ledger(d)
    lexical = Index(d, ledger)
    before = _size(d)
    model = semantic.load(threads=0)
    hybrid = Index(d, ledger)
    once = _Once(model)
    hybrid.use_semantic(once)
    t0 = time.perf_counter()
    embedded = hybrid.embed_pending(session)
    t_embed = time.perf_counter() - t0
    print(f"embedded {embedded} events ({len(once.known)} distinct texts) in {t_embed:.0f}s", file=sys.stderr)
    (d / "built").write_text("1")
    after = _size(d)
    n_vec = len(hybrid.vector_seqs(session))
    hybrid.use_semantic(semantic.load(threads=1))  # searches as the app runs: the real model embeds each query
    qs = [q.question for i, conv in enumerate(data) for q in questions(conv, i)]
    random.Random(7).shuffle(qs)
    qs = qs[:n_queries]
    times: dict[str, list[float]] = {"lexical": [], "hybrid": [], "pool": []}
    for q in qs[:10]:  # warm: the page cache, the statement cache, the session's vectors read once
        lexical.search(session, q, k=K)
        hybrid.search(session, q, k=K)
    for q in qs:  # interleaved: all see the same load
        for name, ix in (("lexical", lexical), ("hybrid", hybrid), ("pool", lexical)):
            t0 = time.perf_counter()
            if name == "pool":  # the lexical search reading the hybrid's pool of LEXICAL_POOL rows: that pool's cost
                with _pool(LEXICAL_POOL):
                    resp = ix.search(session, q, k=K)
            else:
                resp = ix.search(session, q, k=K)
            times[name].append(1000 * (time.perf_counter() - t0))
            assert name != "hybrid" or resp.mode == "hybrid"
    p = {name: (pct(v, 0.5), pct(v, 0.95)) for name, v in times.items()}
    parts = _parts(hybrid, session, semantic.load(threads=1), qs[:50])
    lexical.close()
    hybrid.close()
    return [
        f"One session of {n:,} events ({n_vec:,} with a vector), {len(qs)} LoCoMo questions, K = {K}, warm, interleaved:",
        "",
        "| search | p50 ms | p95 ms |",
        "| --- | ---: | ---: |",
        f"| lexical (default install, same run) | {p['lexical'][0]:.1f} | {p['lexical'][1]:.1f} |",
        f"| hybrid (semantic extra) | {p['hybrid'][0]:.1f} | {p['hybrid'][1]:.1f} |",
        f"| hybrid − lexical | {p['hybrid'][0] - p['lexical'][0]:+.1f} | {p['hybrid'][1] - p['lexical'][1]:+.1f} |",
        f"| lexical reading the hybrid's pool of {LEXICAL_POOL} rows | {p['pool'][0]:.1f} | {p['pool'][1]:.1f} |",
        "",
        parts,
        "",
        f"index.sqlite: {before / n:.0f} B/event lexical, {after / n:.0f} B/event with the vectors: "
        f"{(after - before) / n:.0f} B/event for the vectors ({BLOB_BYTES} B of float16 each).",
        f"Embedding through embed_pending (storage path, {len(once.known):,} distinct texts embedded once): "
        f"{embedded:,} events in {t_embed:.0f} s.",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--embed-sample", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    ap.add_argument("--skip-embedding", action="store_true", help="only the search part")
    ap.add_argument("--skip-search", action="store_true", help="only the embedding part")
    ap.add_argument("--candidate", type=Path, help="also time another ONNX sentence model file (speed only)")
    args = ap.parse_args(argv)
    print(machine())
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores shared with other workers)")
    data = load()
    if not args.skip_embedding:
        rng = random.Random(3)
        texts = [t.text for conv in data for t in turns(conv)]
        rng.shuffle(texts)
        print("\n".join(embedding(texts[: args.embed_sample], args.candidate)))
        print()
    if not args.skip_search:
        print("\n".join(search_cost(args.out, args.events, args.queries, data)))
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
