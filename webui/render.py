"""Domain values → what the UI shows (pure; no Gradio, no I/O).

Stamps come from a receipt body, so a turn just answered and a turn restored
from disk on reload are shown by the same code, from the same signed data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chat.llm import PROVIDER_GROQ, PROVIDER_OFFLINE
from ledger import Event, SessionReport
from ledger.event import is_erasure_record
from receipts.show import state_rows
from retrieval.explain import explain_lines
from retrieval.model import Hit
from webui.text import md, md_code, short, snippet

STAMP_SNIPPET = 160
SEARCH_SNIPPET = 300
LEDGER_SNIPPET = 120
LEDGER_ROWS = 500

# "match" is how the hit matched, which the ranking orders first (own words, then neighbours, then echoes: the
# retrieval tiers); "score" is the hit's share of the best score among the hits ranked with it by score alone
# (shown_scores), so the column never rises within a kind of match. The raw BM25, collapse and score are only in the
# explanation ("explain each hit"), where their parts say what they mean.
SEARCH_HEADERS = ["rank", "event id", "seq", "role", "text", "match", "score", "digest", "chain"]
LEDGER_HEADERS = ["seq", "role", "time (UTC)", "text", "digest", "chain"]
# Widths in pixels, not percentages: a percentage of a phone's 350 px gave "seq" 17 px and
# split every word letter by letter. Short columns are wide enough for their longest value on
# one line (webui/app CSS keeps them `nowrap`); only the text column wraps, at word boundaries.
# A table wider than the screen scrolls sideways instead.
SEARCH_WIDTHS = ["64px", "176px", "56px", "96px", "320px", "104px", "72px", "130px", "130px"]
LEDGER_WIDTHS = ["56px", "96px", "192px", "420px", "130px", "130px"]
EVENT_ID_PREFIX = 16  # "evt_" + 12 hex digits, like every other hash prefix shown


@dataclass(frozen=True, slots=True)
class Stamp:
    rank: int
    seq: int
    role: str
    text: str
    digest: str
    event_id: str
    # How retrieval matched it (Hit.match) when the live turn's hits are at hand; None for stamps rebuilt from a
    # stored receipt (the receipt does not sign it), which then show no label.
    match: str | None = None
    # Superseded at the turn (the receipt's signed `states`, FORMAT.md §20: a question about the past may be handed
    # an older statement, marked), and by which seq when the record says (None: it does not).
    superseded: bool = False
    superseded_by: int | None = None


@dataclass(frozen=True, slots=True)
class Stamps:
    """What one answer was built from and who wrote it, as its receipt says."""

    receipt_id: str
    k: int
    provider: str
    model: str
    fallback_reason: str | None
    memories: tuple[Stamp, ...]
    excluded: tuple[tuple[int, int], ...] = ()  # (revoked seq, the revocation's control seq) the search left out
    withheld: tuple[int, ...] | None = None  # consent turns: the proposed seqs the person withheld (None: no consent)


WITHHELD = "[withheld]"
FORGOTTEN = "[forgotten]"  # what the visitor sees wherever an erased event's text was


def _cited_text(event: Mapping[str, Any], missing: str) -> str:
    """A cited event's text; a format-2 receipt may withhold it (a redacted copy: no text, only its commitment)."""
    text = event.get("text")
    return text if isinstance(text, str) else missing


def stamps_from_body(body: Mapping[str, Any], missing: str = WITHHELD) -> Stamps:
    """`missing`: what a memory without text reads. A receipt stored in DATA_DIR loses a text only when the
    memory is forgotten (control.forget redacts it), so the restored history passes FORGOTTEN."""
    resp = body["response"]
    dead = superseded_at_turn(body)
    memories = tuple(
        Stamp(
            m["rank"],
            m["event"]["seq"],
            m["event"]["role"],
            _cited_text(m["event"], missing),
            m["event"]["digest"],
            m["event"]["id"],
            superseded=m["rank"] in dead,
            superseded_by=dead.get(m["rank"]),
        )
        for m in body["memories"]
    )
    excluded = tuple(
        (int(e["seq"]), int(e["control"]["event"]["seq"])) for e in body.get("exclusions", {}).get("revoked", [])
    )
    consent = body.get("consent")
    withheld = tuple(int(s) for s in consent.get("withheld", [])) if isinstance(consent, Mapping) else None
    return Stamps(
        body["receipt_id"],
        body["k"],
        resp["provider"],
        resp["model"],
        resp["fallback_reason"],
        memories,
        excluded,
        withheld,
    )


