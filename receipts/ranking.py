"""How a turn's memories were ranked, committed in its receipt (docs/FORMAT.md §24; issue 34). Pure: no I/O.

A format-2 receipt may carry `ranking`: the ranking configuration's name and hash, how much of the session the search
saw (its index held the events below `indexed`; the control state was that of the ledger's first `controls` events),
the rules that left an event out of or moved one into the top K, and the ranked list the search returned, each with
the score the ranking used. `ranking_part` builds it, `check_ranking_shape` checks its shape at parse time,
`check_ranking` is its offline check row (the memories handed to the model are the ranked list's first ones, or the
proposal a person chose from), and `compare` is the heart of a replay: the committed list against a recomputed one,
a row per difference.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.canonical import canonical_json

RANKING_VERSION = 1
RANKING_FIELDS = ("v", "config", "config_sha256", "indexed", "controls", "rules", "ranked")
RANKED_FIELDS = ("seq", "score", "match")
MATCHES = ("own text", "context only", "echo", "newest statement")
# the rules that may leave an event out of the top K, or give it a place there (chat.retrieve)
RULES = ("revoked", "quotes-revoked", "superseded", "quotes-superseded", "resolved-for-now", "past-question", "echo")
MAX_RANKED = 50
# two scores agree when |a - b| <= SCORE_TOLERANCE * max(|a|, |b|): the same arithmetic in another order (PostgreSQL's
# bm25 from stored term counts, FTS5's in C) differs in the last bits of a double, never in the ninth digit
SCORE_TOLERANCE = 1e-9
CONFIG_DOMAIN = b"mre:v1:ranking-config"
_SCORE_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


class RankingShapeError(ValueError):
    """The member is not a ranking commitment of a known version; `where` is its JSON path."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


def config_hash(config: Mapping[str, Any]) -> str:
    """hex(sha256("mre:v1:ranking-config" || 0x00 || JCS(config)))."""
    return hashlib.sha256(CONFIG_DOMAIN + b"\x00" + canonical_json(dict(config))).hexdigest()


def score_text(score: float) -> str:
    """A score as the receipt commits it: the shortest decimal that reads back to the same double (no floats are
    signed, §1)."""
    if not math.isfinite(score):
        raise ValueError(f"score {score!r}: not a finite number")
    text = repr(float(score))
    return text.replace("e+", "e") if "e" in text else text


@dataclass(frozen=True, slots=True)
class Ranked:
    """One entry of a ranked list: the event's seq, the score the ranking used and how it matched (retrieval.Hit)."""

    seq: int
    score: float
    match: str


def ranking_part(*, config: Mapping[str, Any], indexed: int, controls: int, rules: Sequence[str], ranked: Sequence[Ranked]) -> dict[str, Any]:
    """The body's `ranking` member (§24)."""
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        raise ValueError(f"ranking rules {unknown}: not ones §24 names")
    return {
        "v": RANKING_VERSION,
        "config": str(config["name"]),
        "config_sha256": config_hash(config),
        "indexed": indexed,
        "controls": controls,
        "rules": sorted(set(rules)),
        "ranked": [{"seq": r.seq, "score": score_text(r.score), "match": r.match} for r in ranked],
    }


def check_ranking_shape(rk: Any) -> None:
    """RankingShapeError unless `rk` is exactly a version-1 `ranking` member."""
    if type(rk) is not dict:
        raise RankingShapeError("ranking", "expected a JSON object")
    if rk.get("v") != RANKING_VERSION or type(rk.get("v")) is not int:
        raise RankingShapeError("ranking.v", f"ranking version {rk.get('v')!r} is unknown (this verifier knows {RANKING_VERSION})")
    if sorted(rk) != sorted(RANKING_FIELDS):
        raise RankingShapeError("ranking", f"expected exactly the members {', '.join(RANKING_FIELDS)}")
    if type(rk["config"]) is not str or not 0 < len(rk["config"]) <= 100:
        raise RankingShapeError("ranking.config", "expected the configuration's name (1 to 100 characters)")
    if type(rk["config_sha256"]) is not str or not _HEX64_RE.fullmatch(rk["config_sha256"]):
        raise RankingShapeError("ranking.config_sha256", "expected 64 lowercase hex digits")
    for name in ("indexed", "controls"):
        if type(rk[name]) is not int or not 0 <= rk[name] <= 2**53 - 1:
            raise RankingShapeError(f"ranking.{name}", "expected a ledger size (a non-negative integer)")
    if rk["indexed"] > rk["controls"]:
        raise RankingShapeError("ranking.indexed", "the index cannot have held more of the session than the control state")
    rules = rk["rules"]
    if type(rules) is not list or any(type(x) is not str or x not in RULES for x in rules) or rules != sorted(set(rules)):
        raise RankingShapeError("ranking.rules", f"expected distinct rule names in order, each one of {', '.join(RULES)}")
    ranked = rk["ranked"]
    if type(ranked) is not list or len(ranked) > MAX_RANKED:
        raise RankingShapeError("ranking.ranked", f"expected an array of at most {MAX_RANKED} entries")
    seen: set[int] = set()
    for i, r in enumerate(ranked):
        where = f"ranking.ranked[{i}]"
        if type(r) is not dict or sorted(r) != sorted(RANKED_FIELDS):
            raise RankingShapeError(where, f"expected exactly the members {', '.join(RANKED_FIELDS)}")
        if type(r["seq"]) is not int or not 0 <= r["seq"] < rk["indexed"] or r["seq"] in seen:
            raise RankingShapeError(f"{where}.seq", "expected a distinct seq below `indexed`")
        seen.add(r["seq"])
        if type(r["score"]) is not str or len(r["score"]) > 40 or not _SCORE_RE.fullmatch(r["score"]) or not math.isfinite(float(r["score"])):
            raise RankingShapeError(f"{where}.score", "expected a finite decimal number as a string")
        if r["match"] not in MATCHES:
            raise RankingShapeError(f"{where}.match", f"expected one of {', '.join(MATCHES)}")


