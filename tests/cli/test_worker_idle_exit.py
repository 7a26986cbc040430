"""A background worker a command starts exits after a stated idle time, by itself.

``run --detach`` starts ``desktop-agent worker --idle-exit D`` (``D`` from
``DESKTOP_AGENT_WORKER_IDLE_EXIT``, short here) and says so; a run hibernating for a timer
an hour away does not keep it alive, and a later worker (whose clock is an hour and more
ahead here) wakes that run and exits in turn. :class:`IdleExit`'s rules are checked on
their own with a fake clock.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from desktop_agent.cli import AUTOSTART_ENV
from desktop_agent.cli.workers import IDLE_EXIT_ENV
from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.engine.ports import ModelRequest
from desktop_agent.worker.main import IdleExit
from tests.conftest import MakeExecutor, drain
from tests.helpers.fakes import FakeClock, Reply, ScriptedModel
from tests.helpers.polling import wait_status, wait_until

REPO = Path(__file__).resolve().parents[2]
HOUR = 3600.0


def env(**extra: str) -> dict[str, str]:
    full = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "0", "PYTHONPATH": str(REPO), **extra}
    full.pop("ANTHROPIC_API_KEY", None)
    full.pop(AUTOSTART_ENV, None)  # the behaviour under test (the suite turns it off)
    return full


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids of detached workers a test's commands started: killed at the end if still there."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if "worker" in proc.cmdline():
                proc.kill()
                proc.wait(timeout=30)
        except psutil.NoSuchProcess:
            pass


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def timer_run(client: Client, make_executor: MakeExecutor) -> str:
    """A demo run that hibernates until an hour from now (its first move, scripted)."""
    client.settings.ask_overwrite = False  # the demo writes its report without asking
    client.settings.save(client.db_path)
    wake = time.time() + HOUR

    def first(req: ModelRequest) -> Reply:
        return Reply("Later.", [("wait", {"until": wake})])

    run = client.start_run("Wait an hour", model="demo", tools=["wait", "write_file"])
    drain(client.store, make_executor(ScriptedModel(first)))
    waiting = client.run(run.id)
    assert (waiting.status, waiting.wait_reason) == (RunStatus.WAITING, WaitReason.TIMER)
    return run.id


def test_a_worker_started_by_a_command_says_its_idle_time_and_exits_after_it(
    client: Client, make_executor: MakeExecutor, workspace: Path, started: list[int]
) -> None:
    sleeper = timer_run(client, make_executor)
    done = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "run",
         "Summarise", "--model", "demo", "--workspace", str(workspace), "--detach"],
        capture_output=True, text=True, timeout=120, env=env(**{IDLE_EXIT_ENV: "2s"}),
        cwd=REPO, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = re.search(r"started a background worker \(pid (\d+)\)", done.stdout)
    assert found, done.stdout
    pid = int(found.group(1))
    started.append(pid)  # killed at the end if it is still there
    assert f"(pid {pid}); it exits after 2s with nothing to do" in done.stdout
    assert "--idle-exit" in psutil.Process(pid).cmdline()
    run_id = done.stdout.split(";")[0].strip()
    wait_status(client, run_id, RunStatus.COMPLETED, timeout=60, what="the detached run")
    # Nothing left to do but a run waking in an hour: the worker exits by itself.
    wait_until(lambda: gone(pid), 60, f"worker {pid} to exit after 2 s idle")
    wait_until(lambda: not client.worker_status().alive, what="no worker registered alive")
    assert client.run(sleeper).wait_reason == WaitReason.TIMER

    # A later worker (its clock past the wake time) wakes the run, then exits in turn.
    later = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "worker",
         "--idle-exit", "1s"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=env(DESKTOP_AGENT_CLOCK_OFFSET=str(HOUR + 60)), cwd=REPO,
    )  # fmt: skip
    try:
        wait_until(lambda: later.poll() is not None, 90, "the later worker to exit by itself")
    finally:
        if later.poll() is None:
            later.kill()
        _, err = later.communicate(timeout=30)
    assert later.returncode == 0, err
    woken = client.run(sleeper)
    assert woken.wait_reason != WaitReason.TIMER, woken
    assert woken.last_seq > 2


def test_the_json_output_carries_the_idle_time(
    client: Client, workspace: Path, started: list[int]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(client.db_path), "run",
         "Summarise", "--model", "demo", "--workspace", str(workspace), "--detach", "--json"],
        capture_output=True, text=True, timeout=120, env=env(**{IDLE_EXIT_ENV: "1s"}),
        cwd=REPO, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    started.append(int(data["worker_started"]))
    assert data["worker_idle_exit_s"] == 1.0
    wait_until(lambda: gone(int(data["worker_started"])), 60, "the worker to exit by itself")


class Probe:
    """What :class:`IdleExit` reads, set by the test."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.polls = 0
        self.batches = False
        self.due: float | None = None
        self.standing = False

    def idle(self, idle_s: float) -> IdleExit:
        return IdleExit(
            idle_s,
            lambda: self.polls,
            self.clock.now,
            lambda: self.batches,
            lambda _now: self.due,
            lambda: self.standing,
        )

    def ask(self, rule: IdleExit, after: float) -> bool:
        """One more idle poll ``after`` seconds on."""
        self.clock.advance(after)
        self.polls += 1
        return rule()


def test_idle_exit_holds_for_the_idle_time_then_lets_go() -> None:
    p = Probe()
    rule = p.idle(600)
    assert p.ask(rule, 0) and p.ask(rule, 599)
    assert not p.ask(rule, 1)


def test_a_busy_poll_or_waiting_batches_start_the_idle_time_again() -> None:
    p = Probe()
    rule = p.idle(600)
    assert p.ask(rule, 0) and p.ask(rule, 500)
    p.polls += 1  # a poll that had work: the worker did not ask
    assert p.ask(rule, 200)  # idle again since 200 s only
    assert p.ask(rule, 599 - 200 + 200)
    p.batches = True
    assert p.ask(rule, 10)
    p.batches = False
    assert p.ask(rule, 599) and not p.ask(rule, 1)


def test_a_wake_up_soon_or_a_schedule_keeps_it_and_one_far_away_does_not() -> None:
    p = Probe()
    rule = p.idle(600)
    assert p.ask(rule, 0)
    p.due = p.clock.now() + 1200  # within the idle time once it is over: kept
    assert p.ask(rule, 600)
    p.due = p.clock.now() + 10 * HOUR  # far away: not kept
    assert not p.ask(rule, 600)
    p.standing = True  # an active schedule or watch must be fired: kept
    assert p.ask(rule, 600) and p.ask(rule, 600)
