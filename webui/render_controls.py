"""What the two controls show (pure: domain values → Markdown and choices; no Gradio, no I/O).

Revoke / Restore (control.revocation) and ask me first (chat.consent): the result line after a
revoke or restore, and the proposed memories as tick-box choices. Memory texts are the visitor's:
they go through `md` (Markdown) or `short_text` (plain-text labels).
"""

from __future__ import annotations

from collections.abc import Sequence

from chat.consent import Candidate
from control.revocation import ControlResult
from ledger.controls import MAX_CONTROL_REASON, REVOKE
from webui.render import match_label, short_ts, shown_scores
from webui.render_forget import short_text
from webui.text import md

# Said beside every Revoke and Restore button (and Forget…): the two are not the same act.
NOT_ERASURE = "Forget destroys the words; Revoke keeps them on record, unused by answers until you restore them."
REVOKE_LABEL = "⛔ Revoke"
RESTORE_LABEL = "↩ Restore"
# The optional reason beside Revoke / Restore: kept in the ledger for good (control.plan.quoted refuses one that
# repeats the memory's words or numbers).
REASON_LABEL = (
    "Reason for Revoke / Restore / Correct this (optional; kept on record for good, so do not repeat the memory's words)"
)
MAX_REASON = MAX_CONTROL_REASON
CONSENT_LABEL = "Ask me before memories reach the model"
CONSENT_SEND_LABEL = "Send with the ticked memories"
CONSENT_CANCEL_LABEL = "Cancel (nothing is sent)"
CONSENT_OFF = (
    "_Ask me first is **off** for this session: each message goes to the model with the memories retrieval picks._"
)
CONSENT_ON = (
    "_Ask me first is **on** for this session (kept on the server: a reload or another device finds it on): after "
    "you send a message, the memories retrieval picked are shown here first; only the ones you tick reach the "
    "model, and the receipt records what you decided._"
)
NOTE = f"_{NOT_ERASURE}_"

WAITING_TITLE = "✋ waiting for you: which memories may the model see?"
WAITING = "Nothing has been sent yet. Untick the memories you do not want used, then Send (or Cancel)."
CANCELLED_TITLE = "✋ cancelled: nothing was sent to the model, no answer, no receipt"
CANCELLED = "Cancelled: nothing was sent to the model, nothing was stored, and there is no answer or receipt."


def consent_unreadable(reason: str) -> str:
    """The setting's file could not be read: shown on (fail closed), with the reason naming the file."""
    return f"_Ask me first is treated as **on** for this session: its setting could not be read — {md(reason, 400)}._"


def result_markdown(result: ControlResult) -> str:
    """After a revoke or restore: what was done, and the control event that records it."""
    if result.action == REVOKE:
        what = "✅ **Revoked:** answers no longer use it; the words are kept on record (restore brings it back)"
    else:
        what = "✅ **Restored:** answers may use it again"
    why = f" Reason: {md(result.reason, 200)}." if result.reason else ""
    return f"{what} — seq {result.seq} (`{result.event_id[:16]}…`). Control event at seq {result.control_seq}.{why}"


def refused_markdown(what: str, why: str) -> str:
    """The status line beside Revoke / Restore / Correct this / History when it is refused: `what` did not happen
    ("Not revoked", …), and why (the refusal's one line; it never quotes the memory: control.plan.quoted)."""
    return f"⚠️ **{what}:** {md(why, 400)}"


def candidate_label(c: Candidate, score: float) -> str:
    """One tick box: rank, seq, when, score (webui.render.shown_scores: a share of the best score ranked with it,
    1.00 = best, as in Manual search) and the text, labelled when it matched only through its neighbours or is an
    echo (plain text, one line)."""
    return (
        f"#{c.rank} · seq {c.seq} · {c.role} · {short_ts(c.ts)} · score {score:.2f} · "
        f"{match_label(c.match)}{short_text(c.text, 120)}"
    )


def candidate_choices(candidates: Sequence[Candidate]) -> list[tuple[str, str]]:
    """(label, event id) for each proposed memory, best first (the value is what Engine.answer takes)."""
    scores = shown_scores([c.score for c in candidates], [c.match for c in candidates])
    return [(candidate_label(c, score), c.event_id) for c, score in zip(candidates, scores, strict=True)]


def proposal_markdown(n: int, k: int, excluded: Sequence[int]) -> str:
    """Above the tick boxes: what the person is deciding."""
    if n == 0:
        head = f"**No stored memory matched** (K={k}): Send asks with the question alone."
    else:
        head = (
            f"**{n} memor{'ies' if n != 1 else 'y'} would reach the model** (K={k}), best first. Untick any you do "
            "not want used, then Send; Cancel sends nothing."
        )
    if excluded:
        head += f" Left out because you revoked them: {', '.join(f'seq {s}' for s in excluded)}."
    return head
