"""Shared helper for benchmark scripts: describe the machine they ran on."""

from __future__ import annotations

import os
import platform
import sqlite3
from datetime import UTC, datetime


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return (
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')} — {os.cpu_count()} cores ({cpu}){mem}, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}"
    )
