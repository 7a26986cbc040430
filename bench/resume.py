"""Resume after SIGKILL: from a new worker's spawn to its run's next step in the journal.

Usage::

    .venv/bin/python bench/resume.py [--repeat 7] [--delay 0.02] [--compare TREE]
                                     [--dir bench/out] [--json PATH]

One sample: a fresh SQLite database and a demo run over a workspace of eight sources. A
first worker (``DESKTOP_AGENT_DEMO_DELAY`` 0.3 s, so that a model call is in flight most
of the time) executes it until the run has at least three steps and a model call started
0.05-0.15 s ago; then it is killed with SIGKILL: its row in ``workers`` stays "alive" and
the run keeps its lease (30 s) and the step's intent. A new worker (``python -m
desktop_agent --db DB worker``, the demo delay ``--delay``) is spawned at once, and this
process polls the database file (a read-only connection, every 3 ms) for:

* **ready**: the new worker's row in ``workers`` (its pid): imports done, store open,
  registered;
* **claimed**: the run's ``lease_owner`` is the new worker: it found the old one dead and
  took the run over;
* **step**: the run's journal moved (a step row that is new, or whose status or attempt
  changed): the recovery done and the next step committed.

Printed per figure (spawn to ready, ready to claimed, claimed to step, spawn to step):
the median, min and max of ``--repeat`` samples; how the takeover happened (the old
worker's row marked stopped by the new one, and how long before the killed worker's lease
would have expired); and, as the floor, spawn to exit of ``python -c "import sqlalchemy"``
and ``python -c "import desktop_agent.persistence.store"`` (the worker cannot start
without them). ``--compare TREE`` measures the workers of another tree too (``git archive
COMMIT | tar -x -C TREE``), alternately, sample by sample: the code before a change in the
same run. The children's home and XDG folders are in a scratch folder under ``--dir``
(removed afterwards). A report, not a test: the exit status is 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402

DEFAULT_DIR = Path(__file__).resolve().parent / "out"
TARGET_S = 0.5
SLOW_DELAY_S = 0.3
"""The first worker's demo delay: a model call is in flight most of the time."""
POLL_S = 0.003
TIMEOUT_S = 60.0
SOURCES = 8
FIGURES = (
    "spawn to ready",
    "ready to claimed",
    "claimed to step",
    "spawn to step",
    "CPU: spawn to ready",
    "CPU: spawn to step",
)
FLOORS = {
    "floor: python -c pass": "pass",
    "floor: import sqlalchemy": "import sqlalchemy",
    "floor: import persistence.store": "import desktop_agent.persistence.store",
}


@dataclass
class Code:
    """A tree whose workers are measured, and its figures (seconds)."""

    label: str
    path: Path
    figures: dict[str, list[float]] = field(default_factory=dict)
    takeovers: list[str] = field(default_factory=list)
    early_s: list[float] = field(default_factory=list)

    def add(self, name: str, seconds: float) -> None:
        """One more sample of figure ``name``."""
        self.figures.setdefault(name, []).append(seconds)


def child_env(code: Path, home: Path, delay: float) -> dict[str, str]:
    """A worker's environment: this scratch home, no autostart, the demo delay, no key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DESKTOP_AGENT_", "XDG_")) and k != "ANTHROPIC_API_KEY"
    }
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / "data"),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CACHE_HOME=str(home / "cache"),
        PYTHONPATH=str(code),
        DESKTOP_AGENT_AUTOSTART_WORKER="0",
        DESKTOP_AGENT_DEMO_DELAY=f"{delay:g}",
    )
    return env


def spawn_worker(db: Path, code: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m desktop_agent --db DB worker`` of ``code``, its output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            cwd=code,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it does not end within 30 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def make_run(folder: Path) -> tuple[Path, str]:
    """A database with one queued demo run over ``SOURCES`` sources; (database, run id)."""
    folder.mkdir(parents=True)
    db = folder / "desktop-agent.db"
    workspace = folder / "workspace"
    workspace.mkdir()
    for i in range(SOURCES):
        (workspace / f"source{i}.md").write_text(f"# Source {i}\n\nA sentence worth a note.\n")
    settings = Settings()
    settings.save(db)
    with contextlib.closing(Client(db, settings)) as client:
        run = client.start_run(
            "Summarise the sources", model="demo", placement="any", workspace=str(workspace)
        )
    return db, run.id


def _ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)


def kill_mid_call(db: Path, run_id: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until a model call (the third step or later) is in flight, then SIGKILL."""
    conn = _ro(db)
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the first worker exited ({proc.returncode}) before the kill")
            row = conn.execute(
                "SELECT seq, kind, status, started_at FROM steps WHERE run_id = ? "
                "ORDER BY seq DESC LIMIT 1",
                (run_id,),
            ).fetchone()
            if row is not None and row[0] >= 3 and (row[1], row[2]) == ("model_call", "started"):
                time.sleep(max(0.0, row[3] + random.uniform(0.05, 0.15) - time.time()))
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                return
            time.sleep(0.005)
    finally:
        conn.close()
    raise SystemExit("the run never had a model call in flight")


def journal(conn: sqlite3.Connection, run_id: str) -> set[tuple[int, str, int]]:
    """The run's steps as (seq, status, attempt)."""
    rows = conn.execute("SELECT seq, status, attempt FROM steps WHERE run_id = ?", (run_id,))
    return {(int(s), str(st), int(a)) for s, st, a in rows}


