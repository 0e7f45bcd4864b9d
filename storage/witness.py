"""Asking witnesses to cosign a checkpoint (c2sp.org/tlog-witness `add-checkpoint`), over HTTP. Part of storage's
public face (the faces call it; the only module of this project that talks to a server other than its database).

For each witness with a submission URL: POST `<url>/add-checkpoint` with `old <size>`, the consistency proof lines
from that size, a blank line and the checkpoint as a signed note. The client keeps no state: it first sends the
size it last knew for that witness (0 when none), and on "409 Conflict" (the witness answers the size it last
cosigned, `text/x.tlog.size`) sends again once with a proof from that size. The cosignature lines a witness returns
are kept only when they verify under the witness's key (receipts.cosignature); anything else — a witness down or
slow (`timeout` seconds), a refusal, a larger tree than ours, an answer that is not cosignatures — is one line in
its Outcome, never an exception, so a witness can never stop the caller.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from receipts.cosignature import WitnessKey, cosigned_by
from receipts.note import MalformedNote, Note, NoteSignature, b64, parse_note

MAX_RESPONSE_BYTES = 64 * 1024
MAX_PROOF_LINES = 63  # the protocol's limit


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one witness did with the checkpoint: its valid cosignature lines, or why there are none."""

    witness: WitnessKey
    cosignatures: tuple[NoteSignature, ...] = ()
    problem: str | None = None
    sizes: tuple[int, ...] = field(default=())  # the old sizes sent, in order

    @property
    def ok(self) -> bool:
        return bool(self.cosignatures)

    def line(self) -> str:
        label = self.witness.label or self.witness.name
        if self.ok:
            return f"witness {label}: cosigned"
        return f"witness {label}: no cosignature ({self.problem})"


def request_body(note: Note, old: int, proof: Sequence[bytes]) -> bytes:
    """The add-checkpoint request: `old <size>`, one base64 hash per line, a blank line, the signed note."""
    return (f"old {old}\n" + "".join(b64(h) + "\n" for h in proof) + "\n" + note.encode()).encode("utf-8")


def _post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain; charset=utf-8"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - an operator's configured witness URL
            return int(resp.status), resp.headers.get("Content-Type", ""), resp.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code), exc.headers.get("Content-Type", "") if exc.headers else "", exc.read(MAX_RESPONSE_BYTES + 1)


def _first_line(body: bytes) -> str:
    text = body[:200].decode("utf-8", "replace").split("\n", 1)[0].strip()
    return "".join(ch if ch.isprintable() else "?" for ch in text) or "no body"


def ask(
    note: Note,
    size: int,
    witness: WitnessKey,
    consistency: Callable[[int], list[bytes]],
    *,
    known_size: int = 0,
    timeout: float = 5.0,
) -> Outcome:
    """One witness's cosignature of `note` (a checkpoint of `size` leaves, signed by the log). `consistency(m)`: the
    RFC 6962 consistency proof from size m to `size` (m > 0)."""
    if not witness.url or not witness.url.startswith(("http://", "https://")):
        return Outcome(witness, problem="no http(s) submission URL in the policy")
    url = witness.url.rstrip("/") + "/add-checkpoint"
    old = known_size if 0 <= known_size <= size else 0
    sent: list[int] = []
    for _ in range(2):
        try:
            proof = consistency(old) if 0 < old < size else []
        except (ValueError, LookupError, OSError) as exc:
            return Outcome(witness, problem=f"no consistency proof from size {old} ({exc})"[:300], sizes=tuple(sent))
        if len(proof) > MAX_PROOF_LINES:
            return Outcome(witness, problem=f"a consistency proof of {len(proof)} hashes is over the protocol's 63", sizes=tuple(sent))
        sent.append(old)
        try:
            status, ctype, body = _post(url, request_body(note, old, proof), timeout)
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections, a malformed URL
            reason = getattr(exc, "reason", None) or exc
            return Outcome(witness, problem=f"unreachable ({type(exc).__name__}: {reason})"[:300], sizes=tuple(sent))
        if len(body) > MAX_RESPONSE_BYTES:
            return Outcome(witness, problem=f"an answer over {MAX_RESPONSE_BYTES} bytes", sizes=tuple(sent))
        if status == 200:
            return _cosignatures(note, witness, body, tuple(sent))
        if status == 409 and ctype.split(";")[0].strip() == "text/x.tlog.size":
            text = body.decode("ascii", "replace")
            if not text.endswith("\n") or not text[:-1].isdigit() or (len(text) > 2 and text[0] == "0"):
                return Outcome(witness, problem="409 without a tree size", sizes=tuple(sent))
            theirs = int(text[:-1])
            if theirs > size:
                return Outcome(
                    witness,
                    problem=f"it cosigned a larger tree of this log ({theirs} > {size}): a rollback or a fork of the ledger",
                    sizes=tuple(sent),
                )
            if theirs == old:
                break
            old = theirs
            continue
        return Outcome(witness, problem=f"HTTP {status}: {_first_line(body)}", sizes=tuple(sent))
    return Outcome(witness, problem="the witness kept answering 409 (its size changed while asked)", sizes=tuple(sent))


def _cosignatures(note: Note, witness: WitnessKey, body: bytes, sent: tuple[int, ...]) -> Outcome:
    """The witness's valid cosignature lines in a 200 answer (lines of unknown keys are ignored, as the spec says)."""
    try:
        answered = parse_note(note.text.encode("utf-8") + b"\n" + body)
    except MalformedNote as exc:
        return Outcome(witness, problem=f"the answer is not signature lines ({exc})"[:300], sizes=sent)
    mine = tuple(s for s in answered.signatures if s.name == witness.name and s.key_hash == witness.key_hash)
    if not mine:
        return Outcome(witness, problem="the answer holds no cosignature by this witness's key", sizes=sent)
    if not cosigned_by(Note(note.text, mine), witness):
        return Outcome(witness, problem="its cosignature does not verify under the policy's key", sizes=sent)
    return Outcome(witness, mine, sizes=sent)


def ask_all(
    note: Note,
    size: int,
    witnesses: Sequence[WitnessKey],
    consistency: Callable[[int], list[bytes]],
    *,
    timeout: float = 5.0,
) -> list[Outcome]:
    """`ask` each witness in turn (each bounded by `timeout` per request)."""
    return [ask(note, size, w, consistency, timeout=timeout) for w in witnesses]
