"""Decisions from the command line are carried out, by a worker started when none lives.

With no live worker, the command that makes a run runnable starts one in the background
(as ``run --detach`` does) and says so. Real ``python -m desktop_agent`` processes on a
real database. Every worker a command starts here is detached (not our child): it is
killed by its pid at the end of the test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from desktop_agent.cli import AUTOSTART_ENV
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.domain import RunStatus, StepKind, WaitReason
from tests.helpers.polling import wait_status, wait_until

REPO = Path(__file__).resolve().parents[2]


class Cli:
    """The CLI on one database, and the workers its commands started."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.started: list[int] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "0", "PYTHONPATH": str(REPO)}
        env.pop("ANTHROPIC_API_KEY", None)
        env.pop(AUTOSTART_ENV, None)  # the behaviour under test (the suite turns it off)
        result = subprocess.run(
            [sys.executable, "-m", "desktop_agent", "--db", str(self.db), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,  # no terminal: the run stops at its approval
            cwd=REPO,
        )
        for line in result.stdout.splitlines():
            if line.startswith("{"):
                pid = json.loads(line).get("worker_started")
            else:
                found = re.search(r"started a background worker \(pid (\d+)\)", line)
                pid = found.group(1) if found else None
            if pid:
                self.started.append(int(pid))
        return result

    def kill_started(self) -> None:
        """Kill the workers our commands started, by pid (only if still those workers)."""
        for pid in dict.fromkeys(self.started):
            try:
                proc = psutil.Process(pid)
                if str(self.db) in proc.cmdline():  # still the worker we started
                    proc.kill()
                    proc.wait(timeout=30)
            except psutil.NoSuchProcess:
                pass


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    db = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(db)
    runner = Cli(db)
    yield runner
    runner.kill_started()


@pytest.fixture
def check(cli: Cli) -> Iterator[Client]:
    c = Client(cli.db)
    yield c
    c.close()


def _sources(tmp_path: Path) -> Path:
    ws = tmp_path / "notes"
    ws.mkdir(parents=True)
    (ws / "q3.md").write_text("# Q3\nRevenue rose 12% on cloud demand.\n")
    (ws / "risks.txt").write_text("Supply risk is concentrated in two vendors.\n")
    return ws


def _run_to_approval(cli: Cli, check: Client, ws: Path) -> str:
    """A foreground run without a terminal: it stops at its approval and returns 3."""
    result = cli("run", "Summarise", "--model", "demo", "--workspace", str(ws), "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    end = json.loads(result.stdout.splitlines()[-1])
    assert end["event"] == "end" and end["wait_reason"] == "approval"
    return str(end["id"])


def test_approve_with_no_worker_alive_starts_one_and_the_run_completes(
    cli: Cli, check: Client, tmp_path: Path
) -> None:
    run_id = _run_to_approval(cli, check, _sources(tmp_path))
    # The worker the run started exits once the run only waits for the analyst.
    wait_until(lambda: not check.worker_status().alive, what="the until-idle worker to exit")
    (approval,) = check.approvals()

    approved = cli("approve", approval.id)
    assert approved.returncode == 0, approved.stderr
    match = re.search(
        r"the run continues; started a background worker \(pid (\d+)\)", approved.stdout
    )
    assert match, approved.stdout
    pid = int(match.group(1))
    wait_status(check, run_id, RunStatus.COMPLETED, timeout=60, what=f"run {run_id} completed")
    assert check.worker_status().alive and check.worker_status().worker.pid == pid  # type: ignore[union-attr]

    # With a live worker, a decision says nothing extra (and --json says no worker started).
    second = _run_to_approval(cli, check, _sources(tmp_path / "again"))
    (approval,) = check.approvals()
    again = cli("approve", approval.id, "--json")
    assert again.returncode == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["decision"] == "approved" and data["worker_started"] is None
    assert data["worker"] == ""
    wait_status(check, second, RunStatus.COMPLETED, timeout=60, what=f"run {second} completed")


def test_stop_and_resume_with_no_worker_are_carried_out(
    cli: Cli, check: Client, tmp_path: Path
) -> None:
    run_id = _run_to_approval(cli, check, _sources(tmp_path))
    wait_until(lambda: not check.worker_status().alive, what="the until-idle worker to exit")

    stopped = cli("stop", run_id, "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert isinstance(json.loads(stopped.stdout)["worker_started"], int)
    wait_status(check, run_id, RunStatus.STOPPED, timeout=60, what="the run stopped")
    shown = cli("show", run_id)
    assert "stopped" in shown.stdout and f"desktop-agent resume {run_id}" in shown.stdout
    assert check.steps(run_id)[-1].kind == StepKind.REPORT

    # The worker that carried out the stop is alive: resume needs no new one.
    resumed = cli("resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "started a background worker" not in resumed.stdout
    wait_until(
        lambda: check.run(run_id).wait_reason == WaitReason.APPROVAL, 60, "asked again after resume"
    )
    cli.kill_started()  # now with no worker at all: the next decision must start one
    wait_until(lambda: not check.worker_status().alive, what="no worker alive")
    (approval,) = check.approvals()
    approved = cli("approve", approval.id, "--json")
    assert isinstance(json.loads(approved.stdout)["worker_started"], int), approved.stdout
    wait_status(check, run_id, RunStatus.COMPLETED, timeout=60, what="run completed")
    kinds = [s.kind for s in check.steps(run_id)]
    assert kinds.count(StepKind.REPORT) == 1 and kinds.index(StepKind.REPORT) < len(kinds) - 1


def test_run_detach_starts_a_worker_when_none_lives_and_the_run_completes(
    cli: Cli, check: Client, tmp_path: Path
) -> None:
    settings = Settings(default_max_cost_usd=None, default_max_steps=None, ask_overwrite=False)
    settings.save(cli.db)
    queued = cli("run", "Summarise", "--model", "demo", "--workspace", str(_sources(tmp_path)),
                 "--detach", "--json")  # fmt: skip
    assert queued.returncode == 0, queued.stderr
    started = json.loads(queued.stdout)
    assert started["worker_started"] in cli.started
    assert started["worker"] == (
        f"started a background worker (pid {started['worker_started']}); it exits after 10m "
        "with nothing to do"
    )
    wait_status(
        check, started["id"], RunStatus.COMPLETED, timeout=60, what="the detached run to complete"
    )
