"""What tracing runs costs per step, against a journal step's commit at FULL.

Writes ``--steps`` engine-shaped steps (``journal_bench.py``'s) through the real store at
``synchronous=FULL`` in a scratch folder on disk, timing each commit; then turns them into
spans with :class:`desktop_agent.worker.tracing.RunTracer` (the work a worker's tracing
thread does, off the journal's path) into an in-memory exporter, and prints the tracer's
time per step as a share of a commit. Target: under 5% of a step at FULL.

    .venv/bin/python bench/trace_bench.py [--steps 2000] [--dir bench/out]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from journal_bench import RUN_ID, _intent, _new_run, _outcome  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from desktop_agent.domain import RunStatus  # noqa: E402
from desktop_agent.engine.ports import RunPatch  # noqa: E402
from desktop_agent.persistence.db import Database, DbSettings  # noqa: E402
from desktop_agent.persistence.store import SqlStore  # noqa: E402
from desktop_agent.worker.tracing import RunTracer  # noqa: E402


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--dir", default=str(REPO / "bench" / "out"))
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db = Database(DbSettings.for_path(Path(tmp) / "trace.db", "FULL"))
        store = SqlStore(db)
        _new_run(store)
        store.commit(RUN_ID, intents=[_intent(1)], patch=RunPatch(status=RunStatus.RUNNING))
        commits = []
        for n in range(1, args.steps + 1):
            start = time.perf_counter()
            store.commit(RUN_ID, outcome=_outcome(n, 200), intents=[_intent(n + 1)])
            commits.append(time.perf_counter() - start)
        exporter = InMemorySpanExporter()
        tracer = RunTracer(store, exporter, batch=False)
        start = time.perf_counter()
        made = tracer.tick()
        traced = (time.perf_counter() - start) / max(made, 1)
        # The same commits again while a tracing thread reads the journal (as in a worker).
        tracer.start(interval_s=0.05)
        with_tracing = []
        for n in range(args.steps + 1, 2 * args.steps + 1):
            start = time.perf_counter()
            store.commit(RUN_ID, outcome=_outcome(n, 200), intents=[_intent(n + 1)])
            with_tracing.append(time.perf_counter() - start)
        tracer.close()
        db.dispose()
    commit, commit_traced = statistics.median(commits), statistics.median(with_tracing)
    print(f"{args.steps} steps at FULL:")
    print(f"  journal step commit (median)         {commit * 1e6:8.0f} µs")
    print(f"  the same, tracing thread running     {commit_traced * 1e6:8.0f} µs  "
          f"({(commit_traced / commit - 1) * 100:+.1f}%; target < 5%)")  # fmt: skip
    print(f"  tracer's own work per span           {traced * 1e6:8.0f} µs  ({made} spans, "
          f"{traced / commit * 100:.0f}% of a commit, on its own thread)")  # fmt: skip


if __name__ == "__main__":
    main()
