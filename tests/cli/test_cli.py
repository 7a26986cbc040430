"""The command line as a user runs it: real processes, real database files."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_agent.config import Settings
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


def cli(
    db: Path, *args: str, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "0", "PYTHONPATH": str(REPO)}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        input=stdin,
        cwd=REPO,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "agent.db"
    Settings(default_max_cost_usd=None, default_max_steps=None).save(path)
    return path


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    ws = tmp_path / "notes"
    ws.mkdir()
    (ws / "q3.md").write_text("# Q3\nRevenue rose 12% on cloud demand.\n")
    (ws / "risks.txt").write_text("Supply risk is concentrated in two vendors.\n")
    return ws


def test_run_in_the_foreground_completes_with_live_progress(db: Path, sources: Path) -> None:
    result = cli(
        db,
        "run",
        "Summarise the notes in this folder",
        "--model",
        "demo",
        "--workspace",
        str(sources),
        "--yes",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("model_call" in line and "demo" in line for line in lines)
    assert any("read_file q3.md" in line for line in lines)
    assert any("approval for write_file: approved" in line for line in lines)
    assert "completed" in lines[-2]
    report = (sources / "report.md").read_text()
    assert "q3.md" in report and "risks.txt" in report and "Conclusions" in report
    assert "Traceback" not in result.stderr


def test_run_without_yes_stops_at_the_approval_and_says_how_to_continue(
    db: Path, sources: Path
) -> None:
    result = cli(db, "run", "Summarise", "--model", "demo", "--workspace", str(sources))
    assert result.returncode == 3
    assert "waiting(approval)" in result.stdout
    assert "desktop-agent approve" in result.stdout
    approvals = json.loads(cli(db, "approvals", "--json").stdout)
    assert len(approvals) == 1 and approvals[0]["tool"] == "write_file"
    approved = cli(db, "approve", approvals[0]["id"])
    assert approved.returncode == 0
    worker = cli(db, "worker", "--until-idle")
    assert worker.returncode == 0, worker.stderr
    runs = json.loads(cli(db, "runs", "--json").stdout)
    assert runs[0]["status"] == "completed"


def test_json_output_of_show_has_the_journal_and_totals(db: Path, sources: Path) -> None:
    started = cli(
        db, "run", "Summarise", "--model", "demo", "--workspace", str(sources), "--yes", "--json"
    )
    assert started.returncode == 0
    events = [json.loads(line) for line in started.stdout.splitlines()]
    assert events[-1]["event"] == "end" and events[-1]["status"] == "completed"
    run_id = events[-1]["id"]
    shown = json.loads(cli(db, "show", run_id[:6], "--json").stdout)
    assert shown["id"] == run_id
    assert shown["demo"] is True
    assert len(shown["journal"]) == shown["steps"]
    assert shown["cost_usd"] == pytest.approx(
        sum(s["cost_usd"] for s in shown["journal"]), abs=1e-6
    )
    assert all(s["idempotency_key"] == f"{run_id}:{s['seq']}" for s in shown["journal"])


def test_detach_then_pause_steer_resume_cancel(db: Path, sources: Path) -> None:
    # The suite sets DESKTOP_AGENT_AUTOSTART_WORKER=0: --detach starts no worker, says so,
    # and the commands queue until the worker this test starts carries them out.
    queued = cli(
        db, "run", "Summarise", "--model", "demo", "--workspace", str(sources), "--detach", "--json"
    )
    started = json.loads(queued.stdout)
    run_id = started["id"]
    assert started["worker_started"] is None
    assert started["worker"].startswith("no worker is running to carry it out")
    assert cli(db, "steer", run_id, "mention the vendors").returncode == 0
    assert cli(db, "pause", run_id).returncode == 0
    cancel = cli(db, "cancel", run_id)
    assert cancel.returncode == 0 and "cancel requested" in cancel.stdout
    assert json.loads(cli(db, "show", run_id, "--json").stdout)["status"] == "queued"
    env = {**os.environ, "DESKTOP_AGENT_DEMO_DELAY": "0", "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen(
        [sys.executable, "-m", "desktop_agent", "--db", str(db), "worker"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: json.loads(cli(db, "show", run_id, "--json").stdout)["status"] == "cancelled",
            what=f"run {run_id} to be cancelled",
            poll=0.3,
        )
        again = cli(db, "cancel", run_id)
        assert again.returncode == 2 and "already cancelled" in again.stderr
    finally:
        worker.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(30)
        if worker.poll() is None:
            worker.kill()
            worker.wait()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "nosuchrun"), "no run 'nosuchrun'"),
        (("approve", "x.1.1", "--edit", "{not json"), "--edit is not valid JSON"),
        (("run", "goal", "--max-time", "soon", "--detach"), "invalid duration 'soon'"),
        (("run", "   ", "--detach"), "the goal is empty"),
        (("run", "goal", "--model", "gpt-9", "--detach"), "unknown model 'gpt-9'"),
        (("budget", "nosuchrun", "--add-cost", "-5"), "give a positive amount"),
        (("frobnicate",), "invalid choice"),
    ],
)
def test_bad_input_gets_one_line_and_exit_2(db: Path, args: tuple[str, ...], message: str) -> None:
    result = cli(db, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_corrupt_and_newer_databases_are_refused_clearly(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"garbage" * 1000)
    result = cli(junk, "runs")
    assert result.returncode == 2 and "not a desktop-agent database" in result.stderr
    newer = tmp_path / "newer" / "a.db"
    assert cli(newer, "runs").returncode == 0
    import sqlite3

    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'zzzz'")
    result = cli(newer, "runs", "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["code"] == "schema_too_new"


def test_db_location_from_environment(tmp_path: Path) -> None:
    target = tmp_path / "envdb" / "x.db"
    env = {**os.environ, "DESKTOP_AGENT_DB": str(target), "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "desktop_agent", "runs"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert target.exists()