def superseded_at_turn(body: Mapping[str, Any]) -> dict[int, int | None]:
    """rank -> the seq that superseded that cited memory at the turn (None when the record does not name an integer
    seq), from the receipt's `states` (issue 12); {} when the receipt makes no claim (format 1, or no `states`)."""
    states = body.get("states")
    if not isinstance(states, Mapping):
        return {}
    return {
        row["rank"]: row["by_seq"] if type(row["by_seq"]) is int else None for row in state_rows(states)["superseded"]
    }


def with_matches(s: Stamps, hits: Iterable[Hit]) -> Stamps:
    """The stamps with each memory's `match` from the turn's hits (by seq): how retrieval matched it."""
    how = {h.seq: h.match for h in hits}
    return replace(s, memories=tuple(replace(m, match=how.get(m.seq)) for m in s.memories))


def decisions_lines(s: Stamps) -> list[str]:
    """What a person decided about this answer's memories, as the receipt records it (Markdown lines)."""
    lines = []
    if s.withheld is not None:
        w = ", ".join(f"seq {x}" for x in s.withheld) or "none"
        lines.append(f"**You chose** (ask me first): {len(s.memories)} approved; withheld from the model: {w}.  ")
    if s.excluded:
        parts = ", ".join(f"seq {x} (revocation at seq {c})" for x, c in s.excluded)
        lines.append(f"**Left out because you revoked them:** {parts}.  ")
    return lines


def provider_label(provider: str, model: str, fallback_reason: str | None) -> str:
    """Who answered, in words; the offline stand-in is never mistaken for a model (Markdown)."""
    if provider == PROVIDER_OFFLINE:
        why = f" ({md(fallback_reason, 200)})" if fallback_reason else ""
        return f"🔌 **offline stand-in** — no language model wrote this answer{why}"
    name = "Groq" if provider == PROVIDER_GROQ else md(provider, 60)
    return f"🤖 **{name}** · {md(model, 120)}"


def stamps_title(s: Stamps) -> str:
    """One line for the collapsed stamps under an answer (plain text: Gradio shows titles verbatim)."""
    who = "offline stand-in" if s.provider == PROVIDER_OFFLINE else f"{s.provider} · {s.model}"
    n = len(s.memories)
    return f"🧾 Stamps · {n} {'memory' if n == 1 else 'memories'} (K={s.k}) · {who} · {s.receipt_id}"


def stamps_markdown(s: Stamps) -> str:
    """The stamps: every memory handed to the model, who answered, and which receipt proves it."""
    lines = [
        f"**Answered by:** {provider_label(s.provider, s.model, s.fallback_reason)}  ",
        f"**Receipt:** `{s.receipt_id}` — the signed record of exactly what the model was handed.  ",
        *decisions_lines(s),
        "",
    ]
    if not s.memories:
        lines.append(f"_No stored memory matched, so the model was handed none (K={s.k})._")
        return "\n".join(lines)
    lines += [
        f"**{len(s.memories)} of K={s.k} memories handed to the model**, most relevant first:",
        "",
        "| # | seq | role | memory | digest |",
        "|---:|---:|---|---|---|",
    ]
    for m in s.memories:
        note = md_label(stamp_state_label(m) + match_label(m.match))
        lines.append(f"| {m.rank} | {m.seq} | {md(m.role, 20)} | {note}{md(m.text, STAMP_SNIPPET)} | `{short(m.digest)}` |")
    return "\n".join(lines)


NO_STAMPS = "_Stamps appear here after each answer: the memories the model was handed, who answered, and the receipt._"


# -- search ----------------------------------------------------------------------
def revoked_label(control_seq: int) -> str:
    """What a revoked memory's text starts with in the search results and the ledger (plain text: a table cell)."""
    return f"⛔ revoked (control event seq {control_seq}; kept, unused) · "


def superseded_label(new_seq: int) -> str:
    """What a superseded memory's text starts with in the search results and the ledger (plain text: a table cell,
    which `struck_styling` strikes through): the statement that replaced it (issue 12)."""
    return f"superseded by seq {new_seq} · "


def stamp_state_label(m: Stamp) -> str:
    """What a stamp's memory cell starts with when that memory was superseded at the turn (plain text): the words of
    the ledger view and Manual search, so an older statement handed to the model reads as one everywhere."""
    if not m.superseded:
        return ""
    return superseded_label(m.superseded_by) if m.superseded_by is not None else "superseded · "


def labels(seq: int, revoked: Mapping[int, int], superseded: Mapping[int, int]) -> str:
    """The labels a memory's text starts with: revoked, superseded (plain text)."""
    return (revoked_label(revoked[seq]) if seq in revoked else "") + (
        superseded_label(superseded[seq]) if seq in superseded else ""
    )


