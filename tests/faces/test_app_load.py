"""Bounded load in CI: 10 concurrent visitors × 5 turns against the app on a loopback port (offline stand-in)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

import app
from bench.load import check_receipts, http_run, sse_run, visitors
from webui.config import Config

CLIENTS, TURNS = 10, 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[app.Running]:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)  # the offline stand-in, never the network
    running = app.start(Config(tmp_path / "data", "127.0.0.1", free_port(), None, 16, True), quiet=True)
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.slow
def test_concurrent_visitors_get_no_errors_no_leaks_and_verifiable_receipts(server: app.Running) -> None:
    people = visitors(CLIENTS)
    result = http_run(server.url, people, TURNS)
    check_receipts(result, server.service.data_dir, people)
    assert result.errors == []
    assert result.leaks == []
    assert result.receipts_failed == []
    assert result.receipts_checked == CLIENTS * TURNS
    assert len(result.latencies) == CLIENTS * TURNS


@pytest.mark.slow
@pytest.mark.parametrize("page_sessions", [True, False], ids=["one-gradio-session-per-visitor", "a-session-per-call"])
def test_the_light_http_client_sends_every_input_of_chat(server: app.Running, page_sessions: bool) -> None:
    """bench/load.py's plain-HTTP row calls /chat with all its inputs (it once sent four of five, and every turn
    was refused unseen); its receipts verify."""
    people = visitors(3)
    result = sse_run(server.url, people, 2, page_sessions=page_sessions)
    check_receipts(result, server.service.data_dir, people)
    assert result.errors == []
    assert result.leaks == []
    assert result.receipts_failed == []
    assert len(result.latencies) == 3 * 2
