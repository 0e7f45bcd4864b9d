"""The Verify tab's "Why these memories" (issue 34; docs/FORMAT.md §24): the replay of a receipt's ranking, in words.

Shown under a receipt of the visitor's own session that verified against the ledger: the verdict of re-running the
search as it stood, the ranked list with the scores the ranking used, and each event the search ranked in its top K
but a rule left out, with the rule. Marks carry a word beside them (issue 31)."""

from __future__ import annotations

from chat.replay import DIFFERS, REPLAYED, Replay
from receipts.ranking import score_text
from webui.text import md

TITLE = "#### Why these memories"


def replay_markdown(r: Replay) -> str:
    """The section for one replay (r.verdict: replayed, differs or not_replayable)."""
    if r.verdict == REPLAYED:
        head = (f"✅ pass — **replayed**: the search as it stood when this turn ran (the session's events before the question, "
                f"its revocations and supersessions then) ranks the same {len(r.committed)} memories, in the same order, with "
                "the same scores. Nothing later changed why these were chosen.")
    elif r.verdict == DIFFERS:
        head = ("❌ FAIL — **the ranking differs**: the search as it stood does not rank what this receipt says it ranked "
                f"({len(r.differences)} difference(s)):\n\n" + "\n".join(f"- {md(d.line(), 300)}" for d in r.differences))
    else:
        head = "⚠️ not replayable — " + "; ".join(md(x, 300) for x in r.reasons)
    if not r.committed:
        return f"{TITLE}\n\n{head}"
    rows = ["| rank | seq | score the ranking used | matched | |", "|---:|---:|---:|---|---|"]
    for i, x in enumerate(r.committed, start=1):
        used = "handed to the model" if i <= r.cited else "ranked, not handed (did not fit the receipt)"
        rows.append(f"| {i} | {x.seq} | {score_text(x.score)} | {x.match} | {used} |")
    out = [TITLE, head, "\n".join(rows)]
    if r.left_out:
        out.append("Ranked among the top K without the rules, and left out by one:\n\n"
                   + "\n".join(f"- seq {lo.seq} (rank {lo.rank} without the rules): {md(lo.why, 200)}" for lo in r.left_out))
    if r.rules:
        out.append("Rules that fired: " + ", ".join(r.rules) + ".")
    return "\n\n".join(out)


def skipped_markdown(why: str) -> str:
    return f"{TITLE}\n\n{md(why, 300)}"


__all__ = ["replay_markdown", "skipped_markdown"]
