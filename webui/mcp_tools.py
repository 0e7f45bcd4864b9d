"""The MCP tools (and gradio_client API endpoints): plain functions whose docstrings are the tool descriptions.

No `from __future__ import annotations` here: gr.api reads the annotations as
real types to build each tool's input schema. Every tool returns one JSON
string (Gradio's MCP server would show a dict or tuple as a Python repr).

Every tool but `new_session_key` takes `session_key`: the caller's secret. It
opens exactly one private session (the public session id printed in receipts
is derived from it and opens nothing). Keep it like a password.
"""

import json
from collections.abc import Callable
from typing import Any

from chat.engine import InputError
from control import mcp as cm
from ledger.canonical import CanonicalError, loads_strict
from receipts.body import MAX_RECEIPT_BYTES, MalformedReceipt
from receipts.certificate import MalformedCertificate, is_certificate
from webui import bundles as bd
from webui import supersede as sp
from webui.forget import forget_event
from webui.handlers import to_gr_error
from webui.inputs import K_API_MAX, K_DEFAULT, BadInput
from webui.render_verify import MODE_NOTES
from webui.service import Service
from webui.sessions import new_session_key as _new_key
from webui.sessions import session_id


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)


def _plain(fn: Callable[[], Any]) -> Any:
    """Run one tool's work; a refusal becomes a tool error whose text is plain (never HTML)."""
    try:
        return fn()
    except InputError as exc:  # chat.consent's ConsentError is one: a refused token or approval
        raise to_gr_error(BadInput(str(exc)), for_html=False) from None
    except Exception as exc:  # noqa: BLE001 - the edge
        raise to_gr_error(exc, for_html=False) from None


