"""`python -m retrieval`: a thin layer over Index (argument parsing, printing, exit codes).

Exit codes: 0 success (zero results included), 2 unusable arguments, an
unknown session or unreadable data, 1 an unexpected internal error. Errors
are one `error: ...` line on stderr, never a traceback.

`search` leaves out what the visitor revoked (control.revocation), as a turn
and the app's search do; `--include-revoked` shows it, labelled as the app
labels it ("⛔ revoked (control event seq N; kept, unused)"; JSON: `revoked_by`).
It leaves out a superseded statement too (FORMAT.md §19: a newer one replaced it), as a turn does for a
question about now; `--history` shows it, labelled "[superseded by seq N]" (JSON: every hit carries
`superseded_by`, the id of the statement that replaced it, or null, and `superseded_by_seq`).
Control events are never results: the index holds no row for them.

With $DATABASE_URL set, both commands read and write the PostgreSQL index and ledger instead (storage.stores, the
same arguments; DATA_DIR must still exist: it is where the deployment keeps its key). storage.pg is imported only
then, so the file path's start-up time is untouched.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from cli.support import EXPECTED_DATA_DIR, CliError, describe_os_error, entry_point, given_path, shown_arg
from ledger import EventError, validate_session_id
from ledger.corrupted import LedgerCorrupted
from retrieval.explain import explain_lines
from retrieval.model import DEFAULT_K, MAX_K, MIN_K, RetrievalError, SearchError, SearchResponse, check_k
from retrieval.semantic import FUSION
from storage import admin
from storage.admin import INDEX_FILE

if TYPE_CHECKING:
    from storage.admin import LedgerStore

USAGE_ERROR = 2


class UsageError(Exception):
    """Arguments or data the command cannot use (exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse prints usage and exits 2 itself; keep our format
        self.print_usage(sys.stderr)
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m retrieval", description="The Memory Receipt Engine's search index.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("rebuild", help="rebuild DATA_DIR/index.sqlite from the ledgers")
    r.add_argument("data_dir", metavar="DATA_DIR")
    r.add_argument(
        "--semantic",
        action="store_true",
        help="then embed every event with the optional semantic extra (requirements-semantic.txt), with a progress bar",
    )
    r.set_defaults(func=cmd_rebuild)
    s = sub.add_parser("search", help="search one session")
    s.add_argument("data_dir", metavar="DATA_DIR")
    s.add_argument("session", metavar="SESSION")
    s.add_argument("query", metavar="QUERY", nargs="?")
    s.add_argument("--queries", metavar="FILE", help="one query per line; prints one JSON line per query")
    s.add_argument("-k", type=int, default=DEFAULT_K, help=f"results per query, {MIN_K}..{MAX_K} (default {DEFAULT_K})")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    s.add_argument(
        "--include-revoked",
        action="store_true",
        help="also show memories the visitor revoked, each labelled with the control event that revoked it",
    )
    s.add_argument(
        "--history",
        action="store_true",
        help="also show statements a newer one superseded, each labelled with the seq that replaced it",
    )
    s.add_argument(
        "--as-of",
        metavar="SIZE|CHECKPOINT",
        help="search the memory as it stood when the ledger held SIZE events (or at a kept checkpoint file: JSON or a "
        "signed note), under that time's revocations and supersessions, with a turn's rules; a receipt's question seq "
        "gives that receipt's memories",
    )
    s.add_argument(
        "--explain",
        action="store_true",
        help="per hit: the matched terms and their weights, the raw BM25 and collapse figures, the rules that fired",
    )
    s.add_argument(
        "--semantic",
        action="store_true",
        help="hybrid search with the optional semantic extra (requirements-semantic.txt): lexical and dense, fused",
    )
    s.set_defaults(func=cmd_search)
    return p


def _data_dir(raw: str) -> Path:
    path = given_path(raw, what="DATA_DIR", expected=EXPECTED_DATA_DIR)
    if not path.is_dir():
        raise UsageError(f"{shown_arg(raw)}: not a directory")
    return path


BAR_FROM_EVENTS = 20_000  # a search that must first index fewer new events than this shows no bar


def _progress_bar(ledger: Any) -> Any:
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    total = sum(ledger.head(s)[0] for s in ledger.sessions())
    return tqdm(total=total, unit="ev", file=sys.stderr, desc="indexing")


def _indexing_bar(index: Any, session: str) -> Any:
    """A bar for the indexing a search must do first (the first search after an import), on a terminal only
    (on files: PostgreSQL's index shows none)."""
    if not sys.stderr.isatty():
        return None
    todo = admin.events_to_index(index, session)
    if todo is None or todo < BAR_FROM_EVENTS:
        return None
    from tqdm import tqdm

    return tqdm(total=todo, unit="ev", file=sys.stderr, desc="indexing")


def _database() -> str | None:
    from cli.stores import database_for

    return database_for()


def _semantic_or_none(args: argparse.Namespace) -> Any:
    """The semantic extra's model when --semantic was given (loaded first: an unusable one stops before any work)."""
    if not getattr(args, "semantic", False):
        return None
    from storage.api import SemanticUnavailable, semantic_model

    try:
        return semantic_model(threads=0)  # rebuild embeds in bulk: one thread a core
    except SemanticUnavailable as exc:
        raise CliError(str(exc)) from None


def _embed_all(index: Any, ledger: Any, model: Any) -> None:
    """Every session's events embedded (the vectors a rebuild dropped), with a bar on a terminal; one summary line."""
    if model is None:
        return
    index.use_semantic(model)
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="ev", file=sys.stderr, desc="embedding")
    started, n = time.perf_counter(), 0
    try:
        for session in ledger.sessions():
            n += index.embed_pending(session, progress=None if bar is None else bar.update)
    finally:
        if bar is not None:
            bar.close()
    print(f"embedded {n} events with {index.semantic['model']} in {time.perf_counter() - started:.1f}s")


