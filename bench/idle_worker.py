"""What an idle worker costs while many runs wait at their approvals, and how fast it wakes.

Usage::

    .venv/bin/python bench/idle_worker.py [--waiting 0,2000,10000] [--seconds 20]
                                          [--settle 5] [--dir bench/out]
                                          [--compare TREE] [--keep]

For each N of ``--waiting``: a fresh SQLite database in which N runs are hibernated at an
approval (status ``waiting``, reason ``approval``, no thread, no lease). One real demo run
is driven there by ``desktop-agent worker --until-idle`` (it stops at the approval its
report's overwrite asks for), then its rows (run, steps, snapshot, events, approval) are
copied under new ids in one transaction: thousands of runs in seconds, each as a worker
would have left it. Besides the N, ``--decide`` runs (5) wait for the approvals to be
decided, and one more with a deadline (its default is reject) for the timer.

Then a real worker process (``python -m desktop_agent --db DB worker``) is started,
left ``--settle`` seconds once it has registered, and its CPU time (user + system, ``psutil``) is
sampled over ``--seconds``: printed as % of one core. Then the wake-ups:

* **approval**: the approvals are approved one after the other through
  ``Client.approve``; each time until the worker has taken the decision (the run no longer
  waits at its approval). Median and worst.
* **timer**: the deadline falls due; the time from it until the worker has applied the
  default (the run no longer waits).

Both are polled every 10 ms from this process. ``--compare TREE`` measures the worker
of another tree too (``git archive COMMIT | tar -x -C TREE``), alternately, on databases
built alike: the figures of the code before a change, in the same run. With ``--keep``
the last worker is left running and its pid printed (for ``py-spy``). A report, not a
test: the exit status is always 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):  # run as a script from anywhere
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from journal_bench import DEFAULT_DIR  # noqa: E402

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus  # noqa: E402

EMBEDS_ID = ("id", "input", "output", "state", "data", "message")
"""Columns of the copied rows where the template run's id may appear (replaced)."""

START_S = 15.0
"""Time allowed for a worker's start (imports, the scheduler's jobs), in the deadline."""

DECIDED = 5
"""Approvals decided one after the other, each timed (besides the N runs that wait);
``--decide`` changes it."""

COPIED = ("steps", "snapshots", "run_events", "approvals")
"""Tables whose rows of the template run are copied for each waiting run (with ``runs``)."""


def worker_env(code: Path = REPO) -> dict[str, str]:
    """The environment of a worker process: no autostart, an instant demo model.

    ``code`` is the tree whose ``desktop_agent`` the worker runs.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESKTOP_AGENT_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])),
        DESKTOP_AGENT_AUTOSTART_WORKER="0",
        DESKTOP_AGENT_DEMO_DELAY="0",
    )
    return env


def start_worker(db: Path, log: Path, *extra: str, code: Path = REPO) -> subprocess.Popen[bytes]:
    """``desktop-agent worker`` on ``db`` (the code of ``code``), its output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker", *extra],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=worker_env(code),
            cwd=code,
        )


def template_run(db: Path, settings: Settings) -> str:
    """One demo run driven to its approval by a real worker; its id."""
    workspace = db.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "source.md").write_text("# Source\n\nA sentence worth a note.\n")
    with contextlib.closing(Client(db, settings)) as client:
        run = client.start_run("Summarise", model="demo", placement="any", workspace=str(workspace))
    proc = start_worker(db, db.parent / "worker.log", "--until-idle")
    if proc.wait(timeout=120) != 0:
        raise SystemExit(
            f"the template run's worker failed: {(db.parent / 'worker.log').read_text()}"
        )
    with contextlib.closing(Client(db, settings)) as client:
        waiting = client.run(run.id)
    if waiting.status != RunStatus.WAITING:
        raise SystemExit(f"the template run is {waiting.status}, not waiting at its approval")
    return run.id


