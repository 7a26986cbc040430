"""Freezing a worker (SIGSTOP) at a moment it holds no SQLite write transaction open.

A worker frozen inside one (another of its threads committing) locks every other worker
out of the database: the takeover a test waits for cannot happen, and the other worker
gives up after its busy timeout. Linux's ``/proc/locks`` says who holds the lock.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

WAL_WRITE_LOCK = 120
"""Offset in the ``-shm`` file of SQLite's WAL write lock."""

REFREEZE_TRIES = 200
"""How many times a worker frozen inside a write transaction is let go on and frozen again."""


def holds_write_lock(db: Path, pid: int) -> bool:
    """Whether process ``pid`` holds the write lock of SQLite database ``db``.

    In WAL mode the writer holds a POSIX write lock on byte 120 of the ``-shm`` file (no
    such file, e.g. a PostgreSQL database: False).
    """
    try:
        inode = os.stat(f"{db}-shm").st_ino
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) < 8 or parts[1] != "POSIX" or parts[3] != "WRITE":
            continue
        if parts[4] != str(pid) or not parts[5].endswith(f":{inode}"):
            continue
        end = parts[7]
        if int(parts[6]) <= WAL_WRITE_LOCK and (end == "EOF" or int(end) >= WAL_WRITE_LOCK):
            return True
    return False


def _kill(pid: int, sig: signal.Signals) -> bool:
    os.kill(pid, sig)
    return True


def stop_outside_writes(
    db: Path, pid: int, send: Callable[[int, signal.Signals], bool] = _kill
) -> bool:
    """SIGSTOP ``pid`` and, while it holds ``db``'s write lock, let it go on and stop it again.

    ``send`` delivers a signal and says whether the process was still there. Returns
    whether the process ended up frozen outside a write transaction.
    """
    if not send(pid, signal.SIGSTOP):
        return False
    for _ in range(REFREEZE_TRIES):
        if not holds_write_lock(db, pid):
            return True
        send(pid, signal.SIGCONT)
        time.sleep(0.002)
        send(pid, signal.SIGSTOP)
    return not holds_write_lock(db, pid)