def cmd_rebuild(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args.data_dir)
    model = _semantic_or_none(args)
    url = _database()
    if url is not None:
        return _rebuild_database(data_dir, url, model)
    ledger = admin.file_ledger(data_dir)
    started = time.perf_counter()
    index = admin.file_index(data_dir, ledger)
    bar = _progress_bar(ledger)
    counted = {"events": 0}

    def progress(_session: str, n: int) -> None:
        counted["events"] += n
        if bar is not None:
            bar.update(n)

    try:
        warnings = index.rebuild(progress)
    finally:
        if bar is not None:
            bar.close()
    _save_control_states(ledger)
    for w in index.warnings + warnings:
        print(f"warning: {w}", file=sys.stderr)
    sessions, events = admin.index_totals(index)
    _embed_all(index, ledger, model)
    size = admin.file_index_bytes(data_dir)
    index.close()
    print(
        f"rebuilt {index.path}: {sessions} sessions, {events} events in "
        f"{time.perf_counter() - started:.1f}s, {size / 1e6:.1f} MB"
    )
    return 0


def _rebuild_database(data_dir: Path, url: str, model: Any = None) -> int:
    """`rebuild` on PostgreSQL: the search tables emptied and every session indexed again from the ledger rows."""
    from cli.stores import opened_stores

    started = time.perf_counter()
    with opened_stores(data_dir, url) as stores:
        bar = _progress_bar(stores.ledger)
        counted = {"sessions": 0, "events": 0}

        def progress(_session: str, n: int) -> None:
            counted["events"] += n
            if bar is not None:
                bar.update(n)

        try:
            warnings = stores.index.rebuild(progress)
        finally:
            if bar is not None:
                bar.close()
        for w in stores.index.warnings + warnings:
            print(f"warning: {w}", file=sys.stderr)
        _embed_all(stores.index, stores.ledger, model)
        sessions = stores.ledger.sessions()
        events = sum(stores.ledger.head(s)[0] for s in sessions)
        where = stores.where
    print(f"rebuilt the index in {where}: {len(sessions)} sessions, {events} events in {time.perf_counter() - started:.1f}s")
    return 0


def _save_control_states(ledger: LedgerStore) -> None:
    """A rebuild is a writer's command: leave each session's control-state.json up to date (control.state_file), so
    the searches that follow, which only read, fold only what is appended after it."""
    from control.revocation import current  # the edge only: control builds on this package, not the reverse

    for session in ledger.sessions():
        current(ledger, session, save=True)


def revoked_label(control_seq: int) -> str:
    """What a revoked memory's text starts with: the app's label (webui.render.revoked_label), word for word."""
    return f"\u26d4 revoked (control event seq {control_seq}; kept, unused) \u00b7 "


def superseded_label(new_seq: int) -> str:
    """What a superseded statement's text starts with in the table."""
    return f"[superseded by seq {new_seq}] "


