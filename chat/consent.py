"""Ask me first (issue 11): a turn in two steps, a person choosing which memories reach the model.

`propose` retrieves the top K (revoked events left out, as in every turn) and appends nothing: it
keeps the proposal under DATA_DIR/proposals/ (0600; the question waits there until answered,
cancelled or expired) and returns the candidates with a one-time *turn token*
`ct1.<nonce>.<expires>.<mac>`, where

    mac = hex(HMAC-SHA256(secret, "mre:v1:consent-token" \\x00 JCS({"session", "nonce", "proposal", "expires"})))
    proposal = hex(sha256("mre:v1:proposal" \\x00 JCS(the stored proposal)))

and `secret` is the data directory's own 32 random bytes (DATA_DIR/proposals/secret, 0600): the token
is bound to the session and to the exact proposal, works in another process (the CLI's two commands)
and expires after TOKEN_TTL seconds. `answer` spends it once — the proposal file is renamed to a
tombstone under the session's turn lock, so of two answers exactly one wins — then runs steps 3–6 of
a turn with the approved memories only; its receipt records the decision (docs/FORMAT.md §18).
Replay, reuse, another session's token, an expired or altered token, or an id that was not proposed
is a ConsentError (one line) and nothing is appended. `cancel` spends it with no turn at all.

On PostgreSQL the same proposals, secret and tombstones are rows every replica shares
(storage.pg.consent.PgProposals; on files storage.files.receipts.file_backend.FileProposals, the stores' ReceiptBackend.proposals): a token proposed on one replica is answered on any
other, and spending it is one UPDATE … WHERE state = 'waiting', so of two answers on any replicas exactly one wins.
`proposal_store(stores)` gives the store for a deployment; its `forget_session` is what deleting a session calls.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chat.engine import Consent, InputError, Turn, TurnError, check_message, log
from control.revocation import current as current_controls
from ledger.canonical import canonical_json
from ledger.event import EventError, now_ts, validate_session_id
from receipts.ranking import ranking_part
from retrieval.model import Hit, SearchError, check_k

if TYPE_CHECKING:
    from chat.engine import Engine
    from receipts.stores import ProposalStore
    from storage.stores import Stores

TOKEN_TTL = 600  # seconds: a proposal waits ten minutes for its answer
TOKEN_RE = re.compile(r"ct1\.([0-9a-f]{32})\.([0-9]{1,12})\.([0-9a-f]{64})")
TAG_PROPOSAL = b"mre:v1:proposal\x00"
TAG_TOKEN = b"mre:v1:consent-token\x00"


class ConsentError(InputError):
    """A token or an approval was refused; nothing was appended. One line."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One proposed memory, as the person sees it before deciding."""

    rank: int
    seq: int
    event_id: str
    role: str
    ts: str
    text: str
    score: float  # raw (Hit.score); a person reads `relative`
    digest: str
    relative: float = 1.0  # Hit.relative: the score as a share of the best candidate's
    match: str = "own text"  # Hit.match: "own text", "context only" (through its neighbours' words) or "echo"


@dataclass(frozen=True, slots=True)
class Proposal:
    token: str
    session: str
    message: str
    k: int
    candidates: tuple[Candidate, ...]
    expires_at: str  # UTC, ledger ts form
    excluded: tuple[int, ...]  # revoked events this retrieval left out (the receipt will name their revocations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "session": self.session,
            "k": self.k,
            "expires_at": self.expires_at,
            "excluded_revoked": list(self.excluded),
            "candidates": [
                {"rank": c.rank, "seq": c.seq, "id": c.event_id, "role": c.role, "ts": c.ts, "text": c.text, "score": c.score, "digest": c.digest,
                 "relative": c.relative, "match": c.match}
                for c in self.candidates
            ],
        }


def proposal_digest(pending: dict[str, Any]) -> str:
    """What the token's MAC binds: the stored proposal (session, question, k, candidates, exclusions, times)."""
    signed = {k: pending[k] for k in ("v", "session", "message", "k", "nonce", "proposed_at", "expires", "excluded")}
    signed["candidates"] = [{k: c[k] for k in ("rank", "seq", "id", "digest")} for c in pending["candidates"]]
    return hashlib.sha256(TAG_PROPOSAL + canonical_json(signed)).hexdigest()


def token_mac(secret: bytes, session: str, nonce: str, digest: str, expires: int) -> str:
    msg = TAG_TOKEN + canonical_json({"session": session, "nonce": nonce, "proposal": digest, "expires": expires})
    return hmac.new(secret, msg, hashlib.sha256).hexdigest()


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(t))


