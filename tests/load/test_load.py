"""Load: many concurrent demo runs in one worker all complete, with bounded threads and memory.

A smaller cousin of ``bench/load.py`` (which runs 200 runs at 100–500 ms per model call):
40 runs at 20–80 ms per call, in one in-process worker with ``max_runs=40``. No timing is
asserted; what must hold is that every run completes with a gap-free journal, that the
worker never holds more threads than its pool allows, that none are left behind, and that
memory stays within a fixed bound. The bench scripts get a tiny smoke run too.
"""

from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psutil

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepStatus, Usage
from desktop_agent.engine.ports import CancelToken, ModelRequest, ModelResponse
from desktop_agent.llm.demo import DemoModel
from desktop_agent.worker.compose import build_executor
from desktop_agent.worker.worker import Worker, WorkerConfig

REPO = Path(__file__).resolve().parents[2]
RUNS = 40


class SlowDemo:
    """The demo model taking 20–80 ms per call (fixed per idempotency key)."""

    def __init__(self) -> None:
        self.base = DemoModel(delay=0.0)

    def context_window(self, model: str) -> int:
        return self.base.context_window(model)

    def compacts_on_server(self, model: str) -> bool:
        return self.base.compacts_on_server(model)

    def count_tokens(self, request: ModelRequest) -> int | None:
        return self.base.count_tokens(request)

    def worst_case_cost(self, request: ModelRequest) -> float:
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
        frac = hashlib.sha256(idempotency_key.encode()).digest()[0] / 255
        model = DemoModel(delay=0.02 + 0.06 * frac)
        return model.complete(
            request,
            idempotency_key=idempotency_key,
            on_text=on_text,
            cancel=cancel,
            on_usage=on_usage,
        )


def test_many_concurrent_demo_runs_all_complete_with_bounded_threads_and_memory(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "data" / "agent.db"
    settings = Settings(default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False)
    settings.save(db_path)
    client = Client(db_path, settings)
    ids = []
    for i in range(RUNS):
        ws = tmp_path / "ws" / f"w{i}"
        ws.mkdir(parents=True)
        for j in range(2):
            (ws / f"s{j}.md").write_text(f"# S{j}\nRun {i} source {j} says {i + j}%.\n")
        ids.append(client.start_run(f"Summarise batch {i}", model="demo", workspace=ws).id)

    executor = build_executor(client.store, settings, model_for=lambda _name: SlowDemo())
    worker = Worker(
        client.store, executor, WorkerConfig(max_runs=RUNS, until_idle=True, poll_s=0.02)
    )
    proc = psutil.Process()
    gc.collect()
    rss_before = proc.memory_info().rss
    threads_before = threading.active_count()
    peak = {"threads": threads_before, "rss": rss_before}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak["threads"] = max(peak["threads"], threading.active_count())
            # Serving flushers (one ending beside a new one is named apart: it only returns).
            flushers = sum(t.name == "partial-flush" for t in threading.enumerate())
            peak["flushers"] = max(peak.get("flushers", 0), flushers)
            peak["rss"] = max(peak["rss"], proc.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        worker.run()
    finally:
        stop.set()
        sampler.join()

    for run_id in ids:
        run = client.run(run_id)
        assert run.status == RunStatus.COMPLETED, (run_id, run.status, run.status_message)
        steps = client.steps(run_id)
        assert [s.seq for s in steps] == list(range(1, len(steps) + 1))
        assert all(s.status == StepStatus.COMPLETED for s in steps)
        assert run.lease_owner is None
    # Threads: the pool never exceeds max_runs, plus the sampler and the one thread that
    # makes every streaming call's trailing save (never one per call); all gone after.
    assert peak.get("flushers", 0) <= 1
    assert peak["threads"] <= threads_before + RUNS + 2
    assert threading.active_count() == threads_before
    # Memory: generous fixed bound; a leak per step or per run would blow through it.
    assert peak["rss"] - rss_before < 200 * 2**20, (peak["rss"] - rss_before) / 2**20
    client.close()


def _bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
        check=False,
    )


def test_bench_scripts_smoke(tmp_path: Path) -> None:
    load = _bench("load.py", "--runs", "3", "--min-delay", "0", "--max-delay", "0.01")
    assert load.returncode == 0, load.stdout + load.stderr
    assert "steps/s" in load.stdout and "completed:       3/3" in load.stdout
    sbs = _bench(
        "side_by_side.py",
        *("--steps", "20", "--repeat", "1", "--systems", "journal,engine"),
        *("--dir", str(tmp_path / "sbs")),
    )
    assert sbs.returncode == 0, sbs.stdout + sbs.stderr
    assert "desktop-agent journal" in sbs.stdout and "desktop-agent engine" in sbs.stdout
    assert "ms/step" in sbs.stdout and "error" not in sbs.stdout
