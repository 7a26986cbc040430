"""Load: many concurrent demo runs in one worker; reports steps per second and peak memory.

Usage::

    .venv/bin/python bench/load.py [--runs 200] [--min-delay 0.1] [--max-delay 0.5]

Each run is a full offline demo run (plan, list, read and note every source, draft and
revise a report, answer) over its own workspace of ``--sources`` small files. The demo
model takes between ``--min-delay`` and ``--max-delay`` seconds per call (drawn per call,
reproducibly from the step's idempotency key). One in-process worker executes them with
``max_runs`` equal to ``--runs`` on a SQLite file on a real disk with the default
durability (WAL, ``synchronous=FULL``).

Printed: wall time, steps and steps per second, model calls, peak and final resident
memory of the process (sampled every 50 ms), peak thread count, and whether every run
completed with a gap-free journal. Exit code 1 when a run did not complete.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from desktop_agent.client.api import Client  # noqa: E402
from desktop_agent.config import Settings  # noqa: E402
from desktop_agent.domain import RunStatus, StepStatus, Usage  # noqa: E402
from desktop_agent.engine.ports import (  # noqa: E402
    CancelToken,
    ModelRequest,
    ModelResponse,
)
from desktop_agent.llm.demo import DemoModel  # noqa: E402
from desktop_agent.worker.compose import build_executor  # noqa: E402
from desktop_agent.worker.worker import Worker, WorkerConfig  # noqa: E402


class SlowDemo:
    """The offline demo model, taking ``lo``..``hi`` seconds per call."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo = lo
        self.hi = hi
        self.base = DemoModel(delay=0.0)
        self.calls = 0
        self._lock = threading.Lock()

    def delay_for(self, key: str) -> float:
        """A delay in [lo, hi], fixed for a given idempotency key."""
        frac = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        return self.lo + (self.hi - self.lo) * frac

    def context_window(self, model: str) -> int:
        """The demo's context window."""
        return self.base.context_window(model)

    def compacts_on_server(self, model: str) -> bool:
        """As the demo."""
        return self.base.compacts_on_server(model)

    def count_tokens(self, request: ModelRequest) -> int | None:
        """As the demo."""
        return self.base.count_tokens(request)

    def worst_case_cost(self, request: ModelRequest) -> float:
        """The demo's worst case."""
        return self.base.worst_case_cost(request)

    def complete(
        self,
        request: ModelRequest,
        *,
        idempotency_key: str,
        on_text: Callable[[str], None],
        cancel: CancelToken,
        on_usage: Callable[[Usage, float], None] | None = None,
    ) -> ModelResponse:
        """The demo's answer, after this call's delay."""
        with self._lock:
            self.calls += 1
        model = DemoModel(delay=self.delay_for(idempotency_key))
        return model.complete(
            request, idempotency_key=idempotency_key, on_text=on_text, cancel=cancel
        )