def format_table(
    resp: SearchResponse, *, explain: bool = False, revoked: Mapping[int, int] | None = None, superseded: Mapping[int, int] | None = None
) -> str:
    """Rank, seq, role, score (a share of the best hit's, 1.00 = best), how it matched, text.

    With `explain`, each row is followed by why it ranked there (Hit.explain). `revoked`: seq -> the control
    event that revoked it; those rows' text starts with revoked_label. `superseded`: seq -> the seq of the
    statement that replaced it; those rows' text starts with superseded_label.
    """
    if not resp.results:
        return f"no results: {resp.reason}"
    rv = revoked or {}
    sp = superseded or {}
    lines = [f"{'rank':>4}  {'seq':>6}  {'role':<9}  {'score':>5}  {'match':<12}  text"]
    for h in resp.results:
        text = " ".join(h.text.split())
        if len(text) > 90:
            text = text[:89] + "\u2026"
        if h.seq in rv:
            text = revoked_label(rv[h.seq]) + text
        if h.seq in sp:
            text = superseded_label(sp[h.seq]) + text
        lines.append(f"{h.rank:>4}  {h.seq:>6}  {h.role:<9}  {h.relative:>5.2f}  {h.match:<12}  {text}")
        if explain and h.explain is not None:
            lines.extend("        " + line for line in explain_lines(h.explain))
    lines.append("score: each hit's share of the best hit's score (1.00 = best); --explain shows the raw figures")
    if resp.mode != "lexical":
        lines.append(f"mode: {resp.mode} (lexical and dense, fused: {FUSION.method}, retrieval/semantic.py)")
    if resp.unused_terms:
        shown = ", ".join(resp.unused_terms[:10]) + (" …" if len(resp.unused_terms) > 10 else "")
        lines.append(f"not searched ({len(resp.unused_terms)} more common or later terms): {shown}")
    return "\n".join(lines)


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def cmd_search(args: argparse.Namespace) -> int:
    if (args.query is None) == (args.queries is None):
        raise UsageError("give either QUERY or --queries FILE")
    k = check_k(args.k)
    try:
        validate_session_id(args.session)
    except EventError as exc:
        raise UsageError(str(exc)) from None
    data_dir = _data_dir(args.data_dir)
    if getattr(args, "as_of", None) is not None:
        return _search_as_of(args, data_dir, k)
    url = _database()
    ledger = None
    if url is None:
        ledger = admin.file_ledger(data_dir, record_tails=False)  # searching only reads: no tail record written back either
        if not ledger.exists(args.session):
            raise UsageError(f"session {args.session}: no such session in {data_dir}")
        ledger.head(args.session)  # raises LedgerCorrupted (exit 2) when the ledger does not verify
    queries: list[str] | None = None
    if args.queries is not None:
        try:
            queries_file = given_path(args.queries, what="--queries", expected="expected a text file, one query per line")
            queries = queries_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            why = describe_os_error(exc) if isinstance(exc, OSError) else f"{args.queries}: not UTF-8 text"
            raise UsageError(f"cannot read the queries: {why}; expected a text file, one query per line") from None
    if ledger is None:
        assert url is not None
        return _search_database(args, data_dir, url, queries, k)
    scratch: tempfile.TemporaryDirectory[str] | None = None
    if admin.has_file_index(data_dir):
        index = admin.file_index(data_dir, ledger)
    elif admin.can_keep_file_index(data_dir):  # no index yet (a data directory from before imports indexed): made once, kept
        print(f"note: {data_dir} had no {INDEX_FILE}; indexing the session into one, kept for the searches after", file=sys.stderr)
        index = admin.file_index(data_dir, ledger)
    else:  # a data directory this process cannot write: the one place a throwaway index is used
        scratch = tempfile.TemporaryDirectory(prefix="mre-search-")
        index = admin.file_index(scratch.name, ledger)
        print(f"note: {data_dir} is read-only and has no {INDEX_FILE}; searched a temporary index, not kept", file=sys.stderr)
    try:
        return _search(args, index, queries, k)
    finally:
        index.close()
        if scratch is not None:
            scratch.cleanup()


def _search_database(args: argparse.Namespace, data_dir: Path, url: str, queries: list[str] | None, k: int) -> int:
    """`search` on PostgreSQL: the session must exist in the database; it is indexed up to its ledger first."""
    from cli.stores import opened_stores

    with opened_stores(data_dir, url) as stores:
        if not stores.ledger.exists(args.session):
            raise UsageError(f"session {args.session}: no such session in {stores.where}")
        return _search(args, stores.index, queries, k)


