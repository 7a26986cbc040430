"""Knowing, at start, that the app's previous session did not end in order.

A session writes a marker file (named after its pid) in the logs folder when it starts
and removes it when it ends in order. :mod:`faulthandler` writes to a file beside it, so a
fatal error (an abort in a C extension, a segfault) leaves its Python traceback there. At
the next start a marker whose process is gone means that session ended abnormally: killed
(no traceback), or crashed (the traceback is kept as ``crash-<time>-<pid>.log`` and
offered to the analyst). A marker whose process is still alive belongs to another running
instance and is left alone.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from desktop_agent.procs import process_alive

log = logging.getLogger(__name__)

MARKER = "app-session-{pid}.json"
FAULT_LOG = "app-faults-{pid}.log"
KEEP_CRASH_LOGS = 20
"""Older crash logs beyond this many are removed at start."""


@dataclass(frozen=True)
class PreviousCrash:
    """How the previous session of the app ended, when it did not end in order.

    Attributes:
        pid: the process of that session.
        started_at: when it started (epoch seconds).
        log_path: the kept crash log, or None when nothing was written (killed).
        excerpt: the start of what the log says (the fatal error and its traceback).
    """

    pid: int
    started_at: float
    log_path: Path | None
    excerpt: str

    def describe(self) -> str:
        """What happened, in a sentence or two."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started_at))
        if self.log_path is None:
            return (
                f"desktop-agent did not shut down in order last time (pid {self.pid}, started "
                f"{when}): it was killed, or the machine stopped. Runs are safe in their "
                "journals; the recovery summary lists any that were interrupted."
            )
        first = next((ln for ln in self.excerpt.splitlines() if ln.strip()), "a fatal error")
        return (
            f"desktop-agent crashed last time (pid {self.pid}, started {when}): {first}. "
            f"The crash log is kept at {self.log_path}."
        )


class AppSession:
    """The running app's marker and fault log; :meth:`close` at an orderly exit.

    Args:
        logs: the logs folder (created private when missing).
    """

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        pid = os.getpid()
        self.marker = logs / MARKER.format(pid=pid)
        self.fault_path = logs / FAULT_LOG.format(pid=pid)
        self._fault_file: IO[str] | None = None
        self.previous: PreviousCrash | None = None

    def start(self) -> PreviousCrash | None:
        """Read what the last session left, then mark this one and enable the fault log."""
        self.logs.mkdir(parents=True, exist_ok=True, mode=0o700)
        ended = [c for m in self.logs.glob(MARKER.format(pid="*")) if (c := _ended(m))]
        self.previous = max(ended, key=lambda c: c.started_at, default=None)
        _prune(self.logs)
        me = psutil.Process()
        record = {"pid": me.pid, "proc_started_at": me.create_time(), "started_at": time.time()}
        fd = os.open(self.fault_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._fault_file = os.fdopen(fd, "w", encoding="utf-8")
        faulthandler.enable(self._fault_file, all_threads=True)
        # The marker last: once it exists, a fatal error leaves its traceback (a crash
        # between the two was reported as an unexplained end, without its log).
        _write_private(self.marker, json.dumps(record))
        return self.previous

    def close(self) -> None:
        """The orderly end: no crash to report at the next start."""
        if self._fault_file is None:
            return
        faulthandler.disable()
        self._fault_file.close()
        self._fault_file = None
        with contextlib.suppress(OSError):
            self.fault_path.unlink()
        with contextlib.suppress(OSError):
            self.marker.unlink()


def _ended(marker: Path) -> PreviousCrash | None:
    """The session ``marker`` records, if it ended without removing it; consumes it."""
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        pid = int(record["pid"])
        proc_started = float(record["proc_started_at"])
        started = float(record["started_at"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable session marker %s: %s", marker, exc)
        return None
    if process_alive(pid, proc_started, tolerance_s=1.0):
        return None  # another instance, still running
    fault_path = marker.parent / FAULT_LOG.format(pid=pid)
    try:
        text = fault_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    kept: Path | None = None
    if text.strip():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
        kept = marker.parent / f"crash-{stamp}-{pid}.log"
        _write_private(kept, f"desktop-agent pid {pid}, started {time.ctime(started)}\n\n{text}")
    for done in (fault_path, marker):
        with contextlib.suppress(OSError):
            done.unlink()
    return PreviousCrash(pid, started, kept, text[:4000])


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _prune(logs: Path) -> None:
    crashes = sorted(logs.glob("crash-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in crashes[KEEP_CRASH_LOGS:]:
        with contextlib.suppress(OSError):
            old.unlink()
