"""Blocks of an import encoded in worker processes, handed back in order: an accelerator, never the judge.

Each worker is a plain child process (`python -m ledger.bulkpool`, as ledger/parallel.py
does: safe from a threaded server, and independent of how the caller's __main__ is
written) reading tasks on stdin and writing blocks on stdout, each a length-prefixed
pickle between this module and its own copy in the child. Task k goes to worker k mod W
and each worker answers in order, so block k is the next answer of worker k mod W. At
most DEPTH tasks wait per worker: the input is read as fast as it is encoded, no faster.

A worker that fails (cannot start, dies, answers garbage) is never a wrong answer: the
blocks it owed and every later one are encoded here, in this process, by the same
function (ledger/bulk.py), with the same ids.
"""

from __future__ import annotations

import fcntl
import logging
import os
import pickle
import selectors
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .bulk import Block, encode_lines

log = logging.getLogger("ledger")
DEPTH = 2  # tasks in flight per worker
_LEN = struct.Struct("<Q")
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_BYTES = 1 << 20


class Task(NamedTuple):
    """encode_lines' arguments for one block."""

    session: str
    lines: list[bytes]
    first: int
    seq0: int
    now: str
    latest: str
    allow_system: bool
    ids: bytes
    content: bool


def run_task(task: Task) -> Block:
    return encode_lines(
        task.session, task.lines, task.first, seq0=task.seq0, now=task.now, latest=task.latest,
        allow_system=task.allow_system, ids=task.ids, content=task.content,
    )


def _pack_block(b: Block) -> tuple[Any, ...]:
    return (b.seq, b.data, b.starts, b.prevs, b.digests, b.content, b.lines, b.first_text, b.blank_from, b.error)


def _unpack_block(t: Any) -> Block:
    seq, data, starts, prevs, digests, content, lines, first_text, blank_from, error = t
    return Block(seq, data, starts, prevs, digests, content, lines, first_text, blank_from, error)


class WorkerFailed(RuntimeError):
    pass


class _Worker:
    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ledger.bulkpool"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        for fd in (self.wfd, self.rfd):
            try:
                fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                pass  # a smaller pipe only costs more wake-ups
            os.set_blocking(fd, False)
        self.out: deque[memoryview] = deque()  # frames to send
        self.inbuf = bytearray()
        self.done: deque[Block] = deque()  # answers received, in order
        self.closing = False  # no more tasks: close stdin once `out` is sent
        self.eof = False

    def send(self, task: Task) -> None:
        payload = pickle.dumps(tuple(task), protocol=pickle.HIGHEST_PROTOCOL)
        self.out.append(memoryview(_LEN.pack(len(payload)) + payload))

    def write_some(self) -> None:
        while self.out:
            view = self.out[0]
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                return
            except BrokenPipeError:
                raise WorkerFailed(f"worker {self.proc.pid} stopped reading") from None
            if n < len(view):
                self.out[0] = view[n:]
                return
            self.out.popleft()
        if self.closing and self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def read_some(self) -> None:
        while True:
            try:
                chunk = os.read(self.rfd, PIPE_BYTES)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                break
            self.inbuf += chunk
        while len(self.inbuf) >= _LEN.size:
            (size,) = _LEN.unpack_from(self.inbuf)
            if len(self.inbuf) < _LEN.size + size:
                break
            try:
                with memoryview(self.inbuf) as whole, whole[_LEN.size : _LEN.size + size] as frame:
                    answer = pickle.loads(frame)
                self.done.append(_unpack_block(answer))
            except Exception as exc:  # noqa: BLE001 - any garbage: this worker is not trusted again
                raise WorkerFailed(f"worker {self.proc.pid}: unreadable answer ({exc})") from None
            del self.inbuf[: _LEN.size + size]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None and not f.closed:
                try:
                    f.close()
                except OSError:
                    pass
        self.proc.wait()


def encode_blocks(tasks: Iterable[Task], workers: int) -> Iterator[Block]:
    """run_task over `tasks`, in `workers` child processes; the blocks in task order.

    Closing the iterator early (the caller found a bad line) stops the workers.
    """
    todo = iter(tasks)
    pool: list[_Worker] = []
    sent: dict[int, Task] = {}  # tasks in flight, kept until answered: redone here if a worker fails
    k_sent = k_next = 0
    exhausted = False
    sel = selectors.DefaultSelector()
    try:
        try:
            pool = [_Worker() for _ in range(workers)]
        except OSError as exc:
            raise WorkerFailed(f"cannot start a worker ({exc})") from None
        for w in pool:
            sel.register(w.rfd, selectors.EVENT_READ, w)
        registered_w: set[int] = set()
        while True:
            while not exhausted and k_sent - k_next < DEPTH * workers:
                task = next(todo, None)
                if task is None:
                    exhausted = True
                    for w in pool:
                        w.closing = True
                        w.write_some()
                    break
                w = pool[k_sent % workers]
                w.send(task)
                sent[k_sent] = task
                k_sent += 1
                w.write_some()
            owner = pool[k_next % workers] if pool else None
            if owner is not None and owner.done:
                block = owner.done.popleft()
                del sent[k_next]
                k_next += 1
                yield block
                continue
            if exhausted and k_next == k_sent:
                return
            assert owner is not None
            if owner.eof:
                raise WorkerFailed(f"worker {owner.proc.pid} ended (exit {owner.proc.poll()}) before block {k_next}")
            for w in pool:  # watch stdin only while there is something to send
                want = bool(w.out) or (w.closing and w.proc.stdin is not None and not w.proc.stdin.closed)
                if want and w.wfd not in registered_w:
                    sel.register(w.wfd, selectors.EVENT_WRITE, w)
                    registered_w.add(w.wfd)
                elif not want and w.wfd in registered_w:
                    sel.unregister(w.wfd)
                    registered_w.discard(w.wfd)
            for key, events in sel.select():
                w = key.data
                if events & selectors.EVENT_WRITE:
                    w.write_some()
                    if not (w.out or (w.closing and w.proc.stdin is not None and not w.proc.stdin.closed)):
                        sel.unregister(w.wfd)
                        registered_w.discard(w.wfd)
                if events & selectors.EVENT_READ:
                    w.read_some()
                    if w.eof:
                        sel.unregister(w.rfd)
    except WorkerFailed as exc:
        log.warning("bulk import: %s; encoding the rest in this process", exc)
        for w in pool:
            w.stop()
        pool = []
        for k in range(k_next, k_sent):
            yield run_task(sent.pop(k))
        for task in todo:
            yield run_task(task)
    finally:
        sel.close()
        for w in pool:
            w.stop()


def _serve() -> None:
    """The worker: tasks from stdin, blocks to stdout, until stdin ends."""
    rfd, wfd = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    with os.fdopen(rfd, "rb", buffering=PIPE_BYTES, closefd=False) as inp:
        while True:
            head = inp.read(_LEN.size)
            if len(head) < _LEN.size:
                return
            (size,) = _LEN.unpack(head)
            task = Task(*pickle.loads(inp.read(size)))
            out = pickle.dumps(_pack_block(run_task(task)), protocol=pickle.HIGHEST_PROTOCOL)
            for part in (_LEN.pack(len(out)), out):
                view = memoryview(part)
                while view:
                    view = view[os.write(wfd, view) :]


if __name__ == "__main__":
    _serve()