def resume_sample(code: Code, scratch: Path, n: int, delay: float) -> None:
    """One kill and resume with the workers of ``code``; adds its figures."""
    folder = scratch / f"{code.label}-{n}"
    home = scratch / "home"
    db, run_id = make_run(folder)
    log = folder / "worker.log"
    first = spawn_worker(db, code.path, child_env(code.path, home, SLOW_DELAY_S), log)
    try:
        kill_mid_call(db, run_id, first)
    finally:
        stop(first)
    conn = _ro(db)
    try:
        before = journal(conn, run_id)
        old_lease_end = float(
            conn.execute("SELECT lease_expires_at FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        )
        env = child_env(code.path, home, delay)
        spawned = time.perf_counter()
        proc = spawn_worker(db, code.path, env, log)
        ps = psutil.Process(proc.pid)
        cpu: dict[str, float] = {}
        ready = claimed = stepped = None
        worker_id = ""
        try:
            while stepped is None or claimed is None:
                now = time.perf_counter()
                if now - spawned > TIMEOUT_S or proc.poll() is not None:
                    raise SystemExit(f"no resume within a minute: see {log}")
                if ready is None:
                    row = conn.execute(
                        "SELECT id FROM workers WHERE pid = ? AND stopped_at IS NULL", (proc.pid,)
                    ).fetchone()
                    if row is not None:
                        ready, worker_id = now, str(row[0])
                        cpu["ready"] = cpu_s(ps)
                if ready is not None and claimed is None:
                    owner = conn.execute(
                        "SELECT lease_owner FROM runs WHERE id = ?", (run_id,)
                    ).fetchone()[0]
                    if owner == worker_id:
                        claimed = now
                if stepped is None and journal(conn, run_id) - before:
                    stepped = now
                    cpu["step"] = cpu_s(ps)
                time.sleep(POLL_S)
            assert ready is not None
            # A claim and its first step may land between two polls: the step then
            # counts as claimed at the same poll.
            claimed = min(claimed, stepped)
            code.add("spawn to ready", ready - spawned)
            code.add("ready to claimed", claimed - ready)
            code.add("claimed to step", stepped - claimed)
            code.add("spawn to step", stepped - spawned)
            code.add("CPU: spawn to ready", cpu["ready"])
            code.add("CPU: spawn to step", cpu["step"])
            dead = conn.execute(
                "SELECT stopped_at FROM workers WHERE pid = ? ", (first.pid,)
            ).fetchone()
            took_at = time.time()
            code.early_s.append(old_lease_end - took_at)
            code.takeovers.append(
                "pid gone (marked stopped by the new worker)"
                if dead is not None and dead[0] is not None and old_lease_end > took_at
                else "lease expiry"
            )
        finally:
            stop(proc)
    finally:
        conn.close()
    shutil.rmtree(folder, ignore_errors=True)


def cpu_s(proc: psutil.Process) -> float:
    """CPU seconds (user + system) the process used so far."""
    t = proc.cpu_times()
    return float(t.user + t.system)


def floor_sample(code: Code, scratch: Path) -> None:
    """Spawn to exit of the imports the worker cannot start without."""
    env = child_env(code.path, scratch / "home", 0.0)
    for name, stmt in FLOORS.items():
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", stmt], env=env, cwd=code.path, check=True)
        code.add(name, time.perf_counter() - start)


def _ms(s: float) -> str:
    return f"{s * 1000:7.0f}"


def report(codes: Sequence[Code], repeat: int, delay: float) -> dict[str, object]:
    """Print the table; the figures as data."""
    load = os.getloadavg()
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, "
        f"nice {os.nice(0)}; {repeat} samples per code, demo delay {delay:g} s after the kill"
    )
    print(f"{'code':<7} {'figure':<32} {'median ms':>9} {'min':>7} {'max':>7}")
    out: dict[str, object] = {"repeat": repeat, "delay_s": delay, "load": list(load)}
    for code in codes:
        figures: dict[str, dict[str, float]] = {}
        for name, times in code.figures.items():
            med = statistics.median(times)
            figures[name] = {"median_s": med, "min_s": min(times), "max_s": max(times)}
            print(f"{code.label:<7} {name:<32} {_ms(med)}   {_ms(min(times))} {_ms(max(times))}")
        ways = sorted(set(code.takeovers))
        early = statistics.median(code.early_s) if code.early_s else float("nan")
        print(
            f"{code.label:<7} takeover: {', '.join(ways)}; the claim came {early:.1f} s "
            "(median) before the killed worker's lease would have expired"
        )
        out[code.label] = {"figures": figures, "takeover": ways, "lease_left_s": early}
    if len(codes) == 2:
        mine, theirs = codes
        for name in FIGURES:
            ratio = statistics.median(mine.figures[name]) / statistics.median(theirs.figures[name])
            print(f"{name}: {mine.label} / {theirs.label} = {ratio:.2f}x")
    total = statistics.median(codes[0].figures["spawn to step"])
    met = total <= TARGET_S
    print(
        f"target: spawn to the next step <= {TARGET_S:.1f} s: {'met' if met else 'NOT met'} "
        f"(median {total:.3f} s)"
    )
    out["target_met"] = met
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeat", type=int, default=7, help="samples per code (default 7)")
    p.add_argument("--delay", type=float, default=0.02, help="demo delay after the kill, s")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch folder")
    p.add_argument("--compare", type=Path, help="another tree, measured alternately")
    p.add_argument("--json", type=Path, help="write the figures here too")
    args = p.parse_args(argv)
    repeat = max(1, args.repeat)
    codes = [Code("this", REPO)]
    if args.compare is not None:
        codes.append(Code("before", args.compare.resolve()))
    args.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="resume-", dir=args.dir))
    try:
        (scratch / "home").mkdir()
        for n in range(repeat):
            for code in codes if n % 2 == 0 else reversed(codes):
                resume_sample(code, scratch, n, args.delay)
                floor_sample(code, scratch)
        figures = report(codes, repeat, args.delay)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