# -- the pending proposals --------------------------------------------------------------------------------
def proposal_store(stores: Stores) -> ProposalStore:
    """The proposal store of a deployment (ReceiptBackend.proposals): DATA_DIR/proposals/ on files, the shared
    tables on PostgreSQL."""
    return stores.receipts.proposals(TOKEN_TTL)


def _secret(store: ProposalStore) -> bytes:
    """The store's MAC key; TurnError when what it keeps is not one (the file backend's ValueError)."""
    try:
        return store.secret()
    except ValueError as exc:
        raise TurnError(str(exc)) from None


# -- the two steps ------------------------------------------------------------------------------------------
def propose(engine: Engine, session: str, message: str, k: int = 8) -> Proposal:
    """Retrieve the top K for `message` and keep the proposal; append nothing. InputError for bad input."""
    check_message(message)
    try:
        validate_session_id(session)
        k = check_k(k)
    except (EventError, SearchError) as exc:
        raise InputError(str(exc)) from None
    engine.settle(session)  # an erasure that stopped half way is finished before its words could be proposed
    store = proposal_store(engine.stores)
    now = engine.clock()
    store.sweep(now)
    with engine.backend.turn_lock(session):
        engine.index.index_session(session)  # the search sees the whole ledger as it stands (FORMAT.md §24)
        # taken before the size is read: every event from `size` on is written after it, which is what a replay holds a
        # proposal's size to (chat.replay: an event the receipt says it did not see must not predate the proposal)
        proposed_at = now_ts()
        size = engine.ledger.head(session)[0]
        got = engine._retrieve_all(session, message, k, [])
        hits, excluded = got.hits, got.excluded
        if hits:
            engine._memories(session, hits)  # the index agrees with the ledger, or the proposal is refused
        ranking = ranking_part(config=engine.ranking_config(), indexed=size, controls=size, rules=got.rules, ranked=got.ranked())
    nonce = os.urandom(16).hex()
    expires = int(now) + TOKEN_TTL
    pending: dict[str, Any] = {
        "v": 1,
        "session": session,
        "message": message,
        "k": k,
        "nonce": nonce,
        "proposed_at": proposed_at,
        "expires": expires,
        "excluded": [r.seq for r in excluded],
        "candidates": [
            {"rank": i, "seq": h.seq, "id": h.event_id, "digest": h.digest, "role": h.role, "ts": h.ts, "bm25": h.bm25, "collapse": h.collapse, "score": h.score,
             "context_only": h.context_only, "echo": h.echo}  # not in the MAC's digest: shown in the stamps, never signed
            for i, h in enumerate(hits, start=1)
        ],
        "ranking": ranking,  # how they were ranked, for the receipt (FORMAT.md §24); not in the MAC's digest either
    }
    mac = token_mac(_secret(store), session, nonce, proposal_digest(pending), expires)
    store.save(session, nonce, pending)
    token = f"ct1.{nonce}.{expires}.{mac}"
    cands = tuple(
        Candidate(i, h.seq, h.event_id, h.role, h.ts, h.text, h.score, h.digest, h.relative, h.match)
        for i, h in enumerate(hits, start=1)
    )
    return Proposal(token, session, message, k, cands, _utc(expires), tuple(r.seq for r in excluded))


def parse_token(token: object) -> tuple[str, int, str]:
    """(nonce, expires, mac) of a turn token; ConsentError when it is not one (its shape only: nothing is read)."""
    m = TOKEN_RE.fullmatch(token) if isinstance(token, str) else None
    if m is None:
        raise ConsentError("token: not a turn token (ct1.<nonce>.<expires>.<mac>, as propose returned it)")
    return m.group(1), int(m.group(2)), m.group(3)


def check_issued(store: ProposalStore, token: object, now: float) -> None:
    """Before an engine is opened to answer or cancel (its signing key loaded, or created): ConsentError, as `answer`
    would say it, when the token is malformed or `store` has no proposal of it waiting — never issued by this data
    directory or database, spent or expired. Reads only (the CLI: exit 2 then means nothing changed)."""
    nonce, expires, _mac = parse_token(token)
    _waiting(store, nonce, expires, now)


def _waiting(store: ProposalStore, nonce: str, expires: int, now: float) -> dict[str, Any]:
    """The waiting proposal of `nonce`; ConsentError saying why there is none."""
    try:
        pending = store.load(nonce)
    except ConsentError:
        raise
    except ValueError as exc:  # a row that is not a proposal (storage.pg.consent)
        raise ConsentError(f"token: its proposal cannot be read ({exc})") from None
    if pending is None:
        how = store.spent(nonce)
        if how == "used":
            raise ConsentError("token: already used — each token answers one turn; propose again")
        if how == "cancelled":
            raise ConsentError("token: that proposal was cancelled; propose again")
        if how == "expired" or now > expires:
            raise ConsentError(f"token: expired at {_utc(expires)}; propose again")
        raise ConsentError("token: unknown — not issued by this data directory or database")
    return pending


