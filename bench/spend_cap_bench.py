"""What the monthly spend cap's check costs before a model call.

Usage::

    .venv/bin/python bench/spend_cap_bench.py [--runs 500] [--steps-per-run 200]

A journal of ``--runs`` x ``--steps-per-run`` steps (100,000 by default), all spent this
month (``search_bench.build``'s synthetic runs, moved to now), then
``MonthSpend.month_spent_usd`` as the engine calls it: cold (every run summed once),
warm with nothing new, and warm after the asking run spent again (its cost moves, so
only its steps are summed again). Compared with one full sum over the month's steps.
A report, not a test: the exit status is always 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_bench import DEFAULT_DIR
from search_bench import build

from desktop_agent.persistence.db import Database, DbSettings
from desktop_agent.persistence.usage import MonthSpend, month_start


def timed(fn: object, n: int) -> float:
    """Median ms of ``n`` calls of ``fn()``."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(out)


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--steps-per-run", type=int, default=200)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / "spend-cap.db"
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    db = Database(DbSettings.for_path(path, "NORMAL"))
    build(db, args.runs, args.steps_per_run, seed=3)
    now = time.time()
    start = max(month_start(now), now - 86400.0)
    with db.write() as conn:  # everything spent this month, in the last day
        conn.exec_driver_sql("UPDATE runs SET updated_at = ?", (now,))
        conn.exec_driver_sql(
            "UPDATE steps SET started_at = ? + (seq % 1000), finished_at = ? + (seq % 1000)",
            (start, start),
        )
    cap = MonthSpend(db, lambda: 100.0)
    t0 = time.perf_counter()
    total = cap.month_spent_usd(now)
    cold = (time.perf_counter() - t0) * 1000
    warm = timed(lambda: cap.month_spent_usd(now), 50)

    def spend_again() -> None:
        with db.write() as conn:
            conn.exec_driver_sql(
                "UPDATE runs SET cost_usd = cost_usd + 0.001, updated_at = ?"
                " WHERE id = 'run-000007'",
                (time.time(),),
            )
        cap.month_spent_usd(now)

    moved = timed(spend_again, 50)

    def full_sum() -> None:
        with db.read() as conn:
            conn.exec_driver_sql(
                "SELECT sum(cost_usd) FROM steps WHERE coalesce(finished_at, started_at) >= ?",
                (month_start(now),),
            ).scalar_one()

    full = timed(full_sum, 5)
    n = args.runs * args.steps_per_run
    print(f"{n:,} steps in {args.runs} runs spent this month: ${total:,.2f}")
    print(f"first check (every run summed):      {cold:8.2f} ms")
    print(f"check, nothing new:                  {warm:8.2f} ms")
    print(f"check after the run spent (+commit): {moved:8.2f} ms")
    print(f"one full sum over the month's steps: {full:8.2f} ms")
    db.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