def make_tools(service: Service) -> list[Callable[..., str]]:
    """The tool functions bound to one app's service, in the order they are listed."""

    def new_session_key() -> str:
        """Start a new private memory session and return its secret session key.

        Pass the key as `session_key` to the other tools. Anyone holding it can read the session, so keep it secret;
        the public `session_id` (also returned) is what appears in receipts and opens nothing.

        Returns:
            JSON: {"session_key": "...", "session_id": "..."}
        """
        key = _new_key()
        return _dumps({"session_key": key, "session_id": session_id(key)})

    def remember(session_key: str, text: str) -> str:
        """Store a message in the session's memory without asking anything (appended to its hash-chained ledger).

        Args:
            session_key: the caller's secret session key (from new_session_key, or the key shown in the web app).
            text: what to remember, at most 8000 characters.

        Returns:
            JSON of the stored event: seq, event_id, digest and chain hash.
        """
        try:
            ev = service.remember(session_key, text)
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc, for_html=False) from None
        return _dumps(
            {
                "session_id": ev.session,
                "seq": ev.seq,
                "event_id": ev.id,
                "ts": ev.ts,
                "digest": ev.digest,
                "chain": ev.chain,
            }
        )

    def search_memories(
        session_key: str, query: str, k: int = K_DEFAULT, include_revoked: bool = False, include_superseded: bool = False
    ) -> str:
        """Search the session's memories (SQLite FTS5 BM25 plus a collapse score) without calling a model.

        Args:
            session_key: the caller's secret session key.
            query: words to search for.
            k: how many results at most, 1 to 50 (default 8).
            include_revoked: also return revoked memories (each then names the control event that revoked it in revoked_by); default false, as answers never use them.
            include_superseded: also return superseded memories, statements a newer one replaced (each then names it in superseded_by); default false, as answers are not handed them as current.

        Returns:
            JSON: the mode the search ran in ("lexical", or "hybrid" with the optional semantic extra) and the results best first (the ranking's order: events matching in their own text before those matching only through their neighbours, then echoes; by score within each), each with seq, role, text, bm25, collapse, score (what the ranking used, to 4 significant digits), relative (score as a share of the best), match, event_id, digest, chain, revoked_by (null unless revoked) and superseded_by (the event id of the statement that replaced it, or null while it is live).
        """
        try:
            resp = service.search(
                session_key,
                query,
                k,
                k_max=K_API_MAX,
                include_revoked=include_revoked is True,
                include_superseded=include_superseded is True,
            )
            revoked = service.revoked(session_key) if include_revoked is True else {}
            superseded = service.superseded(session_key)
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc, for_html=False) from None
        return _dumps(
            {
                "session_id": resp.session,
                "query": resp.query,
                "k": resp.k,
                "reason": resp.reason,
                "mode": resp.mode,
                "results": [
                    {
                        **h.to_dict(),
                        **{name: cm.shown_score(getattr(h, name)) for name in ("bm25", "collapse", "score", "relative")},
                        "match": h.match,
                        "revoked_by": revoked.get(h.seq),
                        "superseded_by": superseded[h.seq].new_id if h.seq in superseded else None,
                    }
                    for h in resp.results
                ],
            }
        )

    def ask(session_key: str, message: str, k: int = K_DEFAULT) -> str:
        """Ask the assistant: the message is stored, the top-K memories are retrieved and handed to the model, and the
        answer comes back with its signed receipt (which memories were used, who answered, Merkle proofs). Refused,
        with nothing stored, when "ask me first" is on for the session: use propose_turn and answer_turn then.

        Args:
            session_key: the caller's secret session key.
            message: the question or message, at most 8000 characters.
            k: how many memories to hand to the model, 1 to 50 (default 8).

        Returns:
            JSON: answer, provider and model (provider "offline" is the labelled stand-in, not a language model), the memories used (each with its event_id), receipt_id, and receipt (the receipt file's JSON: pass it to verify_receipt).
        """
        try:
            turn = service.turn(session_key, message, k, k_max=K_API_MAX)
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc, for_html=False) from None
        c = turn.completion
        return _dumps(
            {
                "answer": turn.answer,
                "provider": c.provider,
                "model": c.model,
                "fallback_reason": c.fallback_reason,
                "memories": [
                    {
                        "rank": m["rank"],
                        "seq": m["event"]["seq"],
                        "role": m["event"]["role"],
                        "text": m["event"]["text"],
                        "digest": m["event"]["digest"],
                        "event_id": m["event"]["id"],  # what forget_memory takes
                    }
                    for m in turn.body["memories"]
                ],
                "session_id": turn.body["session"],
                "receipt_id": turn.receipt_id,
                "receipt": turn.envelope,
            }
        )

    def verify_receipt(receipt_json: Any, session_key: str = "") -> str:
        """Verify a receipt or an erasure certificate from this app: signature by the app's key, every Merkle proof,
        every digest, the prompt hash and, when it belongs to the caller's own session, the session's ledger itself.

        Args:
            receipt_json: the receipt as ask or answer_turn returned it (their "receipt" object, or their whole output), the certificate forget_memory returned (its "certificate" object, or its whole output), or either one's JSON text.
            session_key: the caller's secret session key; without it, or for another session's receipt, only the offline checks run.

        Returns:
            JSON: kind ("receipt" or "erasure-certificate"), verdict ("verified", "failed" or "unverified"), checked (the mode), and one entry per check with status "pass", "fail" or "not_verifiable"; for a receipt, why_these: the replay of its ranking against the ledger (verdict "replayed", "differs" or "not_replayable" with reasons, the ranked list with scores, events a rule left out and why) when it is of the caller's own session and verified, else {"replayed": false, "why": ...}.
        """
        try:
            raw = _receipt_bytes(receipt_json)
            if is_certificate(raw):  # an erasure certificate: dispatch on its payloadType, as the Verify tab does
                _cert, creport, mode = service.verify_certificate(raw, session_key or None)
                return _dumps({"kind": "erasure-certificate", **creport.to_dict(), "checked": mode, "note": MODE_NOTES[mode].replace("**", "")})
            report, mode = service.verify(raw, session_key or None)
            replayed = service.replay(raw, report, mode)  # why these memories (issue 34)
        except (MalformedReceipt, MalformedCertificate) as exc:
            raise to_gr_error(BadInput(str(exc)), for_html=False) from None
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc, for_html=False) from None
        why = {"replayed": False, "why": replayed} if isinstance(replayed, str) else replayed.to_dict()
        return _dumps({"kind": "receipt", **report.to_dict(), "checked": mode, "note": MODE_NOTES[mode].replace("**", ""), "why_these": why})

    def forget_memory(session_key: str, event_id: str | int, reason: str = "") -> str:
        """Forget one event of the session for good, with proof: its words leave the ledger, the search index and every
        stored receipt, while the hash chain and every receipt still verify. Every answer whose receipt cited it is
        forgotten with it (its text may repeat it). Cannot be undone.

        Args:
            session_key: the caller's secret session key.
            event_id: the event to forget: its event_id (evt_ and 32 hex digits, as remember, search_memories and ask return it) or its seq.
            reason: optional, at most 2000 characters; kept in the ledger's erasure record for good, so it must not repeat what is forgotten.

        Returns:
            JSON: session_id, erased (seq and role of each event erased), cascaded (the answers erased with it), erasure_record_seq, receipts_redacted, receipts_withdrawn, and certificate: the signed erasure certificate (a DSSE envelope; save it as a file and check it with `python -m receipts verify CERT --trust signing.pub`).
        """
        try:
            result = forget_event(service, session_key, cm.event_ref(event_id), reason)
        except Exception as exc:  # noqa: BLE001 - the edge
            raise to_gr_error(exc, for_html=False) from None
        return _dumps(
            {
                "session_id": result.session,
                "erased": [{"seq": s, "role": result.roles.get(s)} for s in result.erased],
                "cascaded": list(result.cascaded),
                "erasure_record_seq": result.record_seq,
                "receipts_redacted": list(result.redacted),
                "receipts_withdrawn": list(result.withdrawn),
                "certificate": result.certificate,
            }
        )

    def propose_turn(session_key: str, message: str, k: int = K_DEFAULT) -> str:
        """Ask me first, step 1: the memories retrieval would hand the model for this message, and a one-time turn
        token. Nothing is stored and nothing is sent to a model: show the candidates to the person, then call
        answer_turn with the ids they approve (or cancel_turn). Revoked memories are never proposed.

        Args:
            session_key: the caller's secret session key.
            message: the question or message, at most 8000 characters.
            k: how many memories to propose at most, 1 to 50 (default 8).

        Returns:
            JSON: token (single-use, for this session and this proposal only, expires after 10 minutes), expires_at, k, session_id, candidates best first (rank, seq, event_id, role, ts, text, score (what the ranking used, to 4 significant digits), relative (the score as a share of the best candidate's, 1.0 = best), match ("own text", "context only": matched only through its neighbours' words, or "echo"), digest) and excluded_revoked (revoked seqs left out).
        """
        session, k_, text = _plain(lambda: service.check_turn(session_key, message, k, k_max=K_API_MAX))
        _plain(lambda: service.settle(session))  # the candidates come from the index: an erasure stopped half way is finished first
        return _dumps(_plain(lambda: cm.propose_turn(service.engine, session, text, k_)))

    def answer_turn(session_key: str, token: str, approved_ids: str = "") -> str:
        """Ask me first, step 2: answer the proposed message with only the memories the person approved. The
        receipt records what was proposed, which memories were approved and which withheld, and that a person
        decided; the prompt holds the approved ones only. A token answers one turn, in its own session only.

        Args:
            session_key: the caller's secret session key (the same session as propose_turn's).
            token: the turn token propose_turn returned.
            approved_ids: the approved candidates' event_ids (evt_…) or seqs, separated by commas or spaces; empty approves none.

        Returns:
            JSON: answer, provider and model, the memories used, approved and withheld (seqs), excluded_revoked, receipt_id and receipt (pass it to verify_receipt).
        """
        session = _plain(lambda: service.session(session_key))
        return _dumps(_plain(lambda: cm.answer_turn(service.engine, session, token, approved_ids)))

    def cancel_turn(session_key: str, token: str) -> str:
        """Ask me first, cancelled: end the proposed turn with nothing sent to the model, no event and no receipt.

        Args:
            session_key: the caller's secret session key.
            token: the turn token propose_turn returned.

        Returns:
            JSON: {"cancelled": true, "session_id": "..."}
        """
        session = _plain(lambda: service.session(session_key))
        return _dumps(_plain(lambda: cm.cancel_turn(service.engine, session, token)))

    def revoke_memory(session_key: str, event_id: str | int, reason: str = "") -> str:
        """Take one memory out of retrieval from now on, without destroying it: a control event is appended to the
        ledger and later receipts name the revocation that kept it out. Revoke is not erasure: the words stay on
        record, unused (forget_memory destroys them); restore_memory brings it back.

        Args:
            session_key: the caller's secret session key.
            event_id: the memory: its event_id (evt_ and 32 hex digits, as remember, search_memories and ask return it) or its seq.
            reason: optional, at most 1000 characters; kept in the ledger for good, so it must not repeat the memory's words.

        Returns:
            JSON: session_id, action, seq, event_id, control_seq (the control event appended), control_id, reason.
        """
        session = _plain(lambda: service.session(session_key))
        return _dumps(_plain(lambda: cm.revoke_memory(service.engine, session, event_id, reason)))

    def restore_memory(session_key: str, event_id: str | int, reason: str = "") -> str:
        """Bring a revoked memory back into retrieval (another control event in the ledger).

        Args:
            session_key: the caller's secret session key.
            event_id: the revoked memory: its event_id (evt_…) or its seq.
            reason: optional, at most 1000 characters; kept in the ledger for good.

        Returns:
            JSON: session_id, action, seq, event_id, control_seq, control_id, reason.
        """
        session = _plain(lambda: service.session(session_key))
        return _dumps(_plain(lambda: cm.restore_memory(service.engine, session, event_id, reason)))

    def memory_history(session_key: str, event_id: str | int) -> str:
        """The history of a fact: every statement of it in the session (the memory given and those it superseded or
        that superseded it), oldest first, each with its state now ("live" or "superseded"), when it was said, who
        decided its supersession (visitor, rule:<name> or model:<id>) and the reason shown.

        Args:
            session_key: the caller's secret session key.
            event_id: the memory: its event_id (evt_ and 32 hex digits, as remember, search_memories and ask return it) or its seq.

        Returns:
            JSON: session_id and history, oldest first, each with seq, event_id, role, ts, text (null once forgotten), state, erased, revoked, superseded_by (seq), superseded_by_id, supersedes, decided_by, record_seq, reason, shown_reason and live_seq (the statement that holds now); and suggestions: supersessions a model proposed about these statements that the rules did not confirm, so nothing was recorded (new_seq, new_id, older_seq, older_id, suggested_by, at) — confirm one with correct_memory if it holds.
        """
        session = _plain(lambda: service.session(session_key))
        entries = _plain(lambda: sp.history(service, session_key, cm.event_ref(event_id)))
        suggested = _plain(lambda: sp.suggestions(service, session_key, entries))
        history = [{("event_id" if name == "id" else name): v for name, v in e.to_dict().items()} for e in entries]
        return _dumps({"session_id": session, "history": history, "suggestions": [x.to_dict() for x in suggested]})

    def correct_memory(session_key: str, event_id: str | int, new_text: str, reason: str = "") -> str:
        """Correct a memory: new_text is stored as the person's new statement and supersedes the memory (decided by
        the visitor). Nothing is deleted: the old statement stays on record as superseded, is no longer handed to the
        model as current, and memory_history shows both.

        Args:
            session_key: the caller's secret session key.
            event_id: the memory to correct: its event_id (evt_…) or its seq.
            new_text: what holds now, at most 8000 characters.
            reason: optional, at most 1000 characters; kept in the ledger for good, so it must not repeat the statements' words.

        Returns:
            JSON: session_id, old_seq, old_id, new_seq, new_id (the new statement), record_seq, record_id (the supersession record), decided_by ("visitor") and reason.
        """
        result = _plain(lambda: sp.correct(service, session_key, cm.event_ref(event_id), new_text, reason))
        return _dumps(
            {
                "session_id": result.session,
                "old_seq": result.old_seq,
                "old_id": result.old_id,
                "new_seq": result.new_seq,
                "new_id": result.new_id,
                "record_seq": result.record_seq,
                "record_id": result.record_id,
                "decided_by": result.decided_by,
                "reason": result.reason,
            }
        )

    def export_session(session_key: str) -> str:
        """Export the caller's own session as one signed bundle (mre-bundle/v1): its ledger as stored, the latest signed
        checkpoint, every receipt and erasure certificate, and the app's public key, listed in a manifest the app
        signs. Only the session the key opens is ever exported. Save bundle_base64 decoded as a file and check it
        with `python -m bundle verify FILE --trust signing.pub`, or pass it to import_bundle.

        Args:
            session_key: the caller's secret session key.

        Returns:
            JSON: session_id, file_name, bytes, sha256 (of the file), events, receipts, certificates and bundle_base64 (the bundle file's bytes; refused past 5 MB: export a bigger session from the app or the CLI).
        """
        done, data = _plain(lambda: bd.export_base64(service, session_key))
        return _dumps(
            {
                "session_id": done.session,
                "file_name": done.path.name,
                "bytes": done.bytes,
                "sha256": done.sha256,
                "events": done.events,
                "receipts": done.receipts,
                "certificates": done.certificates,
                "bundle_base64": data,
            }
        )

    def import_bundle(session_key: str, bundle_base64: str, allow_untrusted: bool = False) -> str:
        """Verify a session bundle and import it as a new, read-only session of the caller's: every check runs first
        (the manifest's signature by this app's key, each member's hash, the ledger from genesis, the checkpoint, every
        receipt and certificate) and nothing is imported unless all pass. A bundle from another server (signed by
        another key) is refused unless allow_untrusted, and is then recorded as unverified.

        Args:
            session_key: the caller's secret session key (the import belongs to that session).
            bundle_base64: the bundle file's bytes as base64 (export_session's bundle_base64), at most 5 MB decoded.
            allow_untrusted: import a bundle not signed by this app's key, labelled unverified; default false.

        Returns:
            JSON: imported (true), local_session (the new local id), origin_session, events, signer, verdict ("verified" or "unverified"), duplicate, indexed, and checks: one entry per check with status "pass", "fail" or "not_verifiable". A refused bundle is a tool error saying why (its first failing or unverifiable check), as every other refusal is; nothing is imported then.
        """
        outcome = _plain(lambda: bd.import_base64(service, session_key, bundle_base64, allow_untrusted=allow_untrusted is True))
        checks = [c.to_dict() for c in outcome.report.checks] if outcome.report is not None else []
        if outcome.imported is None:
            _plain(lambda: _refused(outcome.refused))
        done, o = outcome.imported, outcome.imported.origin
        return _dumps(
            {
                "imported": True,
                "local_session": o.local,
                "origin_session": o.session,
                "events": o.events,
                "signer": o.signer,
                "verdict": o.verdict,
                "duplicate": done.duplicate,
                "indexed": done.indexed,
                "checks": checks,
            }
        )

    return [
        new_session_key,
        remember,
        search_memories,
        ask,
        verify_receipt,
        forget_memory,
        propose_turn,
        answer_turn,
        cancel_turn,
        revoke_memory,
        restore_memory,
        memory_history,
        correct_memory,
        export_session,
        import_bundle,
    ]


