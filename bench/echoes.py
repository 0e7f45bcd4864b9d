"""How many of the K memories handed to the model are echoes, in a scripted offline chat.

    python bench/echoes.py [--k 7]
    PYTHONPATH=OLD python bench/echoes.py      # the same chat through an older retrieval/ in OLD

A scripted chat (statements about a cat, a move, a job; questions about them) runs through
chat.Engine with the offline stand-in, whose every reply quotes memories or says it has
none. For each turn: the K slots, how many went to echoes (the stand-in's replies, and
questions asked before), how many other memories ranked below the first echo, and how many
user statements sharing a word with the message were left out while an echo held a slot. The echo test is made here, from the
events' roles and meta, so an older retrieval (whose hits carry no echo flag) is measured
the same way.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE.parent)]

from chat.engine import Engine  # noqa: E402
from chat.llm import LLM  # noqa: E402

SCRIPT = [
    "My cat is called Luna",
    "What is my cat called?",
    "Actually the cat is called Mochi now",
    "Tell me about my cat",
    "What is the cat called now?",
    "I moved to Lisbon in March for a new job",
    "Where did I move?",
    "The new job is at a bakery near the river",
    "Where do I work now?",
    "What is my cat called and where do I live?",
]


def is_echo_event(role: str, meta: dict[str, object], text: str, seen_before: set[str]) -> bool:
    """The stand-in's replies; a question whose content terms (at most 20% new) were all said before it."""
    from retrieval.text import content_terms

    if role == "assistant":
        return meta.get("provider") == "offline"
    terms = content_terms(text)
    new = sum(1 for t in terms if t not in seen_before)
    return text.rstrip().endswith("?") and (not terms or new / len(terms) <= 0.2)


def main(argv: list[str] | None = None) -> int:
    import retrieval

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", type=int, default=7)
    args = p.parse_args(argv)
    print(f"retrieval from {Path(retrieval.__file__).parent}; K = {args.k}\n")
    print("| turn | message | slots filled | echo slots | echoes ranked above a statement | statements left out while an echo held a slot |")
    print("|---:|---|---:|---:|---:|---:|")
    total = echoes = displaced = above = 0
    with tempfile.TemporaryDirectory(prefix="echoes-") as tmp:
        engine = Engine(Path(tmp), llm=LLM(api_key=""))
        session = "e" * 32
        seen_at: dict[int, set[str]] = {}  # seq -> content terms the session held before it
        statements: list[tuple[int, set[str]]] = []  # (seq, words) of user statements so far
        for n, message in enumerate(SCRIPT, start=1):
            turn = engine.turn(session, message, k=args.k)
            from retrieval.text import content_terms

            for ev in engine.ledger.events(session):
                if ev.seq not in seen_at:
                    seen_at[ev.seq] = set().union(*(content_terms(e.text) for e in engine.ledger.read_events(session, range(ev.seq))))
            events = engine.ledger.read_events(session, [h.seq for h in turn.hits])
            flags = [is_echo_event(ev.role, ev.meta, ev.text, seen_at[ev.seq]) for ev in events]
            words = {w.strip("?.,!").lower() for w in message.split()} - {"my", "the", "is", "i", "what", "where", "do", "did", "and", "now", "me", "about"}
            got = {h.seq for h in turn.hits}
            matching = [seq for seq, ws in statements if ws & words]
            left_out = sum(1 for seq in matching if seq not in got) if any(flags) else 0
            first_echo = flags.index(True) if any(flags) else len(flags)
            inversions = sum(1 for i, f in enumerate(flags) if not f and i > first_echo)
            above += inversions
            total += len(flags)
            echoes += sum(flags)
            displaced += left_out
            print(f"| {n} | {message} | {len(flags)} | {sum(flags)} | {inversions} | {left_out} |")
            if not message.rstrip().endswith("?"):
                statements.append((turn.user_event.seq, {w.strip("?.,!").lower() for w in message.split()}))
    share = 100 * echoes / total if total else 0.0
    print(f"\nall turns: {echoes} of {total} filled slots were echoes ({share:.0f}%); "
          f"{above} non-echo memories ranked below an echo; "
          f"{displaced} matching statements were left out while an echo held a slot")
    return 0


if __name__ == "__main__":
    sys.exit(main())