STRUCK = "text-decoration: line-through;"


def struck_styling(seqs: Sequence[int], superseded: Mapping[int, int], width: int, column: int) -> list[list[str]]:
    """Per-cell CSS for a table (gr.Dataframe's metadata.styling): the text cell of a superseded memory is struck
    through, every other cell unstyled. `seqs`: the rows' seqs in order."""
    return [[STRUCK if i == column and seq in superseded else "" for i in range(width)] for seq in seqs]


# How a hit matched (Hit.match), in the search table's "match" column: the kinds the ranking orders first.
MATCH_WORDS = {"own text": "own words", "context only": "neighbours", "echo": "echo", "newest statement": "newest"}


def score_groups(matches: Sequence[str | None]) -> list[int]:
    """For each hit (best first, by `Hit.match`), the group of hits the ranking ordered by score alone, best group
    first (retrieval.scoring.rank sorts by tier, then score): echoes after every other hit; hits matching only
    through neighbouring turns after those matching in their own words when the ranking put them there (the context
    tier, in a session of under 100 events) — among them when one ranks above a hit in its own words; a turn's slot
    for the newest statement last (chat.supersede.with_newest)."""
    seen_context, tiered = False, True
    for m in matches:
        seen_context = seen_context or m == "context only"
        if m == "own text" and seen_context:
            tiered = False  # ranked together: the context tier did not apply
    order = {"own text": 0, "context only": 1 if tiered else 0, "echo": 2, "newest statement": 3}
    return [order.get(m or "own text", 0) for m in matches]


def shown_scores(scores: Sequence[float], matches: Sequence[str | None]) -> list[float]:
    """What the score columns show (Manual search, its explanation, the ask-me-first tick boxes): each hit's score as
    a share of the best score in its group (score_groups; 1.0 for that best, 2 decimals), so within a kind of match the
    column follows the rank. A share of the best hit overall read 0.34 at rank 5 and 0.67 at rank 6, where rank 6
    was the best of the hits ranked after those matching in their own words."""
    groups = score_groups(matches)
    best: dict[int, float] = {}
    for g, score in zip(groups, scores, strict=True):
        best[g] = max(best.get(g, score), score)
    out = []
    for g, score in zip(groups, scores, strict=True):
        top = best[g]
        out.append(round(max(0.0, score / top), 2) if top > 0 and math.isfinite(top) else 1.0)
    return out


def hit_scores(hits: Sequence[Hit]) -> list[float]:
    return shown_scores([h.score for h in hits], [h.match for h in hits])


def search_rows(
    hits: Iterable[Hit], revoked: Mapping[int, int] | None = None, superseded: Mapping[int, int] | None = None
) -> list[list[Any]]:
    """`revoked`: seq -> the control event that revoked it (control.revocation.revoked_seqs); `superseded`: seq -> the
    seq that replaced it (issue 12). Those rows are labelled. The match column and the score (shown_scores) say
    together why each row is where it is."""
    rv, sp = revoked or {}, superseded or {}
    hits = list(hits)
    return [
        [
            h.rank,
            short(h.event_id, EVENT_ID_PREFIX),
            h.seq,
            h.role,
            labels(h.seq, rv, sp) + snippet(h.text, SEARCH_SNIPPET),
            MATCH_WORDS.get(h.match, h.match),
            score,  # readable where raw BM25 is ~1e-6
            short(h.digest),
            short(h.chain),
        ]
        for h, score in zip(hits, hit_scores(hits), strict=True)
    ]


def as_of_status(size: int, n: int, rules: Sequence[str]) -> str:
    """The status line of a Manual search "as of" a ledger size (issue 34)."""
    fired = f" Rules that fired: {', '.join(rules)}." if rules else ""
    return (f"**As of {size:,} events**: the {n} memor{'y' if n == 1 else 'ies'} a turn asked then would have been handed, "
            f"under that time's revocations and supersessions (the include and explain boxes apply to searches of now), "
            f"best first: {RANK_ORDER}{fired}")


def as_of_left_out(why_out: Mapping[int, tuple[int, str]]) -> str:
    """Each event the search without the rules ranked in its top K, and the rule that left it out."""
    if not why_out:
        return ""
    return "Left out by a rule:\n\n" + "\n".join(f"- seq {s} (rank {rank} without the rules): {md(why, 200)}" for s, (rank, why) in why_out.items())


def match_note(h: Hit) -> str:
    """What the text column says first when a hit did not match in its own words."""
    return match_label(h.match)