def copy_run(
    conn: sqlite3.Connection, template: str, new_id: str, cols: dict[str, list[str]]
) -> None:
    """Insert the template run's rows again under ``new_id`` (and where its id appears)."""
    run_cols = cols["runs"]
    run_picked = ", ".join("?" if c == "id" else c for c in run_cols)
    conn.execute(
        f"INSERT INTO runs ({', '.join(run_cols)}) SELECT {run_picked} FROM runs WHERE id = ?",
        (new_id, template),
    )
    for table in COPIED:
        names = [c for c in cols[table] if not (table == "run_events" and c == "id")]
        picked: list[str] = []
        args: list[str] = []
        for c in names:
            if c == "run_id":
                picked.append("?")
                args.append(new_id)
            elif c in EMBEDS_ID:  # approvals' ids "<run>.<seq>.<n>", and where they appear
                picked.append(f"replace({c}, ?, ?)")
                args += [template, new_id]
            else:
                picked.append(c)
        conn.execute(
            f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(picked)} FROM {table}"
            " WHERE run_id = ?",
            (*args, template),
        )


def build(folder: Path, waiting: int, decided: int = DECIDED) -> tuple[Path, list[str], str]:
    """A database with ``waiting`` runs at their approvals, and the runs for the wake-ups.

    Returns the database, ``decided`` runs whose approvals are decided, one after
    the other (the template first), and the run whose deadline is the timer: all waiting
    at approvals too, beside the ``waiting`` others.
    """
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "desktop-agent.db"
    settings = Settings()
    settings.save(db)
    template = template_run(db, settings)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        cols = {
            t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in ("runs", *COPIED)
        }
        conn.execute("BEGIN IMMEDIATE")
        made = []
        for i in range(waiting + decided):  # the template is one of the decided
            new_id = f"w{i:06d}{uuid.uuid4().hex[:3]}"
            copy_run(conn, template, new_id, cols)
            made.append(new_id)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return db, [template, *made[: decided - 1]], made[-1]


def set_deadline(db: Path, run_id: str, at: float) -> None:
    """Give the run's approval a deadline at ``at`` (its wake time), as the engine does."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE approvals SET deadline = ? WHERE run_id = ?", (at, run_id))
        conn.execute("UPDATE runs SET wake_at = ? WHERE id = ?", (at, run_id))
        conn.execute("COMMIT")
    finally:
        conn.close()


def registered(db: Path, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Wait until the worker has registered (its imports and the scheduler's start done)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline and proc.poll() is None:
            row = conn.execute("SELECT count(*) FROM workers WHERE stopped_at IS NULL").fetchone()
            if row[0]:
                return
            time.sleep(0.05)
    finally:
        conn.close()
    raise SystemExit(f"the worker did not start: {db.parent / 'worker.log'}")


def cpu_s(proc: psutil.Process) -> float:
    """CPU seconds of the process so far (user + system)."""
    t = proc.cpu_times()
    return float(t.user + t.system)


def wait_moved(db: Path, run_id: str, timeout: float = 60.0) -> float | None:
    """Poll (10 ms) until the run no longer waits at its approval; the time it did."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            row = conn.execute(
                "SELECT status, wait_reason FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is not None and (row[0], row[1]) != ("waiting", "approval"):
                return time.time()
            time.sleep(0.01)
    finally:
        conn.close()
    return None


