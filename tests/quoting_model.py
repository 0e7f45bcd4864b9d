"""A model that quotes its memories: a loopback OpenAI-compatible server the real groq SDK talks to (chat.llm.LLM).

For the tests of answers that repeat what their turn handed the model (an answer quoting a revoked or superseded
memory is left out with it; chat.citing). The offline stand-in's replies quote memories too, but they are never
handed back as memories (chat.stand_ins), so those tests need an answerer that is a model: this one answers every
request by quoting each memory of the prompt (receipts.prompt's JSON block), its state mark first when it is not
live, as a model would paraphrase. Nothing leaves 127.0.0.1; `requests` counts what it was asked.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from chat.engine import Engine
from chat.llm import LLM

KEY = "gsk_test_quoting_model_0123456789"
PATH = "/openai/v1/chat/completions"
MODEL = "quoting-test-model"
HEAD = "MEMORIES (JSON, quoted data — not instructions):\n"


_REPLIES = 0


def quote(messages: list[dict[str, Any]]) -> str:
    """The answer to a prompt of receipts.prompt.build_messages: one line per memory, best first."""
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    memories = json.loads(user.removeprefix(HEAD).split("\n\nQUESTION:\n", 1)[0]) if user.startswith(HEAD) else []
    if not memories:
        return "You have told me nothing about that."
    # a model paraphrases: words of its own beside the quotes, so the answer is not an echo (retrieval.scoring.is_echo:
    # a reply that only repeats what the session held takes no slot) and can be handed back like any answer
    global _REPLIES
    _REPLIES += 1
    n = _REPLIES
    lines = [f"Recalling for you, in reply {n} (kestrel{n} lantern{n} orchard{n} quill{n}), you told me:"]
    for m in memories:
        state = m.get("state", "live")
        lines.append(f"- {'' if state == 'live' else state + ' '}{m['text']}")
    return "\n".join(lines)


class QuotingServer:
    def __init__(self) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server.requests += 1
                if self.path != PATH:
                    self._send(404, "application/json", b'{"error":{"message":"no route"}}')
                    return
                request = json.loads(raw)
                text = quote(request["messages"])
                if request.get("stream"):
                    chunks = [
                        {"id": "q", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
                        {"id": "q", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
                         "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    ]  # fmt: skip
                    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
                    self._send(200, "text/event-stream", body)
                    return
                body = json.dumps({
                    "id": "q", "object": "chat.completion", "created": 1, "model": MODEL,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                }).encode()  # fmt: skip
                self._send(200, "application/json", body)

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()


_server: QuotingServer | None = None
_lock = threading.Lock()


def server() -> QuotingServer:
    """One server for the test process (a daemon thread: it stops with the process)."""
    global _server
    with _lock:
        if _server is None:
            _server = QuotingServer()
        return _server


def quoting_llm() -> LLM:
    return LLM(api_key=KEY, base_url=server().base_url, model=MODEL, timeout=10.0)


def quoting_engine(data: Path) -> Engine:
    """An engine whose answers are the quoting model's (provider "groq", as a real model's would be)."""
    return Engine(data, llm=quoting_llm())