class Sampler:
    """Samples this process's resident memory and thread count in a thread."""

    def __init__(self, every_s: float = 0.05) -> None:
        self.proc = psutil.Process()
        self.every_s = every_s
        self.base_rss = self.proc.memory_info().rss
        self.peak_rss = self.base_rss
        self.peak_threads = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample."""
        self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)
        self.peak_threads = max(self.peak_threads, threading.active_count())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def make_workspaces(base: Path, runs: int, sources: int) -> list[Path]:
    """One workspace per run, each with ``sources`` small Markdown files."""
    out = []
    for i in range(runs):
        ws = base / "workspaces" / f"ws{i:04d}"
        ws.mkdir(parents=True)
        for j in range(sources):
            (ws / f"source{j}.md").write_text(
                f"# Source {j} of run {i}\nFinding {j}: the figure rose {i % 17 + j}% this year. "
                "Details follow in the appendix.\n",
                encoding="utf-8",
            )
        out.append(ws)
    return out


def run_load(
    folder: Path,
    runs: int,
    lo: float,
    hi: float,
    *,
    sources: int = 3,
    max_runs: int | None = None,
    poll_s: float = 0.05,
) -> dict[str, Any]:
    """Start ``runs`` demo runs and drain them with one worker; return the figures."""
    db_path = folder / "data" / "desktop-agent.db"
    settings = Settings(default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False)
    settings.save(db_path)
    client = Client(db_path, settings)
    workspaces = make_workspaces(folder, runs, sources)
    ids = [
        client.start_run(f"Summarise the sources of batch {i}", model="demo", workspace=ws).id
        for i, ws in enumerate(workspaces)
    ]
    model = SlowDemo(lo, hi)
    executor = build_executor(client.store, settings, model_for=lambda _name: model)
    worker = Worker(
        client.store,
        executor,
        WorkerConfig(max_runs=max_runs or runs, until_idle=True, poll_s=poll_s),
    )
    threads_before = threading.active_count()
    with Sampler() as sampler:
        started = time.perf_counter()
        worker.run()
        elapsed = time.perf_counter() - started
    final = [client.store.get_run(run_id) for run_id in ids]
    complete = [r for r in final if r.status == RunStatus.COMPLETED]
    steps = 0
    gapless = True
    for run in final:
        journal = client.steps(run.id)
        steps += len(journal)
        gapless &= [s.seq for s in journal] == list(range(1, len(journal) + 1))
        gapless &= all(s.status != StepStatus.STARTED for s in journal)
    client.close()
    return {
        "runs": runs,
        "completed": len(complete),
        "not_completed": {
            r.id: f"{r.status}: {r.status_message}" for r in final if r not in complete
        },
        "steps": steps,
        "model_calls": model.calls,
        "seconds": elapsed,
        "steps_per_s": steps / elapsed if elapsed else 0.0,
        "base_rss_mb": sampler.base_rss / 2**20,
        "peak_rss_mb": sampler.peak_rss / 2**20,
        "final_rss_mb": psutil.Process().memory_info().rss / 2**20,
        "threads_before": threads_before,
        "peak_threads": sampler.peak_threads,
        "threads_after": threading.active_count(),
        "journals_gapless": gapless,
        "activations": worker.activations,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--min-delay", type=float, default=0.1, help="seconds per model call")
    parser.add_argument("--max-delay", type=float, default=0.5, help="seconds per model call")
    parser.add_argument("--sources", type=int, default=3, help="files per workspace")
    parser.add_argument("--max-runs", type=int, default=None, help="worker pool (default: runs)")
    parser.add_argument("--dir", help="scratch folder on a real disk (default: bench/out/)")
    args = parser.parse_args(argv)
    if args.dir:
        base = Path(args.dir)
    else:
        (REPO / "bench" / "out").mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="load-", dir=REPO / "bench" / "out"))
    try:
        r = run_load(
            base,
            args.runs,
            args.min_delay,
            args.max_delay,
            sources=args.sources,
            max_runs=args.max_runs,
        )
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"{r['runs']} concurrent demo runs, model {args.min_delay * 1000:.0f}–"
        f"{args.max_delay * 1000:.0f} ms per call, worker max_runs={args.max_runs or args.runs}"
    )
    print(
        f"  completed:       {r['completed']}/{r['runs']}  (journals gap-free: "
        f"{r['journals_gapless']})"
    )
    print(f"  wall time:       {r['seconds']:.1f} s  ({r['activations']} activations)")
    print(f"  steps:           {r['steps']}  →  {r['steps_per_s']:.0f} steps/s")
    print(f"  model calls:     {r['model_calls']}")
    print(
        f"  memory (RSS):    start {r['base_rss_mb']:.0f} MB, peak {r['peak_rss_mb']:.0f} MB, "
        f"end {r['final_rss_mb']:.0f} MB"
    )
    print(
        f"  threads:         before {r['threads_before']}, peak {r['peak_threads']}, "
        f"after {r['threads_after']}"
    )
    for run_id, why in list(r["not_completed"].items())[:10]:
        print(f"  NOT COMPLETED {run_id}: {why}")
    return 0 if r["completed"] == r["runs"] and r["journals_gapless"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
