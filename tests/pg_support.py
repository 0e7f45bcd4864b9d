"""A real PostgreSQL server for the tests: a throwaway cluster in a temporary folder, on a loopback port.

`started_server()` finds Debian's server binaries (/usr/lib/postgresql/<version>/bin, or $PG_BIN),
runs initdb into a new folder, starts `postgres` listening on 127.0.0.1 only (and a socket in the
same folder), waits until it accepts connections, and stops it (SIGINT: fast shutdown) when done.
As root the server runs as the `postgres` user (PostgreSQL refuses to run as root).

When no server can be started the PostgreSQL tests skip with one line saying why — except under
CI=true, where that is a failure: the PostgreSQL suite must run in CI (.ci/run installs the packages).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 60.0
HOW_TO = "install Debian's postgresql package (apt-get install postgresql) or set PG_BIN to its bin folder"


class NoServer(RuntimeError):
    """No PostgreSQL server could be started here; the message says why."""


@dataclass
class Server:
    """A running throwaway cluster: its folder, port, process and an admin URL."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]
    user: str = "mre"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    @property
    def pid(self) -> int:
        """The postmaster's pid (what a fault test SIGKILLs)."""
        return self.process.pid


def bin_dir() -> Path:
    env = os.environ.get("PG_BIN")
    if env:
        path = Path(env)
        if not (path / "initdb").is_file():
            raise NoServer(f"PG_BIN={env} holds no initdb")
        return path
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    if which:
        return Path(which).parent
    raise NoServer(f"no PostgreSQL server binaries (initdb) found: {HOW_TO}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user() -> tuple[int | None, int | None]:
    """The uid/gid to run the server with: ourselves (None, None), or `postgres`'s when we are root."""
    if os.geteuid() != 0:
        return None, None
    import pwd

    try:
        pw = pwd.getpwnam("postgres")
    except KeyError as exc:
        raise NoServer("running as root and there is no `postgres` user to run the server as") from exc
    return pw.pw_uid, pw.pw_gid


def _run(cmd: list[str], uid: int | None, gid: int | None, **kw: object) -> subprocess.CompletedProcess[bytes]:
    def demote() -> None:
        if gid is not None:
            os.setgid(gid)
            os.setgroups([])
        if uid is not None:
            os.setuid(uid)

    return subprocess.run(cmd, preexec_fn=demote if uid is not None else None, capture_output=True, check=False, **kw)  # type: ignore[call-overload,no-any-return]


@contextlib.contextmanager
def started_server(*, settings: dict[str, str] | None = None) -> Iterator[Server]:
    """Start a throwaway cluster; stop it and remove its folder on exit."""
    bindir = bin_dir()
    uid, gid = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="mre-pg-"))
    try:
        if uid is not None:
            os.chown(root, uid, gid if gid is not None else -1)
        data = root / "data"
        init = _run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "mre", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions"],
            uid,
            gid,
        )
        if init.returncode != 0:
            init = _run([str(bindir / "initdb"), "-D", str(data), "-U", "mre", "--auth=trust", "-E", "UTF8", "--no-locale"], uid, gid)
        if init.returncode != 0:
            raise NoServer(f"initdb failed: {init.stderr.decode(errors='replace').strip()[-400:]}")
        port = _free_port()
        opts = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(root),
            "max_connections": "200",
            "shared_buffers": "128MB",
            "logging_collector": "off",
            "log_min_messages": "warning",
        }
        opts.update(settings or {})
        args = [str(bindir / "postgres"), "-D", str(data)]
        for k, v in opts.items():
            args += ["-c", f"{k}={v}"]
        log = open(root / "server.log", "wb")  # noqa: SIM115 - handed to the child, closed below

        def demote() -> None:
            os.setsid()
            if gid is not None:
                os.setgid(gid)
                os.setgroups([])
            if uid is not None:
                os.setuid(uid)

        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=demote)
        server = Server(root=root, port=port, process=proc)
        try:
            _wait_ready(server, root / "server.log")
            yield server
        finally:
            stop(server)
            log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _wait_ready(server: Server, logfile: Path) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise NoServer(f"postgres exited with {server.process.returncode}: {logfile.read_text(errors='replace')[-600:]}")
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return
        except psycopg.OperationalError as exc:
            last = exc
            time.sleep(0.1)
    raise NoServer(f"postgres did not accept connections within {START_TIMEOUT_S:.0f} s: {last}")


def stop(server: Server) -> None:
    """Fast shutdown (SIGINT), then SIGKILL if it lingers past 30 s."""
    proc = server.process
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc; empty where there is no /proc)."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            found.append(int(d.name))
    return found


def kill(server: Server) -> None:
    """SIGKILL the postmaster and every process it started: a crash, not a shutdown. Each backend and auxiliary
    process calls setsid, so they are not in the postmaster's process group: they are found by parent pid."""
    pid = server.process.pid
    children = _children(pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    server.process.wait(timeout=30)


def restart(server: Server) -> None:
    """Start the same cluster again on the same port (after a SIGKILL in a fault test): crash recovery runs."""
    bindir = bin_dir()
    uid, gid = _as_server_user()
    args = list(server.process.args)  # type: ignore[arg-type]
    log = open(server.root / "server.log", "ab")  # noqa: SIM115

    def demote() -> None:
        os.setsid()
        if gid is not None:
            os.setgid(gid)
            os.setgroups([])
        if uid is not None:
            os.setuid(uid)

    assert args[0] == str(bindir / "postgres")
    server.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=demote)
    _wait_ready(server, server.root / "server.log")


def server_or_skip() -> Iterator[Server]:
    """A fixture's body: a throwaway server for as long as the fixture lives; skips (fails under CI=true) when none
    can be started."""
    try:
        cm = started_server()
        server = cm.__enter__()
    except NoServer as exc:
        skip_or_fail(str(exc))
        return
    try:
        yield server
    finally:
        cm.__exit__(None, None, None)


def skip_or_fail(why: str) -> None:
    """One clear line: skip locally, fail under CI=true."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL tests cannot run: {why}. CI=true: the PostgreSQL suite must run in CI.", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {why}")


_counter = 0


def fresh_database(server: Server) -> str:
    """A new, empty database on the server; its URL."""
    import psycopg

    global _counter
    _counter += 1
    name = f"t{os.getpid()}_{_counter}"
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url(name)