def match_label(match: str | None) -> str:
    """`Hit.match` as the label put before a memory's text (plain text): none for a hit matching in its own words.
    The same words in Manual search, the stamps and the ask-me-first tick boxes."""
    if match == "echo":
        return "[echo: repeats memories] "
    if match == "newest statement":
        return "[newest statement of what you asked] "
    return "[matched via neighbouring turns] " if match == "context only" else ""


def md_label(label: str) -> str:
    """A plain-text label put before a memory's text, escaped for Markdown (md drops the trailing space)."""
    return f"{md(label)} " if label.strip() else ""


def search_status(n: int, k: int, reason: str | None, mode: str = "lexical") -> str:
    """The line above the results; a hybrid search (the optional semantic extra) says so, a lexical one as before."""
    how = " Searched by words and by meaning (hybrid)." if mode == "hybrid" else ""
    if n == 0:
        return f"No results: {md(reason or 'nothing matched', 300)}.{how}"
    return (
        f"{n} result{'s' if n != 1 else ''} (K={k}), best first: {RANK_ORDER} Tick *explain each hit* to see why each "
        f"ranked where it did.{how}"
    )


# How the rows are ordered and what the score is, said the same way under Manual search and an imported session's.
RANK_ORDER = (
    "by *match* first — hits in their own words, then (in a session of under 100 events) those found only through "
    "neighbouring turns, then echoes, which only repeat memories — then by *score* within each: its share of the "
    "best score ranked with it (1 = best)."
)


def search_explanation(
    hits: Sequence[Hit], revoked: Mapping[int, int] | None = None, superseded: Mapping[int, int] | None = None
) -> str:
    """Why each hit ranked where it did (Markdown), from `Hit.explain` (search(..., explain=True)): the lines the
    CLI prints under each row (retrieval.explain.explain_lines), under the hit's rank, seq and text, labelled as
    in the table. The raw BM25 and score figures are shown here only. Hits searched without explain are skipped."""
    rv, sp = revoked or {}, superseded or {}
    blocks = []
    for h, score in zip(hits, hit_scores(hits), strict=True):
        if h.explain is None:
            continue
        label = labels(h.seq, rv, sp) + match_note(h)
        head = f"**#{h.rank} · seq {h.seq}** · {md(h.role, 20)} · score {score:.2f} · {md_label(label)}{md(h.text, 120)}"
        blocks.append("\n".join([head, "", *(f"- {md(line)}" for line in explain_lines(h.explain))]))
    if not blocks:
        return ""
    return "\n\n".join(["#### Why each hit ranked where it did", *blocks])


def search_refused(message: str) -> str:
    """The status of a query that was refused or failed: it replaces the last query's status (Markdown)."""
    return f"⛔ **No search:** {md(message.removeprefix('search: '), 300)}"  # the label says it once


# -- ledger ------------------------------------------------------------------------
def ledger_rows(
    events: Sequence[Event],
    limit: int = LEDGER_ROWS,
    revoked: Mapping[int, int] | None = None,
    superseded: Mapping[int, int] | None = None,
) -> list[list[Any]]:
    """The last `limit` events, oldest first; a revoked one (`revoked`: seq -> its revocation's seq) and a superseded
    one (`superseded`: seq -> the seq that replaced it) are labelled."""
    rv, sp = revoked or {}, superseded or {}
    return [
        [
            e.seq,
            e.role,
            short_ts(e.ts),
            labels(e.seq, rv, sp) + shown_text(e, LEDGER_SNIPPET),
            short(e.digest),
            short(e.chain),
        ]
        for e in events[-limit:]
    ]


def shown_text(ev: Event, limit: int | None = None) -> str:
    """An event's text as the page shows it: an erased event (its words are gone from the ledger) reads [forgotten]."""
    if ev.erased:
        return FORGOTTEN
    return ev.text if limit is None else snippet(ev.text, limit)


def short_ts(ts: str) -> str:
    """`2026-12-03T12:59:19.123456Z` as `2026-12-03 12:59:19`: to the second, on one line (the ledger keeps it all)."""
    if len(ts) >= 20 and ts[10] == "T" and ts.endswith("Z"):
        return f"{ts[:10]} {ts[11:19]}"
    return ts


