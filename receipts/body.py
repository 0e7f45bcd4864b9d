"""The receipt and checkpoint formats, versions 1 and 2 (pure: build, sign, parse).

A receipt file is a DSSE envelope (docs/FORMAT.md §9) whose payload is
JCS(receipt body). Format 1 signs every cited event whole (text, meta, salt
inside the payload). Format 2 (docs/FORMAT.md §15) signs each cited event in
its erased form (hashed fields + `commit`) and carries the text, meta and salt
beside the envelope as *disclosures*, one per cited seq, checked against the
signed commitment: dropping one (redaction) leaves the signature intact.

Parsing is strict and total: anything that is not a well-formed receipt of a
known format raises MalformedReceipt naming the JSON path; only a parsed
receipt reaches the checks in receipts.verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.canonical import CanonicalError, canonical_json, dumps_unchecked, loads_strict
from ledger.event import (
    EVENT_ID_RE,
    HEX64_RE,
    MAX_META_BYTES,
    MAX_TEXT_BYTES,
    ROLES,
    SESSION_ID_RE,
    TS_RE,
    Event,
    erased_form,
)
from ledger.jsonnames import field_shown, json_shown, json_type
from receipts.decisions import (
    CONSENT_FIELDS,
    CONSENT_VERSION,
    DECIDED_BY_PERSON,
    EXCLUSION_FIELDS,
    EXCLUSIONS_FIELDS,
    EXCLUSIONS_VERSION,
    MAX_EXCLUSIONS,
)
from receipts.dsse import Envelope, MalformedEnvelope, parse_envelope, sign_envelope
from receipts.keys import SigningKey
from receipts.ranking import RankingShapeError, check_ranking_shape
from receipts.states import (
    BY_FIELDS,
    EARLIER_FIELDS,
    EXCLUDED_FIELDS,
    MAX_STATES,
    STATES_FIELDS,
    STATES_FIELDS_2,
    STATES_VERSION_2,
    STATES_VERSIONS,
    SUPERSEDED_FIELDS,
)

RECEIPT_TYPE = "mre/receipt"
CHECKPOINT_TYPE = "mre/checkpoint"
RECEIPT_VERSION = 1
PAYLOAD_TYPE = "application/vnd.mre.receipt+json; version=1"
RECEIPT_VERSION_2 = 2
PAYLOAD_TYPE_2 = "application/vnd.mre.receipt+json; version=2"
PAYLOAD_TYPES = {RECEIPT_VERSION: PAYLOAD_TYPE, RECEIPT_VERSION_2: PAYLOAD_TYPE_2}
TAG_CHECKPOINT = b"mre:v1:checkpoint\x00"
MAX_RECEIPT_BYTES = 5 * 1024 * 1024  # uploads and files over this are refused unread
MAX_MEMORIES = 50
MAX_PROOF = 64
# The size budget (docs/FORMAT.md §1, "Limits"). A receipt file is the DSSE envelope, whose
# payload is base64 (4 bytes per 3) plus a little JSON around it; so the payload may take:
ENVELOPE_OVERHEAD = 4096  # payloadType, one signature, keyid, indentation: under 1 KiB in practice
MAX_PAYLOAD_BYTES = (MAX_RECEIPT_BYTES - ENVELOPE_OVERHEAD) // 4 * 3
# JCS escapes a control character as \u00XX: one text byte can take 6 bytes. The largest
# event record the ledger accepts, as JCS, is therefore at most:
MAX_EVENT_RECORD_BYTES = 6 * MAX_TEXT_BYTES + MAX_META_BYTES + 1024  # + 12 fields' keys and values
PROOF_RESERVE = MAX_PROOF * 67 + 2  # a proof list at its longest
CITATION_OVERHEAD = 48  # {"event":...,"proof":...,"rank":50}, and the comma between
RESPONSE_RESERVE = MAX_EVENT_RECORD_BYTES + PROOF_RESERVE + 6 * 2000 + 1024  # + fallback_reason, model, ...
BODY_RESERVE = 8192  # everything else: ids, times, retrieval, prompt, the checkpoint
# Format 2: the answer's disclosure at its largest, as indented JSON with \uXXXX escapes (6 bytes per text
# byte at worst; its meta is the engine's five flat fields, reserved at the meta limit and doubled for layout)
RESPONSE_DISCLOSURE_RESERVE = 6 * MAX_TEXT_BYTES + 2 * MAX_META_BYTES + 1024
RECEIPT_ID_RE = re.compile(r"rcpt_[0-9a-f]{32}")
KEY_ID_RE = re.compile(r"ed25519:[0-9a-f]{16}")
EVENT_FIELDS = ("v", "session", "seq", "id", "role", "ts", "meta", "text", "salt", "digest", "prev", "chain")
# Format 2: a cited event as signed (the erased ledger line's 10 fields, docs/FORMAT.md §4.1) and its disclosure.
ERASED_EVENT_FIELDS = ("v", "session", "seq", "id", "role", "ts", "commit", "digest", "prev", "chain")
DISCLOSURE_FIELDS = ("seq", "salt", "text", "meta")
FILE_FIELDS_2 = ("payloadType", "payload", "signatures", "disclosures")
MAX_DISCLOSURES = MAX_MEMORIES + 2  # the query, every memory, the answer
# A format-2 event record, as JCS: 10 short fields (ids, times, four hashes) — no text, no meta.
MAX_ERASED_RECORD_BYTES = 1024


class MalformedReceipt(ValueError):
    """Not a well-formed v1 receipt (a different family from failed checks)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"malformed receipt: {where}: {message}")
        self.where = where