def measure(
    args: argparse.Namespace, waiting: int, label: str, code: Path, keep: bool
) -> dict[str, float]:
    """Build, start a worker (the code of ``code``), sample its CPU, time the wake-ups."""
    folder = args.dir / f"idle-{waiting}-{label}"
    if folder.exists():
        for p in sorted(folder.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
    t0 = time.perf_counter()
    db, decided, timer = build(folder, waiting, args.decide)
    built = time.perf_counter() - t0
    # Far enough ahead for the settle, the sampling and the approvals: it falls due after.
    # START_S for the worker's start; each approval takes under a second.
    timer_at = time.time() + START_S + args.settle + args.seconds + args.decide + args.timer
    set_deadline(db, timer, timer_at)
    proc = start_worker(db, folder / "worker.log", code=code)
    ps = psutil.Process(proc.pid)
    try:
        registered(db, proc)
        time.sleep(args.settle)
        rss = ps.memory_info().rss / 2**20
        threads = ps.num_threads()
        c0, w0 = cpu_s(ps), time.perf_counter()
        time.sleep(args.seconds)
        c1, w1 = cpu_s(ps), time.perf_counter()
        core = 100.0 * (c1 - c0) / (w1 - w0)
        approve_ms = []
        with contextlib.closing(Client(db, Settings.load(db))) as client:
            for run_id in decided:
                (approval,) = [a for a in client.approvals() if a.run_id == run_id]
                time.sleep(0.5 + random.random() * 0.2)  # at no particular point of a poll
                asked = time.time()
                client.approve(approval.id)
                moved = wait_moved(db, run_id)
                if moved is not None:
                    approve_ms.append((moved - asked) * 1000)
        timer_ms = float("nan")  # the deadline came before the approvals were done
        if time.time() < timer_at:
            moved = wait_moved(db, timer, timeout=timer_at - time.time() + 60)
            timer_ms = (moved - timer_at) * 1000 if moved is not None else float("nan")
        median = statistics.median(approve_ms) if approve_ms else float("nan")
        worst = max(approve_ms) if approve_ms else float("nan")
        print(
            f"{label:<7} {waiting:>7}  {built:7.1f}  {core:10.2f}  {rss:7.0f}  {threads:7d}  "
            f"{median:8.0f} / {worst:4.0f}  {timer_ms:8.0f}",
            flush=True,
        )
        if keep:
            print(f"worker left running: pid {proc.pid} on {db}")
        return {"waiting": waiting, "core": core, "approve_ms": median, "timer_ms": timer_ms}
    finally:
        if not keep:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def main() -> int:
    """Measure and print."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waiting", default="0,2000,10000", help="comma-separated run counts")
    p.add_argument("--seconds", type=float, default=20.0, help="CPU sampling window")
    p.add_argument("--settle", type=float, default=5.0, help="wait after the worker starts")
    p.add_argument("--decide", type=int, default=DECIDED, help="approvals decided and timed")
    p.add_argument("--timer", type=float, default=3.0, help="deadline after the approvals, s")
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="scratch folder")
    p.add_argument(
        "--compare",
        type=Path,
        help="another tree (e.g. `git archive` of an older commit): its worker is measured too",
    )
    p.add_argument("--keep", action="store_true", help="leave the last worker running")
    args = p.parse_args()
    counts = [int(x) for x in args.waiting.split(",") if x.strip()]
    codes = [("this", REPO)] + ([("before", args.compare.resolve())] if args.compare else [])
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
        f"{psutil.cpu_count()} cores; CPU sampled over {args.seconds:g} s after "
        f"{args.settle:g} s; {args.decide} approvals and 1 deadline besides the N waiting"
    )
    print("code    waiting  build s  % of a core  RSS MB  threads  approval ms  timer ms")
    print("                                                       median/max  after due")
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in codes}
    for i, n in enumerate(counts):
        for label, code in codes:
            last = args.keep and i == len(counts) - 1 and label == "this"
            results[label].append(measure(args, n, label, code, last))
    for label, rows in results.items():
        if len(rows) > 1:
            base = rows[0]
            for r in rows[1:]:
                print(
                    f"{label}: {r['waiting']:.0f} waiting: {r['core'] - base['core']:+.2f} points "
                    f"of a core against {base['waiting']:.0f} waiting"
                )
    if args.compare:
        for mine, theirs in zip(results["this"], results["before"], strict=True):
            print(
                f"{mine['waiting']:.0f} waiting: this worker uses "
                f"{mine['core'] / theirs['core']:.2f}x the CPU of the one before"
            )
    worst = max(r["core"] for r in results["this"]) if counts else 0.0
    print(
        f"target: under 1% of a core at every N: {'met' if worst < 1.0 else 'NOT met'} "
        f"(worst {worst:.2f}%)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