def _open(engine: Engine, token: object, session: str | None) -> tuple[ProposalStore, str, dict[str, Any]]:
    """The waiting proposal a token names, after checking the token is genuine, this session's and in time."""
    nonce, expires, mac = parse_token(token)
    store = proposal_store(engine.stores)
    pending = _waiting(store, nonce, expires, engine.clock())
    want = token_mac(_secret(store), str(pending.get("session")), nonce, proposal_digest(pending), int(pending.get("expires", -1)))
    if not hmac.compare_digest(want, mac) or expires != pending.get("expires"):
        raise ConsentError("token: does not match its proposal (altered or forged); nothing was sent")
    if session is not None and session != pending["session"]:
        raise ConsentError("token: was issued for another session; it answers only there")
    if engine.clock() > expires:
        store.spend(nonce, "expired")
        raise ConsentError(f"token: expired at {_utc(expires)} (a proposal waits {TOKEN_TTL // 60} minutes); propose again")
    return store, nonce, pending


def _approved(pending: dict[str, Any], approved_ids: Iterable[object]) -> list[dict[str, Any]]:
    """The proposed candidates the person approved (by event id, or by seq), in proposal order."""
    by_id = {c["id"]: c for c in pending["candidates"]}
    by_seq = {c["seq"]: c for c in pending["candidates"]}
    if isinstance(approved_ids, (str, bytes)):
        raise ConsentError("approved: expected a list of event ids")
    chosen: set[int] = set()
    for x in approved_ids:
        c = None
        if isinstance(x, str) and x in by_id:
            c = by_id[x]
        elif isinstance(x, int) and not isinstance(x, bool) and x in by_seq:
            c = by_seq[x]
        elif isinstance(x, str) and x.strip().isascii() and x.strip().isdigit() and int(x.strip()) in by_seq:
            c = by_seq[int(x.strip())]
        if c is None:
            raise ConsentError(f"approved: {str(x)[:80]!r} was not proposed with this token")
        chosen.add(c["seq"])
    return [c for c in pending["candidates"] if c["seq"] in chosen]


def answer(engine: Engine, token: object, approved_ids: Iterable[object], *, session: str | None = None, on_delta: Any = None) -> Turn:
    """Spend the token and answer with the approved memories only. ConsentError (nothing appended) for a
    token that is malformed, unknown, used, cancelled, expired, altered or another session's, an id that was
    not proposed, or a proposal gone stale (an approved memory since revoked, forgotten or changed, or an approved
    answer that may quote a statement since revoked or superseded). TurnError (the question is appended, the token
    spent, nothing sent): an approved answer that may quote a statement the question itself supersedes.
    An approved statement superseded by now (since the proposal, or by the question) is sent marked (FORMAT.md §20)."""
    store, nonce, pending = _open(engine, token, session)
    chosen = _approved(pending, approved_ids)
    sess, message, k = pending["session"], pending["message"], pending["k"]
    receipt_id = "rcpt_" + os.urandom(16).hex()
    try:
        with engine.backend.turn_lock(sess):
            proposed = _current(engine, sess, pending, {c["seq"] for c in chosen})
            state = current_controls(engine.ledger, sess)
            if not store.spend(nonce, "used"):  # another answer won the race
                raise ConsentError("token: already used — each token answers one turn; propose again")
            user_ev = engine.ledger.append(sess, "user", message, {"kind": "chat"})
            try:
                # a fact it changes is marked if approved (FORMAT.md §20); the local rules decide: a person chose what
                # reaches a model in this turn, and no model may see an earlier statement they did not approve
                engine.detect_changes(user_ev, consent_turn=True)
                engine.backend.issue_checkpoint(engine.ledger, sess, engine.key)
                engine.index.index_session(sess, [user_ev])
                _refuse_dead_echo(engine, sess, user_ev.seq, {c["seq"] for c in chosen}, receipt_id)
                memories = [ev for ev in proposed if ev.seq in {c["seq"] for c in chosen}]
                hits = [_hit(sess, c, ev) for c, ev in zip(chosen, memories, strict=True)]
                excluded = [state.revoked[s] for s in pending["excluded"] if s in state.revoked]
                consent = Consent(proposed, pending["proposed_at"], frozenset(c["seq"] for c in chosen))
                return engine._complete(
                    sess, message, k, receipt_id, on_delta, user_ev, hits, memories, excluded, consent, ranking=pending.get("ranking")
                )
            except TurnError:
                raise
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                # the log and the ledger's note get the class only: a message may quote the query or a memory
                log.error("session %s: consent turn for seq %d failed (%s)", sess, user_ev.seq, type(exc).__name__)
                engine._note(sess, f"the turn for the message at seq {user_ev.seq} failed before an answer was signed ({type(exc).__name__})", "turn_failure", receipt_id)
                raise TurnError(f"the turn failed ({reason}); no answer was given") from exc
    except EventError as exc:
        raise InputError(str(exc)) from None


