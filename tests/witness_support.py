"""A witness written from c2sp.org/tlog-witness for the tests (no independent implementation installs here: `aics-witness`
is not on PyPI), on 127.0.0.1 only. `add-checkpoint` as the spec says: 404 for an unknown origin, 403 when no trusted
log key signed the note (or a trusted one's signature fails), 400 when old > size, 409 with `text/x.tlog.size` when
old is not the size it last cosigned, 422 for a proof that does not verify (or any proof from 0, or a size-0 tree
with another root, or a same-size checkpoint with another root); else it keeps the new size and root atomically and
answers one cosignature/v1 line. `mode` makes it misbehave for the client's tests: "garbage" (200 with junk), "wrong-key" (cosigned by another key),
"bad-sig" (its key hash, an invalid signature), "slow" (3 s before answering)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from receipts.cosignature import WitnessKey, cosign, witness_key
from receipts.keys import SigningKey
from receipts.merkle import verify_consistency
from receipts.note import MalformedNote, NoteVerifier, b64decode, parse_checkpoint_text, parse_note, signed_by

EMPTY_ROOT = hashlib.sha256(b"").digest()


@dataclass
class Witness:
    name: str
    key: SigningKey
    logs: dict[str, NoteVerifier]  # origin -> the log key it trusts for it
    state: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # origin -> (size, root) last cosigned
    requests: list[bytes] = field(default_factory=list)
    mode: str = "honest"  # "garbage": 200 with junk; "wrong-key": cosigns with another key; "slow": sleeps
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    @property
    def public(self) -> WitnessKey:
        return witness_key(self.key.public_key, self.name, url=self.url)

    def add_checkpoint(self, body: bytes) -> tuple[int, str, bytes]:
        self.requests.append(body)
        try:
            text = body.decode("utf-8")
            head, sep, rest = text.partition("\n")
            if not sep or not head.startswith("old "):
                return 400, "text/plain", b"no old size line\n"
            old = int(head[4:])
            proof = []
            while True:
                line, sep, rest = rest.partition("\n")
                if not sep:
                    return 400, "text/plain", b"no blank line\n"
                if not line:
                    break
                h = b64decode(line)
                if h is None or len(h) != 32:
                    return 400, "text/plain", b"a proof line is not a base64 hash\n"
                proof.append(h)
            note = parse_note(rest)
            cp = parse_checkpoint_text(note.text)
        except (ValueError, MalformedNote) as exc:
            return 400, "text/plain", f"{exc}\n".encode()
        log = self.logs.get(cp.origin)
        if log is None:
            return 404, "text/plain", b"unknown origin\n"
        if signed_by(note, log) is not True:
            return 403, "text/plain", b"not signed by the log's key\n"
        if old > cp.size:
            return 400, "text/plain", b"old size is larger than the checkpoint\n"
        with self.lock:
            size, root = self.state.get(cp.origin, (0, EMPTY_ROOT))
            if old != size:
                return 409, "text/x.tlog.size", f"{size}\n".encode()
            if cp.size == 0 and cp.root != EMPTY_ROOT:
                return 422, "text/plain", b"an empty tree with another root\n"
            if old == 0 and proof:
                return 422, "text/plain", b"a proof from the empty tree\n"
            if old == cp.size and cp.root != root:
                return 422, "text/plain", b"same size, another root\n"
            if 0 < old < cp.size:
                try:
                    verify_consistency(old, cp.size, proof, root, cp.root)
                except ValueError:
                    return 422, "text/plain", b"the consistency proof does not verify\n"
            self.state[cp.origin] = (cp.size, cp.root)
        if self.mode == "slow":
            time.sleep(3)
        if self.mode == "garbage":
            return 200, "text/plain", b"hello\n"
        signer = SigningKey.generate() if self.mode == "wrong-key" else self.key
        line = cosign(note.text, signer, self.name, int(time.time()))
        if self.mode == "bad-sig":  # its own key hash, a signature that does not verify
            line = replace(line, sig=line.sig[:-1] + bytes([line.sig[-1] ^ 1]))
        return 200, "text/plain; charset=utf-8", line.line().encode("utf-8")


@contextmanager
def serving(w: Witness) -> Iterator[Witness]:
    """`w` answering on 127.0.0.1 (its `url` set to the submission prefix), stopped after."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(n, 1 << 20))
            if self.path != "/w/add-checkpoint":
                status, ctype, out = 404, "text/plain", b"not found\n"
            else:
                status, ctype, out = w.add_checkpoint(body)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            try:
                self.wfile.write(out)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout test)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    w.url = f"http://127.0.0.1:{server.server_address[1]}/w"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield w
    finally:
        server.shutdown()
        server.server_close()
