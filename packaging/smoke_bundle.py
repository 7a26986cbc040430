"""Smoke test of the built bundle: its CLI runs the demo to the end, its app starts.

    python packaging/smoke_bundle.py [BUNDLE_DIR]      (default: dist/desktop-agent)

Run with a Python where desktop-agent is installed (the build environment): it talks to
the bundled app over the app's own single-instance socket, as a second launch would.

1. CLI: ``desktop-agent --db X run GOAL --model demo --yes`` exits 0 and ``runs --json``
   shows the run completed; its cold start is the best of three ``--help``.
2. App: ``desktop-agent --db Y`` (offscreen) starts, answers a "come to the front" request
   (its event loop runs, its window exists), and starts its worker, which is the bundled
   executable too (it registers in the database); sent SIGTERM (as at a logout), the app
   quits cleanly (exit 0) without a Python error, and its worker exits when asked.
   Cold start: launch to first answer.
3. Size of the bundle folder.

Prints the figures; exits 1 with one line saying what failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import psutil
from PySide6.QtNetwork import QLocalSocket

from desktop_agent.gui.single_instance import ACK, ACTIVATE, server_name

EXE = "desktop-agent.exe" if sys.platform == "win32" else "desktop-agent"
START_TIMEOUT_S = 120.0


class SmokeError(Exception):
    """What failed, in one line."""


def folder_size(path: Path) -> int:
    """Bytes in the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def env_for(home: Path) -> dict[str, str]:
    """A clean environment: no key, no keyring, no source tree on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANTHROPIC_API_KEY")}
    env.update(
        QT_QPA_PLATFORM="offscreen",
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
    )
    return env


def check_cli(exe: Path, work: Path) -> float:
    """The demo run completes; returns the CLI's cold start (seconds)."""
    env = env_for(work)
    starts = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([str(exe), "--help"], env=env, capture_output=True, check=True, cwd=work)
        starts.append(time.perf_counter() - t)
    db = work / "cli" / "desktop-agent.db"
    proc = subprocess.run(
        [str(exe), "--db", str(db), "run", "Summarise the notes", "--model", "demo", "--yes"],
        env=env,
        capture_output=True,
        text=True,
        cwd=work,
        timeout=300,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SmokeError(f"the bundled CLI's demo run exited {proc.returncode}: {tail[0]}")
    listed = subprocess.run(
        [str(exe), "--json", "--db", str(db), "runs"],
        env=env,
        capture_output=True,
        text=True,
        cwd=work,
        check=True,
    )
    runs = json.loads(listed.stdout)
    runs = runs.get("runs", runs) if isinstance(runs, dict) else runs
    if not runs or runs[0].get("status") != "completed":
        raise SmokeError(f"the demo run is not listed as completed: {listed.stdout[:200]}")
    return min(starts)


def answered(name: str) -> bool:
    """Whether an app listens on ``name`` and answers a "come to the front" request."""
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(200):
        return False
    sock.write(ACTIVATE)
    sock.flush()
    ok = sock.waitForReadyRead(2000) and bytes(sock.readLine().data()) == ACK
    sock.disconnectFromServer()
    return ok


def worker_pids(db: Path) -> list[int]:
    """Pids of the workers registered in ``db`` (read-only; none before it is migrated)."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return [int(pid) for (pid,) in conn.execute("SELECT pid FROM workers")]
    except sqlite3.Error:  # not migrated yet
        return []


def wait_for(what: str, check: Callable[[], bool], deadline: float) -> None:
    """Poll ``check`` until it holds, or fail saying ``what`` did not happen."""
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise SmokeError(f"timed out waiting until {what}")


def stop(pid: int) -> None:
    """Ask a process we started to end (it may be gone already)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)


def ended(pid: int) -> bool:
    """Whether process ``pid`` has exited (an exited one its parent has not reaped counts)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# The exit status after our SIGTERM: the app quits as its window's Quit does (0); on Windows
# os.kill terminates the process outright, with the signal's number as its exit code.
TERMINATED = signal.SIGTERM if sys.platform == "win32" else 0


def check_app(exe: Path, work: Path) -> float:
    """The app starts offscreen, answers, and starts its worker; returns its cold start."""
    db = work / "app" / "desktop-agent.db"
    db.parent.mkdir()
    name = server_name(db.parent)
    t = time.monotonic()
    app = subprocess.Popen(
        [str(exe), "--db", str(db)],
        env=env_for(work),
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: list[int] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answered(name):
            if app.poll() is not None:
                err = (app.stderr.read() if app.stderr else b"").decode(errors="replace")
                last = err.strip().splitlines()[-1:] or ["no output"]
                raise SmokeError(f"the bundled app exited {app.returncode} at start: {last[0]}")
            if time.monotonic() > deadline:
                raise SmokeError("the bundled app did not answer within 120 s")
            time.sleep(0.05)
        cold = time.monotonic() - t
        wait_for("the app's worker registered", lambda: bool(worker_pids(db)), deadline)
        workers = worker_pids(db)
        if app.poll() is not None:
            raise SmokeError(f"the bundled app exited {app.returncode} after starting")
    finally:
        stop(app.pid)
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
        for pid in workers:  # the worker outlives the app by design: end ours
            stop(pid)
    check_ended_cleanly(app, workers)
    return cold


def check_ended_cleanly(app: subprocess.Popen[bytes], workers: list[int]) -> None:
    """The app quit on our SIGTERM without a Python error, and its worker then exited.

    Qt's own warnings on stderr are allowed: the offscreen platform says it cannot raise
    the window each time it is asked to come to the front.
    """
    err = (app.stderr.read() if app.stderr else b"").decode(errors="replace")
    if app.returncode != TERMINATED:
        raise SmokeError(
            f"the bundled app ended with {app.returncode} after SIGTERM, not {TERMINATED}"
        )
    if "Traceback" in err:
        raise SmokeError(f"the bundled app reported an error: {err.strip().splitlines()[-1]}")
    deadline = time.monotonic() + 30
    for pid in workers:
        wait_for(f"the app's worker (pid {pid}) exited", partial(ended, pid), deadline)


def main() -> int:
    """Run the checks against the bundle; 0 when all pass."""
    bundle = Path(sys.argv[1] if len(sys.argv) > 1 else "dist/desktop-agent").resolve()
    exe = bundle / EXE
    if not exe.is_file():
        print(f"smoke: no bundle at {bundle}: build it with packaging/build_bundle.sh")
        return 1
    with tempfile.TemporaryDirectory(prefix="da-smoke-") as tmp:
        work = Path(tmp)
        try:
            cli_start = check_cli(exe, work)
            app_start = check_app(exe, work)
        except (SmokeError, subprocess.SubprocessError, OSError) as exc:
            print(f"smoke: FAILED: {exc}")
            return 1
    size = folder_size(bundle)
    print(f"smoke: bundle {bundle.name}: {size / 1e6:.0f} MB")
    print(f"smoke: CLI cold start (best of 3 --help): {cli_start:.2f} s; demo run completed")
    print(f"smoke: app cold start (launch to answering, offscreen): {app_start:.2f} s; worker up")
    print("smoke: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