def _revoked(index: Any, session: str) -> dict[int, int]:
    """revoked seq -> the control event that revoked it, derived from the ledger (FORMAT.md §17)."""
    from control.revocation import current  # the edge only: control builds on this package, not the reverse

    return {s: r.control_seq for s, r in current(index.ledger, session).revoked.items()}


def _superseded(index: Any, session: str) -> dict[int, tuple[int, str]]:
    """superseded seq -> (seq, id) of the statement that replaced it, derived from the ledger (FORMAT.md §19)."""
    from control.supersession import current_supersessions  # the edge only, as for _revoked

    return {s: (x.new_seq, x.new_id) for s, x in current_supersessions(index.ledger, session).superseded.items()}


def _results(resp: SearchResponse, revoked: Mapping[int, int], superseded: Mapping[int, tuple[int, str]]) -> list[dict[str, Any]]:
    """The hits as JSON objects, each with `revoked_by` (the control event that revoked it, or null) and
    `superseded_by` / `superseded_by_seq` (the statement that replaced it, or null)."""
    out = []
    for h in resp.results:
        by = superseded.get(h.seq)
        out.append({**h.to_dict(), "revoked_by": revoked.get(h.seq), "superseded_by": None if by is None else by[1], "superseded_by_seq": None if by is None else by[0]})
    return out


def _as_of_size(raw: str, session: str, ledger: Any) -> int:
    """--as-of: a ledger size, or a kept checkpoint of this session (JSON, or a C2SP signed note) whose chain head is
    the ledger's at its size (else it is another history's: refused)."""
    from ledger.event import GENESIS
    from receipts.checkpoints import MalformedCheckpoint, parse_checkpoint
    from receipts.note import CHAIN_HEAD_EXTENSION, MalformedNote, parse_checkpoint_text, parse_note

    if raw.isascii() and raw.isdigit():
        return int(raw)
    path = given_path(raw, what="--as-of", expected="expected a ledger size or a kept checkpoint file")
    cap = 1 << 20  # a checkpoint is a few hundred bytes: read no more than this of what is named (/dev/zero, a FIFO)
    try:
        if path.exists() and not path.is_file():
            raise UsageError(f"--as-of {path.name}: not a regular file; expected a ledger size or a kept checkpoint file")
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError as exc:
        raise UsageError(f"--as-of: {describe_os_error(exc)}") from None
    if len(data) > cap:
        raise UsageError(f"--as-of {path.name}: over {cap:,} bytes; not a checkpoint")
    try:
        body = parse_checkpoint(data, source=path.name)["body"]
        size, head, cp_session = body["tree_size"], body["chain_head"], body["session"]
    except MalformedCheckpoint as exc:
        try:
            text = parse_checkpoint_text(parse_note(data).text)
        except (MalformedNote, UnicodeDecodeError):
            raise UsageError(f"--as-of {path.name}: neither a ledger size nor a checkpoint ({exc})") from None
        heads = {e[len(CHAIN_HEAD_EXTENSION):] for e in text.extensions if e.startswith(CHAIN_HEAD_EXTENSION)}
        if len(heads) != 1:  # the chain head is what ties a size to this ledger's history: without it, any note would do
            raise UsageError(f"--as-of {path.name}: a note without exactly one {CHAIN_HEAD_EXTENSION.strip()} line cannot be "
                             "tied to this ledger; give the size, or the checkpoint's JSON") from None
        size, head, cp_session = text.size, heads.pop(), text.origin.rsplit("/", 1)[-1]
    if cp_session != session:
        raise UsageError(f"--as-of {path.name}: a checkpoint of session {cp_session!r}, not {session}")
    now = ledger.head(session)[0]
    if size > now:
        raise UsageError(f"--as-of {path.name}: a checkpoint of {size} events; the session holds {now}")
    have = ledger.read_events(session, [size - 1])[0].chain if size else GENESIS.hex()
    if head != have:
        raise UsageError(f"--as-of {path.name}: its chain head at {size} events is not this ledger's: another history")
    return int(size)


