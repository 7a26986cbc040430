"""The worker: leases, concurrency, idling, and recovery of runs left by a dead worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.engine.loop import RunExecutor
from desktop_agent.engine.ports import CancelToken, LeaseGuard
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


class _Tracking(RunExecutor):
    """An executor that records overlapping activations of the same run."""

    active: dict[str, int] = {}  # noqa: RUF012 - shared across the two workers on purpose
    overlaps: list[str] = []  # noqa: RUF012
    lock = threading.Lock()

    def execute(
        self, run_id: str, cancel: CancelToken | None = None, lease: LeaseGuard | None = None
    ) -> RunStatus:
        with self.lock:
            self.active[run_id] = self.active.get(run_id, 0) + 1
            if self.active[run_id] > 1:
                self.overlaps.append(run_id)
        try:
            return super().execute(run_id, cancel, lease)
        finally:
            with self.lock:
                self.active[run_id] -= 1


def test_two_workers_never_execute_the_same_run_at_once(
    client: Client, make_executor: MakeExecutor
) -> None:
    def script(req):  # type: ignore[no-untyped-def]
        turns = sum(1 for m in req.messages if m["role"] == "assistant")
        return Reply("more", [("list_files", {})]) if turns < 3 else Reply("done")

    model = ScriptedModel(script, delay=0.01)
    runs = [client.start_run(f"job {i}", model="claude-haiku-4-5") for i in range(12)]
    base = make_executor(model)
    workers = []
    threads = []
    for _ in range(2):
        ex = _Tracking(base.store, base.model_for, base.tools, base.clock, base.config)
        w = Worker(client.store, ex, WorkerConfig(max_runs=4, poll_s=0.01, until_idle=True))
        workers.append(w)
        threads.append(threading.Thread(target=w.run))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert _Tracking.overlaps == []
    assert all(client.run(r.id).status == RunStatus.COMPLETED for r in runs)
    assert sum(w.activations for w in workers) >= len(runs)
    assert all(client.run(r.id).lease_owner is None for r in runs)


def test_until_idle_returns_when_only_waiting_runs_remain(
    client: Client, make_executor: MakeExecutor
) -> None:
    run = client.start_run("Sleep", model="claude-haiku-4-5")
    model = ScriptedModel([Reply("wait a day", [("wait", {"seconds": 86400})])])
    w = Worker(client.store, make_executor(model), WorkerConfig(poll_s=0.01, until_idle=True))
    runner = threading.Thread(target=w.run, daemon=True)
    runner.start()
    runner.join(timeout=30)  # returns at once when right; only a broken worker waits a day
    stuck = runner.is_alive()
    if stuck:
        w.stop()
    assert not stuck, "the worker kept going while its only run waits a day"
    waiting = client.run(run.id)
    assert waiting.status == RunStatus.WAITING and waiting.wake_at is not None
    assert waiting.wake_at > time.time() + 86000


def test_runs_of_a_killed_worker_are_recovered_without_waiting_out_the_lease(
    client: Client, make_executor: MakeExecutor, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(4):
        (ws / f"s{i}.md").write_text(f"Source {i} says something useful.\n")
    client.settings.ask_overwrite = False
    client.settings.save(client.db_path)
    run = client.start_run("Summarise", model="demo", workspace=ws)
    env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "2", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: (
                client.run(run.id).lease_owner and client.run(run.id).status == RunStatus.RUNNING
            ),
            what="the child worker to hold the run",
        )
        owner = client.run(run.id).lease_owner
        assert owner is not None and owner.split(":")[1] == str(child.pid)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    held = client.run(run.id)
    assert held.status == RunStatus.RUNNING
    assert held.lease_expires_at is not None and held.lease_expires_at > time.time() + 5
    # The recovering worker's clock stands still before the lease's end: the lease never
    # expires for it, so it can only take the run over by seeing its owner dead.
    clock = FakeClock(time.time())
    config = WorkerConfig(poll_s=0.01, until_idle=True)
    Worker(client.store, make_executor(clock=clock), config, clock=clock).run()
    assert clock.now() < held.lease_expires_at
    assert client.run(run.id).status == RunStatus.COMPLETED
    assert "Conclusions" in (ws / "report.md").read_text()
