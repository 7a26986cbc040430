"""What a fork costs: making it (no step is copied) and reading its journal.

Usage::

    .venv/bin/python bench/fork_bench.py [--steps 5000] [--repeat 15]

A parent journal of ``--steps`` finished steps (a model turn and its tool call, over and
over) written through the real ``SqlStore.commit`` on a SQLite file; then forks of it after
step 10 and after step ``steps - 2`` (each with a note). Printed: the time to make each
fork (it should not grow with N: nothing is copied), the rows the forks own, and the median
time to read the whole journal (``load_steps``) and the timeline of the parent and of the
long fork, with their ratio (the fork reads the same rows from two runs). A report, not a
test: the exit status is always 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from desktop_agent.client.api import Client
from desktop_agent.client.forks import fork
from desktop_agent.domain import StepKind, StepStatus
from desktop_agent.engine.ports import StepIntent
from desktop_agent.persistence import readmodels


def _journal(client: Client, run_id: str, steps: int) -> None:
    """Finished model calls and tool calls, committed 100 at a time."""
    batch: list[StepIntent] = []
    for seq in range(1, steps + 1):
        if seq % 2:
            use = {"type": "tool_use", "id": f"t{seq}", "name": "read_file", "input": {"path": "a"}}
            kind, name = StepKind.MODEL_CALL, "demo"
            data: dict[str, object] = {"model": "demo"}
            out: dict[str, object] = {"content": [use], "stop_reason": "tool_use"}
        else:
            kind, name = StepKind.TOOL_CALL, "read_file"
            data = {"tool_use_id": f"t{seq - 1}", "arguments": {"path": "a"}}
            out = {"content": "x" * 200}
        batch.append(StepIntent(seq, kind, name, data, status=StepStatus.COMPLETED, output=out))
        if len(batch) == 100:
            client.store.commit(run_id, intents=batch)
            batch = []
    if batch:
        client.store.commit(run_id, intents=batch)


def _median_s(read: Callable[[str], object], run_id: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        read(run_id)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    """Print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    steps = args.steps - args.steps % 2
    with tempfile.TemporaryDirectory() as tmp:
        client = Client(Path(tmp) / "agent.db")
        parent = client.start_run("bench", model="demo", tools=["read_file"]).id
        _journal(client, parent, steps)
        made = {}
        for at in (10, steps - 2):
            t = time.perf_counter()
            made[at] = fork(client, parent, at, note="go on").id
            print(
                f"  make a fork after step {at:>6}      {1000 * (time.perf_counter() - t):7.2f} ms"
            )
        long = made[steps - 2]
        own = len(client.store.load_steps(long, 1)) - (steps - 2)
        print(f"  steps the long fork owns              {own} (of {steps - 1})")
        for label, read in (
            ("load_steps", lambda r: client.store.load_steps(r, 1)),
            ("timeline", lambda r: readmodels.timeline_rows(client.store.db, r, 1)),
        ):
            a = _median_s(read, parent, args.repeat)
            b = _median_s(read, long, args.repeat)
            print(
                f"  {label:<10} parent {1000 * a:7.1f} ms · fork {1000 * b:7.1f} ms"
                f"  ({b / a:.2f}x, {steps} steps)"
            )
        client.close()


if __name__ == "__main__":
    main()
