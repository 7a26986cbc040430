"""Worker processes: start one in the background for a database, and tell a live one.

Every place that starts a worker (the app's supervisor, ``run --detach``, a command whose
decision needs a worker when none is alive) goes through :func:`spawn_worker`: one command
line, one environment, one log file, one way to detach. What the worker then does is the
``worker`` command's business (:mod:`desktop_agent.worker.main`); this module only starts
the process, so that the client can start one without importing any of the execution code.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

import psutil

from desktop_agent import config

WORKER_LOG = "worker.log"
"""The file, in the logs folder beside the database, that detached workers write to."""

_started: list[subprocess.Popen[bytes]] = []
"""The workers this process started and has not seen exit.

Detached as they are, they are still our children: their exit status is collected here
(at the next start) so that none lingers as a zombie, and their ``Popen`` is not dropped
while they run (which Python reports with a ResourceWarning).
"""


def process_alive(pid: int, started_at: float, tolerance_s: float = 2.0) -> bool:
    """Whether process ``pid`` is alive and is the one started at ``started_at``.

    Comparing start times (within ``tolerance_s``) tells a reused pid from the original
    process; a start time of 0 means unknown, and only the pid is checked.
    """
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return started_at == 0.0 or abs(proc.create_time() - started_at) < tolerance_s
    except psutil.Error:
        return False


def worker_argv(
    db_path: Path, *, until_idle: bool = False, nice: int = 0, idle_exit_s: float | None = None
) -> list[str]:
    """The command line of a worker process serving ``db_path``.

    Args:
        db_path: the database the worker serves.
        until_idle: the worker exits when no run has work left.
        nice: how much lower than ours the worker's CPU priority is (0-19).
        idle_exit_s: the worker exits after this long with nothing to do (None: never).
    """
    # In a bundle, sys.executable is desktop-agent itself, not a Python to give "-m".
    runner = (
        [sys.executable]
        if getattr(sys, "frozen", False)
        else [sys.executable, "-m", "desktop_agent"]
    )
    args = [*runner, "--db", str(db_path), "worker"]
    if until_idle:
        args.append("--until-idle")
    if nice:
        args += ["--nice", str(nice)]
    if idle_exit_s is not None:
        args += ["--idle-exit", f"{idle_exit_s:g}s"]
    return args


def spawn_worker(
    db_path: Path, *, until_idle: bool = False, nice: int = 0, idle_exit_s: float | None = None
) -> int:
    """Start a detached worker process for ``db_path`` (no stdio pipes); returns its pid.

    The worker gets a session of its own, so that closing the terminal or the app that
    started it does not stop its runs, and this process's environment (where the API key
    may be). Its output goes to the private log beside the database.

    Args:
        db_path: the database the worker serves.
        until_idle: the worker exits when no run has work left.
        nice: how much lower than ours the worker's CPU priority is (0-19).
        idle_exit_s: the worker exits after this long with nothing to do (None: never).

    Raises:
        OSError: the process could not be started (or its log not opened).
    """
    _started[:] = [proc for proc in _started if proc.poll() is None]
    log_path = config.log_dir(db_path) / WORKER_LOG
    with _private_log(log_path) as log:
        proc = subprocess.Popen(
            worker_argv(db_path, until_idle=until_idle, nice=nice, idle_exit_s=idle_exit_s),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            env=os.environ.copy(),
            **_detached(),
        )
    _started.append(proc)
    return proc.pid


def _detached() -> dict[str, Any]:
    """How a worker outlives the app: its own session (POSIX) or process group (Windows).

    Either way a Ctrl+C or a closed terminal of the app's does not reach the worker.
    """
    if sys.platform == "win32":
        flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
        return {"creationflags": flags}
    return {"start_new_session": True}


def _private_log(path: Path) -> BinaryIO:
    """``path`` opened for appending, readable by the user only (0600), even if it existed.

    The worker's log holds goals, file names and tool errors of every run: as private as
    the database beside it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    fchmod = getattr(os, "fchmod", None)  # not on Windows, where the mode means little
    if fchmod is not None:
        with contextlib.suppress(OSError):  # not the owner (a shared folder): the mode stays
            fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")
