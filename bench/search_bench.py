"""What the search index costs: in the journal's transaction (triggers) or after it.

Usage::

    .venv/bin/python bench/search_bench.py [--steps 2000] [--repeat 3] [--dir bench/out]

Two journals written in lockstep at FULL through the real ``SqlStore.commit`` (the steps of
``journal_bench.py``): one as shipped, one with triggers on ``steps`` that index each
step's input, output and error into an FTS5 table inside the same transaction (the
cheapest form of "kept in step": raw JSON, no text extraction). Then the shipped way:
``search.catch_up`` indexing the first journal after the fact, in steps per second, and
one search over it. Printed: µs per journal step of each, their ratio, catch-up rate,
search time. A report, not a test: the exit status is always 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from journal_bench import DEFAULT_DIR, JournalWriter, filesystem_type

from desktop_agent.persistence import search
from desktop_agent.persistence.search import SearchFilters

TRIGGERS = (
    "CREATE VIRTUAL TABLE bench_fts USING fts5(run_id UNINDEXED, seq UNINDEXED, body, "
    "tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER bench_ai AFTER INSERT ON steps BEGIN INSERT INTO bench_fts "
    "VALUES (new.run_id, new.seq, coalesce(new.input, '') || ' ' || coalesce(new.output, '')); "
    "END",
    "CREATE TRIGGER bench_au AFTER UPDATE OF output, error ON steps BEGIN INSERT INTO bench_fts "
    "VALUES (new.run_id, new.seq, coalesce(new.output, '') || ' ' || coalesce(new.error, '')); "
    "END",
)


def lockstep(folder: Path, n: int) -> tuple[float, float, float, float, float]:
    """(plain µs/step, triggers µs/step, median ratio, catch-up steps/s, search ms)."""
    plain = JournalWriter(folder / "plain.db", n, 200, "FULL")
    indexed = JournalWriter(folder / "triggers.db", n, 200, "FULL")
    with indexed.db.write() as conn:
        for ddl in TRIGGERS:
            conn.exec_driver_sql(ddl)
    a: list[float] = []
    b: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        first, second, ta, tb = (plain, indexed, a, b) if i % 2 else (indexed, plain, b, a)
        t0 = clock()
        first.step(i)
        t1 = clock()
        second.step(i)
        t2 = clock()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    t0 = clock()
    done = search.catch_up(plain.db)
    rate = done / (clock() - t0)
    t0 = clock()
    search.search(plain.db, '"result of step 1234"', SearchFilters(), 50)
    search_ms = (clock() - t0) * 1000
    plain.close()
    indexed.close()
    return (
        sum(a) / n * 1e6,
        sum(b) / n * 1e6,
        statistics.median(b) / statistics.median(a),
        rate,
        search_ms,
    )


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"scratch folder on {filesystem_type(args.dir)}; {args.steps} steps at FULL")
    rows = [lockstep(args.dir, args.steps) for _ in range(args.repeat)]
    plain, trig, ratio, rate, ms = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"journal step, as shipped:            {plain:8.1f} µs")
    print(
        f"journal step, FTS5 triggers:         {trig:8.1f} µs  ({trig / plain:.2f}x mean, "
        f"{ratio:.2f}x median)"
    )
    print(f"catch-up after the fact:             {rate:8.0f} steps/s")
    print(f"one search over {args.steps} steps:        {ms:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
