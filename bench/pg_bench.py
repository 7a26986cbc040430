"""Several workers on PostgreSQL: throughput, takeover of a dead worker, commit latency.

Usage::

    .venv/bin/python bench/pg_bench.py [--runs 500] [--delay 0.1] [--workers 1,2,4]
                                       [--max-runs 4] [--steps 2000] [--skip-throughput]
                                       [--skip-takeover]

Starts a throwaway PostgreSQL server of its own (Debian's ``postgresql``, as in the tests,
but with ``fsync`` on: commits reach the disk as on a real server) and measures:

* **Throughput**: ``--runs`` demo runs (the offline demo model answering in ``--delay``
  seconds per call, so that runs wait on the "model" as real ones do) executed by 1, 2
  and 4 ``desktop-agent worker --until-idle`` processes (``--max-runs`` runs at once
  each) on one PostgreSQL database, and the same workload on one SQLite file. Figure:
  journal steps per second, from the first worker's start to the last one's exit, and
  the ratio to one worker on the same database. Target: 4 workers at least 3x one.
* **Takeover**: a worker holding runs is SIGKILLed; how long until other workers hold
  every one of its runs, for a worker on the same machine (its death is seen by its
  process id) and on another machine (a different host id: only its lease expiring
  tells, 30 s by default).
* **Commit latency**: a journal step through the real ``SqlStore.commit`` (outcome of one
  step, intent of the next, the run's counters, a snapshot every 25 steps: what the engine
  sends, as in ``journal_bench.py``; fenced by a worker's lease, as a worker's are)
  against a raw psycopg ``INSERT`` of a comparable row and ``COMMIT`` on the same server,
  in lockstep. Target: at most 1.5x. ``--skip-takeover --skip-throughput`` measures only
  this (seconds instead of minutes).

The exit status is always 0: this is a report, not a test.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):  # run as a script from anywhere
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from journal_bench import (  # noqa: E402
    RUN_ID,
    _intent,
    _new_run,
    _outcome,
    _raw_row,
)

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus  # noqa: E402
from desktop_agent.engine.ports import RunPatch, Snapshot  # noqa: E402
from desktop_agent.persistence.db import Database, DbSettings  # noqa: E402
from desktop_agent.persistence.store import SqlStore  # noqa: E402
from tests.helpers import postgres  # noqa: E402

SOURCES = {
    "alpha.md": "# Alpha\nAlpha says the market grew 4% in 2025. More follows.\n",
    "beta.txt": "Beta reports churn fell. More detail follows.\n",
}


def _settings() -> Settings:
    """No budgets, no approvals: the runs go from start to end alone."""
    return Settings(
        default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False, ask_unsafe=False
    )


def _data(root: Path, server: postgres.PgServer | None) -> Path:
    """A data folder: a SQLite file, or a pointer to a new database on ``server``."""
    folder = root / "data"
    folder.mkdir(parents=True)
    if server is not None:
        (folder / "database.url").write_text(server.url(server.create_database()) + "\n")
    db = folder / "desktop-agent.db"
    _settings().save(db)
    return db


def _queue(db: Path, root: Path, runs: int) -> Client:
    client = Client(db, _settings())
    for i in range(runs):
        ws = root / "ws" / f"{i:04d}"
        ws.mkdir(parents=True)
        for name, text in SOURCES.items():
            (ws / name).write_text(text)
        client.start_run(f"Summarise the sources ({i})", model="demo", workspace=ws)
    return client


def _worker(
    db: Path, env: dict[str, str], max_runs: int, log: Path, *, until_idle: bool = True
) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"]
    argv += ["--until-idle"] if until_idle else []
    with log.open("ab") as out:
        return subprocess.Popen(
            [*argv, "--max-runs", str(max_runs)],
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def throughput(
    server: postgres.PgServer | None, workers: int, runs: int, delay: float, max_runs: int
) -> tuple[int, float]:
    """Steps written and seconds taken by ``workers`` workers over ``runs`` demo runs."""
    with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
        root = Path(tmp)
        db = _data(root, server)
        client = _queue(db, root, runs)
        env = {"DESKTOP_AGENT_DEMO_DELAY": str(delay), "DESKTOP_AGENT_AUTOSTART_WORKER": "0"}
        start = time.perf_counter()
        procs = [_worker(db, env, max_runs, root / "workers.log") for _ in range(workers)]
        for p in procs:
            p.wait()
        elapsed = time.perf_counter() - start
        done = client.runs(limit=runs + 10)
        unfinished = [r.id for r in done if r.status != RunStatus.COMPLETED]
        if unfinished:
            log = (root / "workers.log").read_text()[-2000:]
            raise SystemExit(f"{len(unfinished)} runs did not complete:\n{log}")
        steps = sum(r.last_seq for r in done)
        client.close()
        return steps, elapsed


def takeover(server: postgres.PgServer, other_host: bool, runs: int = 6) -> float:
    """Seconds from a SIGKILL of the worker holding ``runs`` runs to another holding all."""
    with tempfile.TemporaryDirectory(prefix="pg-takeover-") as tmp:
        root = Path(tmp)
        db = _data(root, server)
        client = _queue(db, root, runs)
        env = {"DESKTOP_AGENT_DEMO_DELAY": "2.0", "DESKTOP_AGENT_AUTOSTART_WORKER": "0"}
        log = root / "workers.log"
        first = _worker(db, {**env, "DESKTOP_AGENT_HOST": "bench-a"}, runs, log, until_idle=False)
        ids = [r.id for r in client.runs()]
        _wait(lambda: all(client.run(i).lease_owner for i in ids), "the first worker's claims")
        held = {client.run(i).lease_owner for i in ids}
        second_host = "bench-b" if other_host else "bench-a"
        # Not --until-idle: with every run held by the first, it would exit at once.
        second = _worker(
            db, {**env, "DESKTOP_AGENT_HOST": second_host}, runs, log, until_idle=False
        )
        _wait(lambda: len(client.store.list_workers()) >= 2, "the second worker")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        killed = time.perf_counter()
        _wait(
            lambda: all(client.run(i).lease_owner not in held | {None} for i in ids),
            "the takeover",
            timeout=180.0,
        )
        took = time.perf_counter() - killed
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        client.close()
        return took


def _wait(check: object, what: str, timeout: float = 60.0) -> None:
    assert callable(check)
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def commit_latency(server: postgres.PgServer, steps: int, size: int = 200) -> tuple[float, float]:
    """Median µs per step: raw psycopg INSERT+COMMIT, and ``SqlStore.commit``, in lockstep."""
    import psycopg

    name = server.create_database()
    raw = psycopg.connect(server.dsn(name))
    raw.execute(
        "CREATE TABLE raw_steps (run_id text, seq integer, kind text, name text, status text, "
        "input text, output text, started_at double precision, finished_at double precision, "
        "PRIMARY KEY (run_id, seq))"
    )
    raw.commit()
    db = Database(DbSettings(server.url(name)))
    store = SqlStore(db)
    _new_run(store)
    # Fenced by a worker's lease, as every journal write of a worker is.
    lease = store.claim_run(RUN_ID, "bench-worker", time.time(), 3600.0)
    assert lease is not None
    store.commit(
        RUN_ID, intents=[_intent(1)], patch=RunPatch(status=RunStatus.RUNNING), lease=lease
    )
    raw_times: list[float] = []
    journal_times: list[float] = []
    for n in range(1, steps + 1):
        row = _raw_row(n, size)
        snapshot = Snapshot(seq=n, state={"last_seq": n}) if n % 25 == 0 else None
        outcome = _outcome(n, size)
        patch = RunPatch(add_active_seconds=0.001)
        order = (0, 1) if n % 2 else (1, 0)
        for which in order:
            t = time.perf_counter()
            if which == 0:
                raw.execute("INSERT INTO raw_steps VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)", row)
                raw.commit()
                raw_times.append(time.perf_counter() - t)
            else:
                store.commit(
                    RUN_ID, outcome=outcome, intents=[_intent(n + 1)], patch=patch,
                    snapshot=snapshot, lease=lease,
                )  # fmt: skip
                journal_times.append(time.perf_counter() - t)
    raw.close()
    db.dispose()
    server.drop_database(name)
    return statistics.median(raw_times) * 1e6, statistics.median(journal_times) * 1e6


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--delay", type=float, default=0.1, help="seconds per demo model call")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--max-runs", type=int, default=4, help="runs at once per worker")
    p.add_argument("--steps", type=int, default=2000, help="steps of the commit latency test")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--skip-takeover", action="store_true")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures."""
    args = _parse(argv)
    reason = postgres.unavailable()
    if reason is not None:
        print(f"cannot run: {reason}")
        return 0
    server = postgres.start_server(durable=True)
    try:
        print(f"PostgreSQL server on 127.0.0.1:{server.port} (fsync on); {os.cpu_count()} CPUs")
        raw_us, journal_us = commit_latency(server, args.steps)
        print(
            f"commit latency, median of {args.steps}: raw psycopg {raw_us:.0f} µs, "
            f"journal step {journal_us:.0f} µs, ratio {journal_us / raw_us:.2f} (target ≤ 1.5)"
        )
        if not args.skip_takeover:
            same = takeover(server, other_host=False)
            other = takeover(server, other_host=True)
            print(
                f"takeover of a SIGKILLed worker's runs: same host {same:.1f} s, "
                f"other host {other:.1f} s (lease 30 s)"
            )
        if args.skip_throughput:
            return 0
        counts = [int(n) for n in args.workers.split(",")]
        print(
            f"throughput: {args.runs} demo runs, {args.delay * 1000:.0f} ms per model call, "
            f"{args.max_runs} runs at once per worker"
        )
        for label, target in (("PostgreSQL", server), ("SQLite", None)):
            base = None
            for n in counts:
                steps, seconds = throughput(target, n, args.runs, args.delay, args.max_runs)
                rate = steps / seconds
                base = base or rate
                print(
                    f"  {label:10} {n} worker(s): {steps} steps in {seconds:6.1f} s = "
                    f"{rate:6.1f} steps/s ({rate / base:.2f}x one worker)"
                )
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
