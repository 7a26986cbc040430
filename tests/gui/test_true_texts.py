"""What the app says is true: each text below once said something that was not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.client.checks import RecoveryItem, RecoveryReport
from desktop_agent.client.stepkinds import StepFacts, summary
from desktop_agent.client.views import RunRow
from desktop_agent.domain import RunStatus, StepKind, StepStatus, WorkerInfo
from desktop_agent.gui.dialogs.recovery import RecoveryDialog
from desktop_agent.gui.mainwindow import MainWindow, runs_that_stop
from desktop_agent.gui.widgets.header import without_repeat
from tests.gui.conftest import StartWorker, select, wait_status

REQUESTS = {"requests": [{"name": "write_file"}]}


def test_an_approval_the_run_ended_without_deciding_is_not_waiting_for_you() -> None:
    open_ = StepFacts(StepKind.APPROVAL, "write_file", StepStatus.STARTED, input=REQUESTS)
    assert summary(open_).endswith("waiting for you")
    ended = replace(open_, status=StepStatus.FAILED, error="cancelled")
    assert summary(ended) == "approval for write_file: not decided (cancelled)"
    decided = replace(
        open_, status=StepStatus.COMPLETED, output={"decisions": [{"state": "approved"}]}
    )
    assert summary(decided) == "approval for write_file: approved"


def test_a_status_line_does_not_say_its_status_twice() -> None:
    assert without_repeat("Cancelled", "Cancelled; partial report: r.md") == "partial report: r.md"
    assert (
        without_repeat("Waiting for approval", "Waiting for approval: write_file") == "write_file"
    )
    assert without_repeat("Cancelled", "Cancelled") == ""
    assert without_repeat("Paused", "Paused by the analyst") == "by the analyst"
    assert without_repeat("Cancel", "Cancelled by you") == "Cancelled by you"  # not a repeat
    assert without_repeat("Failed", "Model refused: bad key") == "Model refused: bad key"


def test_a_cancelled_run_reads_true_in_the_header_and_the_timeline(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, client: Client, demo_ws: Path
) -> None:
    start_worker()
    run = client.start_run("Cancel me while I ask", model="demo", workspace=str(demo_ws))
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    client.cancel(run.id)
    wait_status(qtbot, window, run.id, RunStatus.CANCELLED)
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: "partial report" in window.detail.header.status.text())
    status = window.detail.header.status.text()
    assert status.count("Cancelled") == 1, status
    model = window.steps_model
    qtbot.waitUntil(lambda: model.rowCount() == client.run(run.id).last_seq)
    approvals = [
        model.summary(i)
        for i in range(model.rowCount())
        if model.entry(i).kind == StepKind.APPROVAL
    ]
    assert approvals and not any("waiting for you" in a for a in approvals), approvals

    ended = client.start_run("Never planned", model="demo")
    client.cancel(ended.id)
    wait_status(qtbot, window, ended.id, RunStatus.CANCELLED)
    select(qtbot, window, ended.id)
    qtbot.waitUntil(lambda: "plan" in window.detail.header.plan.text().lower())
    assert "No plan yet" not in window.detail.header.plan.text()
    assert "made no plan" in window.detail.header.plan.text()


def test_the_window_title_names_the_app_once_and_last(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, client: Client, demo_ws: Path
) -> None:
    start_worker()
    run = client.start_run("Ask me", model="demo", workspace=str(demo_ws))
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: "approval" in window.windowTitle())
    title = window.windowTitle()
    # The platform adds the app's name to a title that does not end with it.
    assert title == "1 approval waiting — desktop-agent", title
    assert title.count("desktop-agent") == 1


def test_quitting_counts_only_the_runs_that_will_stop(client: Client) -> None:
    statuses = [RunStatus.RUNNING, RunStatus.WAITING, RunStatus.PAUSED, RunStatus.QUEUED]
    rows = []
    for n, status in enumerate(statuses):
        run = replace(client.start_run(f"Run {n}"), status=status)
        rows.append(RunRow(run))
    assert runs_that_stop(rows) == 1


def test_the_recovery_summary_is_titled_for_what_happened(qtbot: QtBot, client: Client) -> None:
    asking = replace(client.start_run("Decide"), status=RunStatus.NEEDS_ATTENTION)
    only_you = RecoveryReport((), (RecoveryItem(asking, False, "decide"),))
    dialog = RecoveryDialog(only_you)
    qtbot.addWidget(dialog)
    assert dialog.windowTitle() == "Runs that need your decision"
    dead = WorkerInfo(id="host:1:x", host="host", pid=1, started_at=0.0, heartbeat_at=0.0)
    crash = RecoveryReport((dead,), (RecoveryItem(asking, True, "its worker died"),))
    after = RecoveryDialog(crash)
    qtbot.addWidget(after)
    assert after.windowTitle() == "After a crash: what was interrupted"
