"""Prompts stay out of the logs (issue 17 §5): GROQ_LOG=debug must not print memories to stderr.

The groq SDK reads GROQ_LOG when it is imported, so each case runs a fresh
process against the loopback fake server of test_llm.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_llm import FakeGroq, completion_body

ROOT = Path(__file__).resolve().parents[2]
SECRET = "my-diagnosis-is-zebra-7731"  # a memory the prompt carries

CLIENT = """
import logging, sys
logging.basicConfig(level=logging.DEBUG)  # the loudest an embedding program could be
from chat.llm import LLM
llm = LLM(api_key="test-key-not-real", base_url=sys.argv[1], timeout=5)
memory = sys.argv[2]
done = llm.complete([{"role": "system", "content": "memories: " + memory}, {"role": "user", "content": "hi"}],
                    query="hi", memories=[])
print("provider=" + done.provider)
"""


@pytest.fixture
def fake() -> Iterator[FakeGroq]:
    server = FakeGroq()
    server.reply.body = completion_body("hello")
    server.thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.server.shutdown()
        server.server.server_close()
        server.thread.join(timeout=5)


def run_client(fake: FakeGroq, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GROQ_", "MRE_LOG")) and "proxy" not in k.lower()}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", CLIENT, fake.base_url, SECRET], capture_output=True, text=True, cwd=ROOT, env=full, timeout=60
    )


def test_groq_log_debug_does_not_log_the_prompt(fake: FakeGroq) -> None:
    out = run_client(fake, GROQ_LOG="debug")
    assert out.returncode == 0 and "provider=groq" in out.stdout, out.stderr
    assert SECRET in fake.requests[-1]["json"]["messages"][0]["content"]  # it was sent...
    assert SECRET not in out.stderr and SECRET not in out.stdout  # ...and never logged


def test_mre_log_prompts_is_the_one_way_to_log_them(fake: FakeGroq) -> None:
    out = run_client(fake, GROQ_LOG="debug", MRE_LOG_PROMPTS="1")
    assert out.returncode == 0 and "provider=groq" in out.stdout, out.stderr
    assert SECRET in out.stderr  # proves the test above would see a logged prompt