@dataclass(frozen=True, slots=True)
class Receipt:
    """A parsed receipt: the envelope exactly as received and its decoded body.

    `signed` is the decoded payload, exactly what the signature covers. `body` is what the
    receipt says: for format 1 the same object; for format 2 a copy whose cited events carry
    their disclosed `text`, `meta` and `salt` beside `commit` (an event whose disclosure is
    missing stays in erased form, with no `text`). Nothing here is checked: receipts.verify does.
    `disclosures` maps a cited seq to its disclosure ({"seq", "salt", "text", "meta"}; format 2).
    """

    envelope: Envelope
    body: dict[str, Any]
    signed: dict[str, Any] | None = None  # None: the same as body (format 1)
    disclosures: Mapping[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def format(self) -> int:
        return int(self.body["v"])

    @property
    def signed_body(self) -> dict[str, Any]:
        return self.body if self.signed is None else self.signed

    @property
    def session(self) -> str:
        return str(self.body["session"])

    @property
    def receipt_id(self) -> str:
        return str(self.body["receipt_id"])


# -- building ------------------------------------------------------------------
def event_record(ev: Event) -> dict[str, Any]:
    """Everything needed to recompute an event's digest, chain link and Merkle leaf."""
    return ev.to_dict()


def erased_record(ev: Event) -> dict[str, Any]:
    """A format-2 cited event: the erased ledger line's fields (hashed fields, `commit`, digest, prev, chain)."""
    erased = erased_form(ev)  # the stored commitment of an erased event, else computed from salt, text and meta
    return {
        "v": ev.v,
        "session": ev.session,
        "seq": ev.seq,
        "id": ev.id,
        "role": ev.role,
        "ts": ev.ts,
        "commit": erased.commit,
        "digest": ev.digest,
        "prev": ev.prev,
        "chain": ev.chain,
    }


def disclosure(ev: Event) -> dict[str, Any] | None:
    """What opens an event's commitment: {"seq", "salt", "text", "meta"}; None for an erased event."""
    if ev.erased:
        return None
    return {"seq": ev.seq, "salt": ev.salt, "text": ev.text, "meta": ev.meta}


def receipt_view(signed: Mapping[str, Any], disclosures: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """A format-2 body as the receipt says it: each cited event with its disclosed salt, text and meta
    merged in beside `commit` (the shape format 1 consumers read); an undisclosed event stays erased."""

    def merged(ev: Mapping[str, Any]) -> dict[str, Any]:
        d = disclosures.get(ev["seq"])
        out = dict(ev)
        if d is not None:
            out.update(salt=d["salt"], text=d["text"], meta=d["meta"])
        return out

    view = dict(signed)
    view["query"] = {**signed["query"], "event": merged(signed["query"]["event"])}
    view["memories"] = [{**m, "event": merged(m["event"])} for m in signed["memories"]]
    view["response"] = {**signed["response"], "event": merged(signed["response"]["event"])}
    return view


def checkpoint_bytes(body: Mapping[str, Any]) -> bytes:
    """What the checkpoint signature covers: TAG_CHECKPOINT || JCS(checkpoint body)."""
    return TAG_CHECKPOINT + canonical_json(dict(body))


def sign_checkpoint(*, session: str, tree_size: int, root: bytes, chain_head: str, issued_at: str, key: SigningKey) -> dict[str, Any]:
    body = {
        "type": CHECKPOINT_TYPE,
        "v": RECEIPT_VERSION,
        "session": session,
        "tree_size": tree_size,
        "root": root.hex(),
        "chain_head": chain_head,
        "issued_at": issued_at,
    }
    sig = key.sign(checkpoint_bytes(body))
    return {"body": body, "key_id": key.key_id, "sig": base64.b64encode(sig).decode("ascii")}


def build_body(
    *,
    receipt_id: str,
    issued_at: str,
    session: str,
    k: int,
    retrieval: str,
    query: Event,
    query_proof: Sequence[bytes],
    memories: Sequence[tuple[Event, Sequence[bytes]]],
    response: Event,
    response_proof: Sequence[bytes],
    provider: str,
    model: str,
    fallback_reason: str | None,
    template: str,
    prompt_sha256: str,
    checkpoint: Mapping[str, Any],
    receipt_format: int = RECEIPT_VERSION,
    exclusions: Sequence[tuple[int, str, Event, Sequence[bytes]]] = (),
    consent: Mapping[str, Any] | None = None,
    states: Mapping[str, Any] | None = None,
    semantic: Mapping[str, str] | None = None,
    witnesses: Sequence[tuple[str, str]] | None = None,
    ranking: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The signed body. `receipt_format` 2 cites every event in erased form (its disclosures
    come from :func:`disclosures_for`); 1 cites every event whole.

    Format 2 only (docs/FORMAT.md §17, §18): `exclusions` — (excluded seq, its id, the revoking control
    event, that event's inclusion proof) for each revoked event retrieval left out — and `consent`, from
    :func:`consent_part`, and (§20) `states`, from :func:`receipts.states.states_part`. No member is written when
    absent, so such a body is exactly as before."""
    if receipt_format not in PAYLOAD_TYPES:
        raise ValueError(f"receipt format {receipt_format!r} is unknown (known: 1, 2)")
    if (exclusions or consent is not None or states is not None or semantic is not None or witnesses or ranking is not None) and receipt_format != RECEIPT_VERSION_2:
        raise ValueError("exclusions, consent, states, semantic, witnesses and ranking are format-2 additions; a format 1 receipt cannot carry them")
    event_record_ = event_record if receipt_format == RECEIPT_VERSION else erased_record
    body = _base_body(receipt_id, issued_at, session, k, retrieval, event_record_, query, query_proof, memories, response, response_proof,
                      provider, model, fallback_reason, template, prompt_sha256, checkpoint, receipt_format)
    if exclusions:
        body["exclusions"] = {
            "v": EXCLUSIONS_VERSION,
            "revoked": [
                {"seq": seq, "id": event_id, "control": {"event": event_record(ctl), "proof": [h.hex() for h in proof]}}
                for seq, event_id, ctl, proof in sorted(exclusions, key=lambda x: x[0])
            ],
        }
    if consent is not None:
        body["consent"] = dict(consent)
    if states is not None:
        body["states"] = dict(states)
    if semantic is not None:  # §25: the turn's search was hybrid (the semantic extra)
        body["semantic"] = semantic_part(**semantic)
    if witnesses:  # §22: witnesses cosigned the receipt's checkpoint (as a C2SP note) before the receipt was signed
        body["witnesses"] = witnesses_part(witnesses)
    if ranking is not None:  # §24: how the memories were ranked (receipts.ranking.ranking_part)
        body["ranking"] = dict(ranking)
    return body


WITNESSES_VERSION = 1
WITNESSES_FIELDS = ("v", "cosignatures")
COSIGNATURE_FIELDS = ("name", "sig")
MAX_COSIGNATURES = 16
COSIGNATURE_B64_LEN = 104  # base64 of 4 + 8 + 64 bytes (key hash, timestamp, Ed25519 signature)
_NAME_RE = re.compile(r"[^\s+]{1,200}")
_B64_RE = re.compile(r"[A-Za-z0-9+/]{102}==")


def witnesses_part(cosignatures: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The body's `witnesses` member (§22): each cosignature line's key name and base64 (key hash ‖ timestamp ‖
    signature), in the order the witnesses answered."""
    return {"v": WITNESSES_VERSION, "cosignatures": [{"name": n, "sig": sig} for n, sig in cosignatures]}


SEMANTIC_VERSION = 1
SEMANTIC_FIELDS = ("v", "method", "model", "model_sha256")


def semantic_part(*, method: str, model: str, model_sha256: str) -> dict[str, Any]:
    """The body's `semantic` member (§25): the fusion method, the embedding model and its file's sha256."""
    return {"v": SEMANTIC_VERSION, "method": method, "model": model, "model_sha256": model_sha256}


def consent_part(
    *, proposed: Sequence[tuple[Event, Sequence[bytes]]], approved: Sequence[int], proposed_at: str
) -> dict[str, Any]:
    """The body's `consent` member (§18): the proposal by rank in erased form, and the person's decision."""
    chosen = set(approved)
    seqs = [ev.seq for ev, _proof in proposed]
    return {
        "v": CONSENT_VERSION,
        "decided_by": DECIDED_BY_PERSON,
        "proposed_at": proposed_at,
        "proposed": [{"rank": rank, "event": erased_record(ev), "proof": [h.hex() for h in proof]} for rank, (ev, proof) in enumerate(proposed, start=1)],
        "approved": [s for s in seqs if s in chosen],
        "withheld": [s for s in seqs if s not in chosen],
    }


def _base_body(
    receipt_id: str,
    issued_at: str,
    session: str,
    k: int,
    retrieval: str,
    event_record_: Any,
    query: Event,
    query_proof: Sequence[bytes],
    memories: Sequence[tuple[Event, Sequence[bytes]]],
    response: Event,
    response_proof: Sequence[bytes],
    provider: str,
    model: str,
    fallback_reason: str | None,
    template: str,
    prompt_sha256: str,
    checkpoint: Mapping[str, Any],
    receipt_format: int,
) -> dict[str, Any]:
    return {
        "type": RECEIPT_TYPE,
        "v": receipt_format,
        "receipt_id": receipt_id,
        "issued_at": issued_at,
        "session": session,
        "k": k,
        "retrieval": retrieval,
        "query": {"event": event_record_(query), "proof": [h.hex() for h in query_proof]},
        "memories": [
            {"rank": rank, "event": event_record_(ev), "proof": [h.hex() for h in proof]}
            for rank, (ev, proof) in enumerate(memories, start=1)
        ],
        "prompt": {"template": template, "sha256": prompt_sha256},
        "response": {
            "event": event_record_(response),
            "proof": [h.hex() for h in response_proof],
            "sha256": response_hash(response.text),
            "provider": provider,
            "model": model,
            "fallback_reason": fallback_reason,
        },
        "checkpoint": dict(checkpoint),
    }


def disclosures_for(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The disclosures of the cited events, in seq order (an erased event has none)."""
    found = (disclosure(ev) for ev in sorted(events, key=lambda e: e.seq))
    return [d for d in found if d is not None]


def disclosure_file_bytes(ev: Event) -> int:
    """Bytes an event's disclosure takes in the receipt file (the layout of :func:`dump_file`, two levels in)."""
    d = disclosure(ev)
    if d is None:
        return 0
    text = json.dumps(d, indent=2, sort_keys=True)
    return len(text) + 4 * (text.count("\n") + 1) + 2  # its lines' indentation and the ",\n" after it


def _citable_2(query: Event, memories: Sequence[Event], reserve: int = 0) -> int:
    """Format 2: the payload holds erased records (base64: 4 bytes per 3), the file the disclosures beside it."""
    payload = reserve + BODY_RESERVE + MAX_ERASED_RECORD_BYTES + PROOF_RESERVE + MAX_ERASED_RECORD_BYTES + PROOF_RESERVE + 6 * 2000 + 1024
    outside = disclosure_file_bytes(query) + RESPONSE_DISCLOSURE_RESERVE
    budget = MAX_RECEIPT_BYTES - ENVELOPE_OVERHEAD
    for n, ev in enumerate(memories):
        payload += len(dumps_unchecked(erased_record(ev))) + PROOF_RESERVE + CITATION_OVERHEAD
        outside += disclosure_file_bytes(ev)
        if 4 * -(-payload // 3) + outside > budget:
            return n
    return len(memories)


def citable(query: Event, memories: Sequence[Event], receipt_format: int = RECEIPT_VERSION, reserve: int = 0) -> int:
    """How many of `memories` (best first) a receipt can cite and stay within MAX_RECEIPT_BYTES.

    The engine cites (and prompts with) only that many: K memories of the
    largest size the ledger accepts do not fit in one receipt (50 × 64 KiB of
    text can take 20 MB as JCS), while any one of them always does (a test holds
    the constants to that). The response is reserved at its largest. `reserve`:
    payload bytes the format-2 additions (exclusions, consent: §17, §18) take.
    """
    if receipt_format == RECEIPT_VERSION_2:
        return _citable_2(query, memories, reserve)
    used = BODY_RESERVE + len(dumps_unchecked(event_record(query))) + PROOF_RESERVE + RESPONSE_RESERVE
    for n, ev in enumerate(memories):
        used += len(dumps_unchecked(event_record(ev))) + PROOF_RESERVE + CITATION_OVERHEAD
        if used > MAX_PAYLOAD_BYTES:
            return n
    return len(memories)


def response_hash(text: str) -> str:
    """hex(sha256(UTF-8 bytes of the answer text)) — the same text the assistant event stores."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sign_receipt(body: Mapping[str, Any], key: SigningKey, disclosures: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The DSSE envelope (a JSON object) that is the receipt file; format 2 adds the disclosures beside it."""
    if body.get("v") == RECEIPT_VERSION_2:
        env = sign_envelope(canonical_json(dict(body)), PAYLOAD_TYPE_2, key)
        env["disclosures"] = sorted((dict(d) for d in disclosures), key=lambda d: int(d["seq"]))
        return env
    if disclosures:
        raise ValueError("a format 1 receipt carries no disclosures: its events are signed whole")
    return sign_envelope(canonical_json(dict(body)), PAYLOAD_TYPE, key)


def dump_file(obj: Mapping[str, Any]) -> bytes:
    """The receipt file's bytes: the layout storage.files.receipts.files.write_receipt writes (indented, keys sorted, ASCII)."""
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8")


# -- parsing -------------------------------------------------------------------
def parse_receipt(data: bytes | str | Mapping[str, Any]) -> Receipt:
    """Parse a receipt file's bytes (or an already-decoded JSON object). Raises MalformedReceipt."""
    if isinstance(data, (bytes, str)):
        size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
        if size > MAX_RECEIPT_BYTES:
            raise MalformedReceipt("$", f"{size} bytes is over the {MAX_RECEIPT_BYTES}-byte limit")
        if size == 0:
            raise MalformedReceipt("$", "empty file")
        try:
            # floats are parsed (a foreign envelope field may hold one; inside the body the
            # shape check and the digest recomputation refuse them, as named failed checks)
            obj: Any = loads_strict(data, "$", allow_floats=True)
        except CanonicalError as exc:
            raise _refused("$", exc) from None
    else:
        obj = data
    try:
        env = parse_envelope(obj, max_payload_bytes=MAX_RECEIPT_BYTES, allow_unsigned=True)
    except MalformedEnvelope as exc:
        raise MalformedReceipt("envelope", str(exc)) from None
    try:
        body = loads_strict(env.payload, "$", allow_floats=True)
    except CanonicalError as exc:
        raise _refused("payload", exc) from None
    if type(body) is dict and body.get("v") == RECEIPT_VERSION_2 and type(body.get("v")) is int:
        check_body_shape(body, RECEIPT_VERSION_2)
        disclosures = _disclosures(obj, body)
        return Receipt(env, receipt_view(body, disclosures), body, disclosures)
    check_body_shape(body)
    return Receipt(env, body)


def cited_events(body: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, signed event) for the query, each memory by rank (`memory#N`) and the answer."""
    out = [("query", body["query"]["event"])]
    out += [(f"memory#{i + 1}", m["event"]) for i, m in enumerate(body["memories"])]
    out.append(("response", body["response"]["event"]))
    return out


def _disclosures(obj: Any, body: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """A format-2 file's members beside the envelope: exactly `disclosures`, a list in ascending seq
    order, each {"seq", "salt", "text", "meta"} for a seq the signed body cites, at most one per seq."""
    _obj(obj, "$", FILE_FIELDS_2, 2)
    items = obj["disclosures"]
    if type(items) is not list or len(items) > MAX_DISCLOSURES:
        raise _fail("disclosures", f"expected an array of at most {MAX_DISCLOSURES} disclosures")
    cited = {ev["seq"] for _name, ev in cited_events(body)}
    out: dict[int, dict[str, Any]] = {}
    last = -1
    for i, d in enumerate(items):
        where = f"disclosures[{i}]"
        d = _obj(d, where, DISCLOSURE_FIELDS, 2)
        seq = _int(d["seq"], f"{where}.seq")
        if seq in out:
            raise _fail(f"{where}.seq", f"seq {seq} is disclosed twice")
        if seq < last:
            raise _fail(f"{where}.seq", f"seq {seq} after seq {last}: disclosures are in ascending seq order")
        if seq not in cited:
            raise _fail(f"{where}.seq", f"seq {seq} is not an event this receipt cites")
        _str(d["salt"], f"{where}.salt", HEX64_RE)
        _str(d["text"], f"{where}.text")
        if type(d["meta"]) is not dict:
            raise _fail(f"{where}.meta", "expected an object")
        out[seq] = d
        last = seq
    return out


def _refused(root: str, exc: CanonicalError) -> MalformedReceipt:
    """The strict parser's one line (`$.path: reason`) as a MalformedReceipt rooted at `root`."""
    path, _, reason = str(exc).partition(": ")
    where = root + path[1:] if path.startswith("$") else root
    return MalformedReceipt(where, reason if path.startswith("$") else str(exc))


def _fail(where: str, message: str) -> MalformedReceipt:
    return MalformedReceipt(where, message)


def _obj(value: Any, where: str, keys: Sequence[str], version: int = RECEIPT_VERSION) -> dict[str, Any]:
    if type(value) is not dict:
        raise _fail(where, f"expected an object, found JSON {json_type(value)}")
    missing = [k for k in keys if k not in value]
    extra = [k for k in value if k not in keys]
    if missing or extra:
        raise _fail(where, f"fields differ from format v{version} (missing {missing}, unexpected {extra})")
    return value


def _str(value: Any, where: str, pattern: re.Pattern[str] | None = None, max_len: int = 1 << 20) -> str:
    if type(value) is not str:
        raise _fail(where, f"expected a string, found JSON {json_type(value)}")
    if len(value) > max_len:
        raise _fail(where, f"string longer than {max_len}")
    if pattern is not None and not pattern.fullmatch(value):
        raise _fail(where, f"{json_shown(value)} does not match {pattern.pattern}")
    return value


def _int(value: Any, where: str, lo: int = 0, hi: int = 2**53 - 1) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise _fail(where, f"expected an integer in {lo}..{hi}, found {json_shown(value)}")
    return value


_HEX_RUN = re.compile(r"[0-9a-f]*")


def _hex_list(value: Any, where: str) -> None:
    if type(value) is not list or len(value) > MAX_PROOF:
        raise _fail(where, f"expected an array of at most {MAX_PROOF} hashes")
    if all(type(h) is str and len(h) == 64 for h in value) and _HEX_RUN.fullmatch("".join(value)):
        return
    for i, h in enumerate(value):  # slow path, only to name the bad element
        _str(h, f"{where}[{i}]", HEX64_RE)


def _event(value: Any, where: str, fields: Sequence[str] = EVENT_FIELDS) -> None:
    ev = _obj(value, where, fields, 1 if fields is EVENT_FIELDS else 2)
    if ev["v"] != 1 or type(ev["v"]) is not int:
        raise _fail(f"{where}.v", f"event format version {json_shown(ev['v'])} is unknown")
    _str(ev["session"], f"{where}.session", SESSION_ID_RE)
    _int(ev["seq"], f"{where}.seq")
    _str(ev["id"], f"{where}.id", EVENT_ID_RE)
    if ev["role"] not in ROLES:
        raise _fail(f"{where}.role", f"{json_shown(ev['role'])} is not one of {', '.join(ROLES)}")
    _str(ev["ts"], f"{where}.ts", TS_RE)
    if fields is ERASED_EVENT_FIELDS:
        _str(ev["commit"], f"{where}.commit", HEX64_RE)
    else:
        if type(ev["meta"]) is not dict:
            raise _fail(f"{where}.meta", "expected an object")
        _str(ev["text"], f"{where}.text")
        _str(ev["salt"], f"{where}.salt", HEX64_RE)
    for key in ("digest", "prev", "chain"):
        _str(ev[key], f"{where}.{key}", HEX64_RE)


def check_body_shape(body: Any, version: int = RECEIPT_VERSION) -> None:
    """Raise MalformedReceipt unless `body` has exactly the shape and types of format `version` (1 or 2)."""
    if type(body) is not dict:
        raise _fail("payload", "expected a JSON object")
    if body.get("type") != RECEIPT_TYPE:
        raise _fail("payload.type", f"expected {json_shown(RECEIPT_TYPE)}, found {field_shown(body, 'type')}")
    if body.get("v") != version or type(body.get("v")) is not int:
        known = ", ".join(map(str, PAYLOAD_TYPES))
        raise _fail("payload.v", f"receipt format version {field_shown(body, 'v')} is unknown (this verifier knows {known})")
    fields = EVENT_FIELDS if version == RECEIPT_VERSION else ERASED_EVENT_FIELDS
    keys: tuple[str, ...] = ("type", "v", "receipt_id", "issued_at", "session", "k", "retrieval", "query", "memories", "prompt", "response", "checkpoint")
    if version == RECEIPT_VERSION_2:  # the versioned additions of §17, §18 and §20, each present only when used
        keys += tuple(k for k in OPTIONAL_2 if k in body)
    _obj(body, "payload", keys, version)
    if "exclusions" in keys:
        _check_exclusions_shape(body["exclusions"])
    if "consent" in keys:
        _check_consent_shape(body["consent"])
    if "states" in keys:
        _check_states_shape(body["states"])
    if "semantic" in keys:
        _check_semantic_shape(body["semantic"])
    if "witnesses" in keys:
        _check_witnesses_shape(body["witnesses"])
    if "ranking" in keys:
        try:
            check_ranking_shape(body["ranking"])
        except RankingShapeError as exc:
            raise _fail(exc.where, str(exc).split(": ", 1)[1]) from None
    _str(body["receipt_id"], "receipt_id", RECEIPT_ID_RE)
    _str(body["issued_at"], "issued_at", TS_RE)
    _str(body["session"], "session", SESSION_ID_RE)
    _int(body["k"], "k", 1, MAX_MEMORIES)
    _str(body["retrieval"], "retrieval", max_len=200)
    q = _obj(body["query"], "query", ("event", "proof"), version)
    _event(q["event"], "query.event", fields)
    _hex_list(q["proof"], "query.proof")
    mems = body["memories"]
    if type(mems) is not list or len(mems) > MAX_MEMORIES:
        raise _fail("memories", f"expected an array of at most {MAX_MEMORIES} memories")
    for i, m in enumerate(mems):
        m = _obj(m, f"memories[{i}]", ("rank", "event", "proof"), version)
        _int(m["rank"], f"memories[{i}].rank", 1, MAX_MEMORIES)
        _event(m["event"], f"memories[{i}].event", fields)
        _hex_list(m["proof"], f"memories[{i}].proof")
    p = _obj(body["prompt"], "prompt", ("template", "sha256"), version)
    _str(p["template"], "prompt.template", max_len=100)
    _str(p["sha256"], "prompt.sha256", HEX64_RE)
    r = _obj(body["response"], "response", ("event", "proof", "sha256", "provider", "model", "fallback_reason"), version)
    _event(r["event"], "response.event", fields)
    _hex_list(r["proof"], "response.proof")
    _str(r["sha256"], "response.sha256", HEX64_RE)
    _str(r["provider"], "response.provider", max_len=100)
    _str(r["model"], "response.model", max_len=200)
    if r["fallback_reason"] is not None:
        _str(r["fallback_reason"], "response.fallback_reason", max_len=2000)
    c = _obj(body["checkpoint"], "checkpoint", ("body", "key_id", "sig"), version)
    _str(c["key_id"], "checkpoint.key_id", KEY_ID_RE)
    _str(c["sig"], "checkpoint.sig", max_len=200)
    cb = _obj(c["body"], "checkpoint.body", ("type", "v", "session", "tree_size", "root", "chain_head", "issued_at"), version)
    if cb["type"] != CHECKPOINT_TYPE or cb["v"] != RECEIPT_VERSION or type(cb["v"]) is not int:
        raise _fail("checkpoint.body", f"unknown checkpoint type/version {json_shown(cb['type'])}/{json_shown(cb['v'])}")
    _str(cb["session"], "checkpoint.body.session", SESSION_ID_RE)
    _int(cb["tree_size"], "checkpoint.body.tree_size", 1)
    _str(cb["root"], "checkpoint.body.root", HEX64_RE)
    _str(cb["chain_head"], "checkpoint.body.chain_head", HEX64_RE)
    _str(cb["issued_at"], "checkpoint.body.issued_at", TS_RE)


OPTIONAL_2 = ("exclusions", "consent", "states", "semantic", "witnesses", "ranking")


def _check_exclusions_shape(ex: Any) -> None:
    ex = _obj(ex, "exclusions", EXCLUSIONS_FIELDS, 2)
    if ex["v"] != EXCLUSIONS_VERSION or type(ex["v"]) is not int:
        raise _fail("exclusions.v", f"exclusions version {json_shown(ex['v'])} is unknown (this verifier knows {EXCLUSIONS_VERSION})")
    items = ex["revoked"]
    if type(items) is not list or not 1 <= len(items) <= MAX_EXCLUSIONS:
        raise _fail("exclusions.revoked", f"expected an array of 1 to {MAX_EXCLUSIONS} exclusions")
    for i, e in enumerate(items):
        where = f"exclusions.revoked[{i}]"
        e = _obj(e, where, EXCLUSION_FIELDS, 2)
        _int(e["seq"], f"{where}.seq")
        _str(e["id"], f"{where}.id", EVENT_ID_RE)
        c = _obj(e["control"], f"{where}.control", ("event", "proof"), 2)
        _event(c["event"], f"{where}.control.event")
        _hex_list(c["proof"], f"{where}.control.proof")


def _check_states_shape(st: Any) -> None:
    if type(st) is not dict:
        raise _fail("states", f"expected an object, found JSON {json_type(st)}")
    if type(st.get("v")) is not int or st.get("v") not in STATES_VERSIONS:
        known = ", ".join(map(str, STATES_VERSIONS))
        raise _fail("states.v", f"states version {json_shown(st.get('v'))} is unknown (this verifier knows {known})")
    st = _obj(st, "states", STATES_FIELDS_2 if st["v"] == STATES_VERSION_2 else STATES_FIELDS, 2)
    if st["v"] == STATES_VERSION_2:
        items = st["earlier"]
        if type(items) is not list or not 1 <= len(items) <= MAX_STATES:
            raise _fail("states.earlier", f"expected an array of 1 to {MAX_STATES} entries")
        for i, e in enumerate(items):
            where = f"states.earlier[{i}]"
            e = _obj(e, where, EARLIER_FIELDS, 2)
            _int(e["rank"], f"{where}.rank", 1, MAX_MEMORIES)
            _int(e["seq"], f"{where}.seq")
            _str(e["id"], f"{where}.id", EVENT_ID_RE)
            _int(e["newer"], f"{where}.newer")
    for name, fields in (("superseded", SUPERSEDED_FIELDS), ("excluded", EXCLUDED_FIELDS)):
        items = st[name]
        if type(items) is not list or len(items) > MAX_STATES:
            raise _fail(f"states.{name}", f"expected an array of at most {MAX_STATES} entries")
        for i, e in enumerate(items):
            where = f"states.{name}[{i}]"
            e = _obj(e, where, fields, 2)
            if "rank" in fields:
                _int(e["rank"], f"{where}.rank", 1, MAX_MEMORIES)
            _int(e["seq"], f"{where}.seq")
            _str(e["id"], f"{where}.id", EVENT_ID_RE)
            b = _obj(e["by"], f"{where}.by", BY_FIELDS, 2)
            _event(b["event"], f"{where}.by.event")
            _hex_list(b["proof"], f"{where}.by.proof")


def _check_witnesses_shape(w: Any) -> None:
    w = _obj(w, "witnesses", WITNESSES_FIELDS, 2)
    if w["v"] != WITNESSES_VERSION or type(w["v"]) is not int:
        raise _fail("witnesses.v", f"witnesses version {json_shown(w['v'])} is unknown (this verifier knows {WITNESSES_VERSION})")
    items = w["cosignatures"]
    if type(items) is not list or not 1 <= len(items) <= MAX_COSIGNATURES:
        raise _fail("witnesses.cosignatures", f"expected an array of 1 to {MAX_COSIGNATURES} cosignatures")
    for i, c in enumerate(items):
        c = _obj(c, f"witnesses.cosignatures[{i}]", COSIGNATURE_FIELDS, 2)
        _str(c["name"], f"witnesses.cosignatures[{i}].name", _NAME_RE)
        _str(c["sig"], f"witnesses.cosignatures[{i}].sig", _B64_RE)


def _check_semantic_shape(sm: Any) -> None:
    sm = _obj(sm, "semantic", SEMANTIC_FIELDS, 2)
    if sm["v"] != SEMANTIC_VERSION or type(sm["v"]) is not int:
        raise _fail("semantic.v", f"semantic version {json_shown(sm['v'])} is unknown (this verifier knows {SEMANTIC_VERSION})")
    _str(sm["method"], "semantic.method", max_len=100)
    _str(sm["model"], "semantic.model", max_len=200)
    _str(sm["model_sha256"], "semantic.model_sha256", HEX64_RE)


def _check_consent_shape(c: Any) -> None:
    c = _obj(c, "consent", CONSENT_FIELDS, 2)
    if c["v"] != CONSENT_VERSION or type(c["v"]) is not int:
        raise _fail("consent.v", f"consent version {json_shown(c['v'])} is unknown (this verifier knows {CONSENT_VERSION})")
    _str(c["decided_by"], "consent.decided_by", max_len=100)
    _str(c["proposed_at"], "consent.proposed_at", TS_RE)
    items = c["proposed"]
    if type(items) is not list or len(items) > MAX_MEMORIES:
        raise _fail("consent.proposed", f"expected an array of at most {MAX_MEMORIES} memories")
    for i, p in enumerate(items):
        p = _obj(p, f"consent.proposed[{i}]", ("rank", "event", "proof"), 2)
        _int(p["rank"], f"consent.proposed[{i}].rank", 1, MAX_MEMORIES)
        _event(p["event"], f"consent.proposed[{i}].event", ERASED_EVENT_FIELDS)
        _hex_list(p["proof"], f"consent.proposed[{i}].proof")
    for name in ("approved", "withheld"):
        seqs = c[name]
        if type(seqs) is not list or len(seqs) > MAX_MEMORIES:
            raise _fail(f"consent.{name}", f"expected an array of at most {MAX_MEMORIES} seqs")
        for i, s in enumerate(seqs):
            _int(s, f"consent.{name}[{i}]")


def decode_sig(sig: str) -> bytes | None:
    try:
        return base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return None