def chain_status(report: SessionReport | None, shown: int, total: int) -> str:
    """The chain's verification status (Markdown)."""
    if report is None:
        return "_This session has no events yet: say something on the Chat tab._"
    more = f" (the table shows the last {shown})" if shown < total else ""
    if report.ok:
        return (
            f"✅ **Chain intact:** all {report.events} events re-verified from genesis just now — every digest "
            f"recomputed, every link re-walked{more}. Head: `{short(report.head, 16)}`"
        )
    brk = report.brk
    if brk is None:  # defensive: a failed report always names its break
        return "❌ **Chain broken** (no detail available)."
    detail = f"line {brk.line}, seq {brk.seq}, {md(brk.kind)}: {md(brk.message, 300)}"
    values = ""
    if brk.expected is not None or brk.found is not None:
        values = f" — expected {md_code(short(str(brk.expected), 24))}, found {md_code(short(str(brk.found), 24))}"
    return f"❌ **Chain broken** after {report.events} good events, at {detail}{values}"


def checkpoint_text(checkpoint: Mapping[str, Any] | None) -> str:
    """The latest signed checkpoint, as JSON (the object `python -m receipts checkpoint` prints)."""
    if checkpoint is None:
        return "// no signed checkpoint yet: one is signed after every event appended"
    return json.dumps(checkpoint, indent=2, sort_keys=True)


def key_markdown(key_id: str) -> str:
    return (
        f"**Signing key id:** `{key_id}`  \n"
        "Save the public key below as `signing.pub`, then check any receipt from this app offline:  \n"
        "`python -m receipts verify receipt.json --trust signing.pub`"
    )


OLD_KEY_WARNING = (
    "⚠ This key is in the old format, without check characters: it still opens this session, but a mistyped "
    "copy of it would open another, empty one without a word. Keys made now end in 6 check characters, so a typo "
    "is refused; **New session** makes one (this session stays under this key)."
)


UNKNOWN_KEY_NOTE = "new session: no history under this key — check it if you expected one"


def session_markdown(session: str, *, old_key: bool = False, unknown: bool = False) -> str:
    """The session note; `unknown`: a key pasted into the box that opens no history (a typo opens a new session)."""
    if unknown:
        return f"⚠️ **{UNKNOWN_KEY_NOTE[0].upper()}{UNKNOWN_KEY_NOTE[1:]}.**\n\n" + session_markdown(session, old_key=old_key)
    note = (
        f"**Session id:** `{session}` — public: it is written into every receipt of this session.  \n"
        "Your **session key** (in the box) is the secret that opens it: anyone holding the key can read "
        "this session, so share receipts, never the key. It stays in this browser, so a reload resumes."
    )
    return f"{note}\n\n{OLD_KEY_WARNING}" if old_key else note


# -- the chat history ----------------------------------------------------------------
PENDING = "⏳ …"


def literal(text: str) -> str:
    """Text shown exactly as written (escaped Markdown), line breaks kept: what the receipt hashes is what is shown."""
    return "  \n".join(md(line) for line in text.split("\n"))


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": literal(text)}


def answer_message(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": literal(text)}


def stamps_message(s: Stamps) -> dict[str, Any]:
    """The stamps under an answer, collapsed to one line until opened."""
    return {
        "role": "assistant",
        "content": stamps_markdown(s),
        "metadata": {"title": stamps_title(s), "status": "done"},
    }


ERASURE_TITLE = "🗑️ forgotten at your request"


def note_message(text: str, title: str = "⚠️ note") -> dict[str, Any]:
    return {"role": "assistant", "content": literal(text), "metadata": {"title": title, "status": "done"}}


def history_messages(past: Sequence[tuple[Event, Mapping[str, Any] | None]]) -> list[dict[str, Any]]:
    """A restored session as chat messages: each answer followed by its stamps when its receipt is on disk.
    An erased event reads [forgotten] (an erased answer has lost the meta that named its receipt: no stamps)."""
    out: list[dict[str, Any]] = []
    for ev, body in past:
        text = shown_text(ev)
        if ev.role == "user":
            out.append(user_message(text))
        elif ev.role == "assistant":
            out.append(answer_message(text))
            if body is not None:
                out.append(stamps_message(stamps_from_body(body, FORGOTTEN)))
        elif is_erasure_record(ev):  # what was forgotten, in counts (never the words)
            out.append(note_message(text, ERASURE_TITLE))
        else:
            out.append(note_message(text))
    return out


def provider_now(described: Mapping[str, object]) -> str:
    """Who will answer, before anyone asks (from chat.llm.LLM.describe(), which never holds the key)."""
    if not described.get("configured"):
        return (
            "Answers come from the 🔌 **offline stand-in**: `GROQ_API_KEY` is not set, so no language model is called. "
            "It quotes the retrieved memories, and every reply says it is the stand-in."
        )
    return (
        f"Answers come from 🤖 **Groq** · {md(str(described.get('model', '')), 120)}. If a call fails, the offline "
        "stand-in answers instead and the reply and its receipt say so."
    )
