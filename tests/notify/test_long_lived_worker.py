"""What a worker keeps per run does not grow with every run it ever served.

A worker lives for weeks and serves thousands of runs an hour; the state its notifier keeps
per run is dropped once the run has ended, and a run's rate-limit rest once it is over.
Its free C heap pages go back to the system every few minutes (``desktop_agent.memory``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from desktop_agent import memory
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.worker.notify import RunWatcher
from desktop_agent.worker.worker import Worker, WorkerConfig
from tests.conftest import MakeExecutor
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel


def test_the_watcher_forgets_a_run_once_it_has_ended(client: Client) -> None:
    watcher = RunWatcher()
    run = client.start_run("Watched", model="claude-haiku-4-5")
    assert watcher.observe(run, 0.0) is None  # queued: nothing to tell
    assert run.id in watcher._seen  # the state it compares the next one with
    done = replace(run, status=RunStatus.COMPLETED)
    assert watcher.observe(done, 1.0) is not None  # told once
    assert run.id not in watcher._seen


def test_the_worker_releases_free_memory_every_few_minutes(
    client: Client, make_executor: MakeExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []
    clock = FakeClock()

    def release() -> bool:
        calls.append(clock.now())
        return True

    monkeypatch.setattr(memory, "release_free_memory", release)
    worker = Worker(
        client.store,
        make_executor(ScriptedModel([Reply("Done.")])),
        WorkerConfig(max_runs=1, poll_s=0.01),
        clock=clock,
    )
    for _ in range(3):
        worker.tick()
    assert calls == []  # not before TRIM_EVERY_S
    clock.advance(memory.TRIM_EVERY_S)
    worker.tick()
    worker.tick()
    assert calls == [clock.now()]  # once, then not again until TRIM_EVERY_S later