def _refused(why: object) -> None:
    raise BadInput(f"import_bundle: nothing was imported: {why}")


RECEIPT_WANTED = "receipt_json: give the receipt (ask's \"receipt\" object), the certificate (forget_memory's \"certificate\"), or its JSON text"


def _receipt_bytes(receipt_json: object) -> bytes:
    """The receipt's (or certificate's) bytes. A JSON object is taken as it is (the whole output of `ask`,
    `answer_turn` or `forget_memory` too: its "receipt" or "certificate" member); text is parsed. A refusal never
    repeats what was sent: a receipt holds memories' words."""
    if isinstance(receipt_json, dict):
        inner = next((receipt_json[m] for m in ("receipt", "certificate") if isinstance(receipt_json.get(m), dict)), None)
        receipt_json = json.dumps(receipt_json if inner is None else inner, ensure_ascii=False)
    if not isinstance(receipt_json, str) or not receipt_json.strip():
        raise BadInput(RECEIPT_WANTED)
    raw = receipt_json.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_RECEIPT_BYTES:
        raise BadInput(f"receipt_json: {len(raw)} bytes is over the {MAX_RECEIPT_BYTES}-byte receipt limit")
    try:
        obj = loads_strict(raw, "$")
    except CanonicalError:
        return raw  # the receipt parser names what is wrong with it
    if isinstance(obj, dict) and "answer" in obj and isinstance(obj.get("receipt"), dict):
        return json.dumps(obj["receipt"]).encode("utf-8")
    if isinstance(obj, dict) and "erased" in obj and isinstance(obj.get("certificate"), dict):
        return json.dumps(obj["certificate"]).encode("utf-8")
    return raw