def _search_as_of(args: argparse.Namespace, data_dir: Path, k: int) -> int:
    """`search --as-of`: the turn's retrieval (chat.retrieve) over the session as it stood (chat.replay.search_as_of)."""
    from chat.citing import Cites
    from chat.replay import AsOfError, search_as_of
    from cli.stores import data_stores
    from receipts.ranking import score_text

    if args.queries is not None or args.semantic:
        raise UsageError("--as-of searches one QUERY, lexically (not with --queries or --semantic)")
    if args.include_revoked or args.history or args.explain:
        raise UsageError("--as-of shows what a turn would have been handed then: not with --include-revoked, --history or --explain")
    with data_stores(str(data_dir)) as stores:
        if not stores.ledger.exists(args.session):
            raise UsageError(f"session {args.session}: no such session in {data_dir}")
        size = _as_of_size(args.as_of, args.session, stores.ledger)
        try:
            got = search_as_of(stores, Cites(stores), args.session, args.query, k, size)
        except AsOfError as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        sys.stdout.write(_dumps({
            "session": args.session, "query": args.query, "k": k, "as_of": size, "mode": got.mode, "rules": list(got.rules),
            "results": [{"rank": i, "seq": h.seq, "event_id": h.event_id, "role": h.role, "ts": h.ts, "score": score_text(h.score),
                         "match": h.match, "text": h.text} for i, h in enumerate(got.hits, start=1)],
            "left_out": [{"seq": s, "rank": r, "why": why} for s, (r, why) in got.why_out.items()],
        }) + "\n")
        return 0
    print(f"as of {size} events (what a turn asked then would have been handed)")
    if not got.hits:
        print("no results")
    else:
        print(f"{'rank':>4}  {'seq':>6}  {'role':<9}  {'score':>10}  {'match':<16}  text")
        for i, h in enumerate(got.hits, start=1):
            text = " ".join(h.text.split())
            text = text if len(text) <= 90 else text[:89] + "\u2026"
            print(f"{i:>4}  {h.seq:>6}  {h.role:<9}  {h.score:>10.3g}  {h.match:<16}  {text}")
    for s, (r, why) in got.why_out.items():
        print(f"left out: seq {s} (rank {r} without the rules): {why}")
    return 0


def _search(args: argparse.Namespace, index: Any, queries: list[str] | None, k: int) -> int:
    if getattr(args, "semantic", False):
        from storage.api import SemanticUnavailable, semantic_model

        try:
            index.use_semantic(semantic_model())
        except SemanticUnavailable as exc:
            raise CliError(str(exc)) from None
    bar = _indexing_bar(index, args.session)
    try:
        indexed = index.index_session(args.session, progress=None if bar is None else lambda _s, n: bar.update(n))
    finally:
        if bar is not None:
            bar.close()
    for w in index.warnings + indexed:
        print(f"warning: {w}", file=sys.stderr)
    revoked = _revoked(index, args.session)
    superseded = _superseded(index, args.session)
    exclude = sorted(({} if args.include_revoked else revoked).keys() | ({} if args.history else superseded).keys())
    shown = revoked if args.include_revoked else {}
    labels = {s: by[0] for s, by in superseded.items()}
    out = sys.stdout
    if queries is not None:
        for q in queries:
            resp = index.search(args.session, q, k, exclude, explain=args.explain)
            line = {"query": q, "results": _results(resp, shown, superseded), "reason": resp.reason}
            if resp.mode != "lexical":
                line["mode"] = resp.mode
            out.write(_dumps(line) + "\n")
    else:
        resp = index.search(args.session, args.query, k, exclude, explain=args.explain)
        if args.json:
            semantic = {"semantic": index.semantic} if resp.mode != "lexical" else {}
            out.write(_dumps({**resp.to_dict(), **semantic, "results": _results(resp, shown, superseded)}) + "\n")
        else:
            out.write(format_table(resp, explain=args.explain, revoked=shown, superseded=labels) + "\n")
    out.flush()
    return 0


@entry_point
def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    return guarded(args.func, args)


def guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command with this CLI's exit codes: one `error: ...` line, never a traceback (`mre search` too)."""
    try:
        return command(args)
    except (UsageError, SearchError, CliError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        raise  # the reader of stdout went away: entry_point ends quietly
    except OSError as exc:
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return USAGE_ERROR
    except (LedgerCorrupted, RetrievalError, EventError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # never a traceback on the terminal
        print(f"error: unexpected failure: {exc or 'no details'}", file=sys.stderr)
        return 1