def _current(engine: Engine, session: str, pending: dict[str, Any], chosen: set[int]) -> list[Any]:
    """The proposed events as the ledger holds them now; ConsentError when an approved one changed since."""
    cands = pending["candidates"]
    if not cands:
        return []
    count, _head = engine.ledger.head(session)
    if any(c["seq"] >= count for c in cands):
        raise ConsentError(f"session {session}: the ledger no longer holds every proposed memory; propose again")
    events = engine.ledger.read_events(session, [c["seq"] for c in cands])
    state = current_controls(engine.ledger, session)
    revoked = state.revoked
    quoting = engine.cites.quoting(session, revoked)  # answers that may repeat a revoked memory (chat.citing)
    # and those that may repeat a superseded statement unmarked: retrieval leaves them out always (chat.engine)
    echoes = engine.cites.quoting(session, state.supersessions.superseded)
    for c, ev in zip(cands, events, strict=True):
        if ev.digest != c["digest"] or ev.id != c["id"]:
            raise ConsentError(f"session {session}: the memory at seq {c['seq']} is not the one proposed; propose again")
        if c["seq"] in chosen and ev.erased:
            raise ConsentError(f"session {session}: memory seq {c['seq']} was forgotten since it was proposed; propose again")
        if c["seq"] in chosen and c["seq"] in revoked:
            raise ConsentError(f"session {session}: memory seq {c['seq']} was revoked since it was proposed; propose again")
        if c["seq"] in chosen and c["seq"] in quoting:
            raise ConsentError(
                f"session {session}: memory seq {c['seq']} is an answer that cited seq {quoting[c['seq']].seq}, revoked since it was proposed; propose again"
            )
        if c["seq"] in chosen and c["seq"] in echoes:
            dead = echoes[c["seq"]]
            raise ConsentError(
                f"session {session}: memory seq {c['seq']} is an answer that cited seq {dead.old_seq}, superseded by seq {dead.new_seq} since it was"
                " proposed; propose again"
            )
    return events


def _refuse_dead_echo(engine: Engine, session: str, question_seq: int, chosen: set[int], receipt_id: str) -> None:
    """TurnError when the question just appended superseded a statement that an approved answer cited, or cited
    through another answer: it may repeat the dead fact unmarked, and retrieval would have left it out. `_current`
    refused the supersessions made before the token was spent; this one is made by the question itself, so the
    question is in the ledger already — a note follows it, the token is spent, and nothing reaches the model."""
    held = current_controls(engine.ledger, session).supersessions.superseded
    mine = {old: x for old, x in held.items() if x.new_seq == question_seq}
    echoes = engine.cites.quoting(session, mine)
    dead = sorted(s for s in chosen if s in echoes)
    if not dead:
        return
    first = echoes[dead[0]]
    why = f"approved memory seq {dead[0]} is an answer that cited seq {first.old_seq}, which the message at seq {question_seq} supersedes"
    engine._note(session, f"the turn for the message at seq {question_seq} was refused: {why}", "turn_failure", receipt_id)
    raise TurnError(f"session {session}: {why}; nothing was sent to the model; propose again")


def _hit(session: str, c: dict[str, Any], ev: Any) -> Hit:
    return Hit(
        session=session, event_id=ev.id, seq=ev.seq, role=ev.role, text=ev.text, meta=ev.meta, digest=ev.digest, chain=ev.chain,
        ts=ev.ts, bm25=float(c["bm25"]), collapse=float(c["collapse"]), score=float(c["score"]), rank=int(c["rank"]),
        context_only=c.get("context_only") is True, echo=c.get("echo") is True,  # a proposal from before they were kept: unlabelled
    )


def cancel(engine: Engine, token: object, *, session: str | None = None) -> None:
    """Spend the token with no turn: nothing is appended, no receipt is written, the question leaves the disk."""
    store, nonce, _pending = _open(engine, token, session)
    if not store.spend(nonce, "cancelled"):
        raise ConsentError("token: already used — each token answers one turn; propose again")


def candidate_ids(proposal: Proposal) -> Sequence[str]:
    return [c.event_id for c in proposal.candidates]

