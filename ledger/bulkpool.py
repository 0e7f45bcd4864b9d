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
import gc
import logging
import os
import pickle
import selectors
import struct
import subprocess
import sys
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ledger.bulk import Block, encode_lines

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


def _pack_task(task: Task) -> bytes:
    """The task's lines travel as one buffer and their lengths (pickling a list of small bytes costs more)."""
    lengths = array("Q", map(len, task.lines))
    rest = task._replace(lines=[])
    return pickle.dumps((tuple(rest), lengths.tobytes(), b"".join(task.lines)), protocol=pickle.HIGHEST_PROTOCOL)


def _unpack_task(payload: bytes) -> Task:
    fields, raw_lengths, blob = pickle.loads(payload)
    lengths = array("Q")
    lengths.frombytes(raw_lengths)
    lines, pos = [], 0
    for n in lengths:
        lines.append(blob[pos : pos + n])
        pos += n
    return Task(*fields)._replace(lines=lines)


def _block_parts(b: Block) -> tuple[bytes, list[Any]]:
    """A block as a small pickled header and its big buffers, sent as they are (no copy into a pickle)."""
    buffers: list[Any] = [b.data, b.starts, b.prevs, b.digests] + ([b.content] if b.content is not None else [])
    sizes = [memoryview(x).nbytes for x in buffers]
    header = pickle.dumps((b.seq, b.lines, b.first_text, b.blank_from, b.error, b.content is not None, sizes))
    return header, buffers


def _block_from(header: Any, buffers: list[bytearray]) -> Block:
    seq, lines, first_text, blank_from, error, has_content, _sizes = header
    starts, prevs = array("Q"), array("Q")
    starts.frombytes(buffers[1])
    prevs.frombytes(buffers[2])
    content = buffers[4] if has_content else None
    return Block(seq, buffers[0], starts, prevs, buffers[3], content, lines, first_text, blank_from, error)


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
        self.done: deque[Block] = deque()  # answers received, in order
        self.closing = False  # no more tasks: close stdin once `out` is sent
        self.eof = False
        # the answer being read: a length, then the header, then each buffer, read into place
        self.cur = bytearray(_LEN.size)
        self.pos = 0
        self.stage = "length"
        self.header: Any = None
        self.buffers: list[bytearray] = []
        self.k = -1

    def send(self, task: Task) -> None:
        payload = _pack_task(task)
        self.out.append(memoryview(_LEN.pack(len(payload))))
        self.out.append(memoryview(payload))

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
                n = os.readv(self.rfd, [memoryview(self.cur)[self.pos :]])
            except BlockingIOError:
                return
            if n == 0:
                self.eof = True
                return
            self.pos += n
            if self.pos == len(self.cur):
                try:
                    self._next_part()
                except WorkerFailed:
                    raise
                except Exception as exc:  # noqa: BLE001 - any garbage: this worker is not trusted again
                    raise WorkerFailed(f"worker {self.proc.pid}: unreadable answer ({exc})") from None

    def _next_part(self) -> None:
        """The part being read is complete: on to the next (skipping empty buffers), or the block is."""
        self.pos = 0
        if self.stage == "length":
            (size,) = _LEN.unpack(self.cur)
            if not size:
                raise WorkerFailed(f"worker {self.proc.pid}: an empty answer")
            self.cur, self.stage = bytearray(size), "header"
            return
        if self.stage == "header":
            self.header = pickle.loads(self.cur)
            self.buffers = [bytearray(n) for n in self.header[-1]]
            self.k, self.stage = -1, "buffers"
        self.k += 1
        while self.k < len(self.buffers) and not self.buffers[self.k]:
            self.k += 1
        if self.k < len(self.buffers):
            self.cur = self.buffers[self.k]
            return
        self.done.append(_block_from(self.header, self.buffers))
        self.cur, self.stage, self.header, self.buffers = bytearray(_LEN.size), "length", None, []

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
    gc.disable()  # only short-lived acyclic objects: reference counting frees them all
    rfd, wfd = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    with os.fdopen(rfd, "rb", buffering=PIPE_BYTES, closefd=False) as inp:
        while True:
            head = inp.read(_LEN.size)
            if len(head) < _LEN.size:
                return
            (size,) = _LEN.unpack(head)
            header, buffers = _block_parts(run_task(_unpack_task(inp.read(size))))
            for part in [_LEN.pack(len(header)), header, *buffers]:
                view = memoryview(part).cast("B")
                while view:
                    view = view[os.write(wfd, view) :]


if __name__ == "__main__":
    _serve()