def check_ranking(body: Mapping[str, Any]) -> tuple[str, bool, str, str | None, str | None]:
    """`ranking.memories` (offline): a turn's memories are the ranked list's first ones, in its order (the engine
    cites fewer only when they do not fit one receipt, §1); a consent turn's proposal (§18) is the ranked list, in
    its order. The question was not in the index the search saw, and the ranked list holds at most K. The sizes are
    the ones the engine's search saw (§24): a turn's `indexed` is its question's seq and its `controls` lies after the
    question and at or before the answer; a proposal's are one size. Another size is another prefix, over which a
    self-consistent list could hide what the turn's own search ranked."""
    rk = body["ranking"]
    ranked = [r["seq"] for r in rk["ranked"]]
    query_seq = body["query"]["event"]["seq"]
    problems = []
    if len(ranked) > body["k"]:
        problems.append(f"{len(ranked)} ranked entries, more than K = {body['k']}")
    if rk["indexed"] > query_seq:
        problems.append(f"the index held seq {query_seq} (the question) or later: indexed {rk['indexed']}")
    answer_seq = body["response"]["event"]["seq"]
    if "consent" in body:  # the proposal's search: index and control state both the ledger as it stood then
        if rk["controls"] != rk["indexed"]:
            problems.append(f"a proposal's search saw one ledger size: indexed {rk['indexed']}, controls {rk['controls']}")
    else:  # a turn indexes every event before its question, and searches under the state its question made
        if rk["indexed"] != query_seq:
            problems.append(f"a turn's index held every event before its question (seq {query_seq}): indexed {rk['indexed']}")
        if not query_seq < rk["controls"] <= answer_seq:
            problems.append(f"a turn's control state includes its question and nothing from its answer (seq {answer_seq}) "
                            f"on: controls {rk['controls']}")
    if "consent" in body:
        shown = [p["event"]["seq"] for p in body["consent"]["proposed"]]
        what = "the proposal"
    else:
        shown = [m["event"]["seq"] for m in body["memories"]]
        ranked = ranked[: len(shown)]
        what = "the memories"
    if shown != ranked:
        problems.append(f"{what} (seqs {shown}) are not the ranked list's first ones (seqs {ranked})")
    if problems:
        return ("ranking.memories", False, "; ".join(problems), "the ranked list's first entries", str(shown))
    n = len(rk["ranked"])
    return ("ranking.memories", True, f"{what} are the first of the {n} ranked entries the search returned, in order", None, None)


@dataclass(frozen=True, slots=True)
class Difference:
    """One way a replayed ranking differs from the committed one: at `rank` (1-based), the committed entry and the
    replayed one (None where a list is shorter)."""

    rank: int
    committed: Ranked | None
    replayed: Ranked | None
    what: str

    def line(self) -> str:
        if self.rank == 0:  # not a rank: the list's rules
            return self.what

        def shown(r: Ranked | None) -> str:
            return "nothing" if r is None else f"seq {r.seq} (score {score_text(r.score)}, {r.match})"

        return f"rank {self.rank}: {self.what}: the receipt has {shown(self.committed)}, the replay {shown(self.replayed)}"


def committed(rk: Mapping[str, Any]) -> list[Ranked]:
    """The ranked list a `ranking` member commits to."""
    return [Ranked(r["seq"], float(r["score"]), r["match"]) for r in rk["ranked"]]


def scores_agree(a: float, b: float) -> bool:
    return abs(a - b) <= SCORE_TOLERANCE * max(abs(a), abs(b))


def compare(want: Sequence[Ranked], got: Sequence[Ranked]) -> list[Difference]:
    """Each rank where the replayed list differs from the committed one: another event, a score beyond
    SCORE_TOLERANCE, another match, or one list longer than the other."""
    out = []
    for i in range(max(len(want), len(got))):
        a = want[i] if i < len(want) else None
        b = got[i] if i < len(got) else None
        if a is None or b is None:
            out.append(Difference(i + 1, a, b, "missing from the replay" if b is None else "not in the receipt"))
        elif a.seq != b.seq:
            out.append(Difference(i + 1, a, b, "another memory"))
        elif not scores_agree(a.score, b.score):
            out.append(Difference(i + 1, a, b, "another score"))
        elif a.match != b.match:
            out.append(Difference(i + 1, a, b, "matched another way"))
    return out


__all__ = [
    "MATCHES",
    "RULES",
    "SCORE_TOLERANCE",
    "Difference",
    "Ranked",
    "RankingShapeError",
    "check_ranking",
    "check_ranking_shape",
    "committed",
    "compare",
    "config_hash",
    "ranking_part",
    "score_text",
]
