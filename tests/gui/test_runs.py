"""Starting, watching, pausing, resuming and cancelling runs through the real window."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, StepKind, StepStatus
from desktop_agent.gui.controls import Control
from desktop_agent.gui.dialogs.prompts import MessageDialog, TextPrompt
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.notify import NoticeKind
from tests.gui.conftest import StartWorker, select, wait_status


def test_start_a_demo_run_from_the_dialog_and_watch_its_steps(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    start_worker()
    window.acts["new_run"].trigger()
    dialog = window.new_run_dialog
    assert dialog is not None and dialog.isVisible()
    assert not dialog.start.isEnabled()  # no goal yet
    assert "demo" in dialog.model.currentText().lower()  # the default model says it is a demo
    QTest.keyClicks(dialog.goal, "Summarise the sources")
    dialog.workspace.setText(str(demo_ws))
    QTest.mouseClick(dialog.start, Qt.MouseButton.LeftButton)

    qtbot.waitUntil(lambda: window.selected is not None, timeout=5000)
    assert window.selected is not None
    run_id = window.selected.run.id
    assert not dialog.isVisible()
    # Steps appear in the timeline as the worker records them, up to the approval wait.
    wait_status(qtbot, window, run_id, RunStatus.WAITING)
    qtbot.waitUntil(
        lambda: (
            window.steps_model.rowCount() > 0
            and window.steps_model.entry(window.steps_model.rowCount() - 1).kind
            == StepKind.APPROVAL
        )
    )
    kinds = {e.kind for e in window.steps_model.entries()}
    assert {StepKind.MODEL_CALL, StepKind.TOOL_CALL, StepKind.APPROVAL} <= kinds
    assert window.steps_model.rowCount() == client.run(run_id).last_seq
    # The header shows the goal, the demo label and the plan read from update_plan.
    header = window.detail.header
    assert header.title.full_text() == "Summarise the sources"
    assert "demo" in header.model.text().lower()
    assert "Plan" in header.plan.text() and "Survey the workspace" in header.plan.text()
    # Selecting a step fills the inspector.
    window.detail.timeline.setCurrentIndex(window.steps_model.index(1))
    details = window.detail.inspector.details.toPlainText()
    assert "Idempotency key" in details and f"{run_id}:2" in details
    # Only the approval controls and the always-available ones are enabled while waiting.
    assert window.acts[Control.APPROVE].isEnabled()
    assert not window.acts[Control.RESUME].isEnabled()
    assert not window.acts[Control.RETRY].isEnabled()


def test_pause_and_resume(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    run = client.start_run("Slow demo", model="demo", workspace=demo_ws)
    worker = start_worker(delay=0.15)
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.RUNNING)
    assert window.acts[Control.PAUSE].isEnabled()
    assert not window.acts[Control.RESUME].isEnabled()

    window.acts[Control.PAUSE].trigger()
    wait_status(qtbot, window, run.id, RunStatus.PAUSED)
    assert window.acts[Control.RESUME].isEnabled()
    assert not window.acts[Control.PAUSE].isEnabled()
    held = client.run(run.id).last_seq
    polled = worker.polls
    qtbot.waitUntil(lambda: worker.polls >= polled + 3, timeout=30_000)
    assert client.run(run.id).last_seq == held  # the worker looked again: no step taken

    window.acts[Control.RESUME].trigger()
    wait_status(qtbot, window, run.id, RunStatus.RUNNING, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() > held, timeout=10_000)


def test_cancel_asks_first(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    run = client.start_run("Slow demo to cancel", model="demo", workspace=demo_ws)
    start_worker(delay=0.5)
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.RUNNING)

    window.acts[Control.CANCEL].trigger()
    box = window.commands.dialog
    assert isinstance(box, MessageDialog) and box.isVisible()
    assert box.cancel_button.text() == "Keep running"
    confirmed: list[bool] = []
    box.confirmed.connect(lambda: confirmed.append(True))
    QTest.mouseClick(box.cancel_button, Qt.MouseButton.LeftButton)
    assert not box.isVisible() and confirmed == []  # nothing was sent to the run
    assert client.run(run.id).status == RunStatus.RUNNING

    window.acts[Control.CANCEL].trigger()
    box = window.commands.dialog
    assert isinstance(box, MessageDialog) and box.confirm_button is not None
    assert box.confirm_button.text() == "Cancel run"
    QTest.mouseClick(box.confirm_button, Qt.MouseButton.LeftButton)
    wait_status(qtbot, window, run.id, RunStatus.CANCELLED)
    qtbot.waitUntil(lambda: not window.acts[Control.CANCEL].isEnabled())
    assert not window.acts[Control.PAUSE].isEnabled()
    qtbot.waitUntil(
        lambda: (
            window.steps_model.rowCount() > 0
            and window.steps_model.entry(window.steps_model.rowCount() - 1).kind == StepKind.REPORT
        )
    )
    assert (demo_ws / f"partial-report-{run.id}.md").exists()


def test_retry_a_failed_run_and_see_the_failed_step(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    run = client.start_run("Will fail once", model="demo", workspace=demo_ws)
    _fail_first_model_call(client, run.id)
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.FAILED)
    assert window.acts[Control.RETRY].isEnabled()
    assert not window.acts[Control.RESUME].isEnabled()
    qtbot.waitUntil(lambda: window.steps_model.rowCount() == 1)
    assert window.steps_model.entry(0).status == StepStatus.FAILED

    start_worker()
    window.acts[Control.RETRY].trigger()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.steps_model.rowCount() > 2)
    # The failed model call is marked as retried by the call after it.
    assert window.steps_model.retried(0)


def test_notification_when_a_run_needs_the_analyst(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    qtbot.waitUntil(lambda: window.poller.polls > 0)
    run = client.start_run("Notify me", model="demo", workspace=demo_ws)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.notifier.last is not None)
    notice = window.notifier.last
    assert notice is not None and notice.kind == NoticeKind.NEEDS_USER and notice.run_id == run.id
    if not window.tray.available:  # offscreen: the notice goes to the status bar
        assert "needs you" in window.statusBar().currentMessage()


def test_filter_and_search_the_run_list(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path
) -> None:
    a = client.start_run("Alpha market study", model="demo", workspace=demo_ws)
    b = client.start_run("Beta churn review", model="demo", workspace=demo_ws)
    _fail_first_model_call(client, b.id)
    qtbot.waitUntil(lambda: window.runs_model.rowCount() == 2)
    panel = window.run_list
    QTest.keyClicks(panel.search, "churn")
    assert panel.proxy.rowCount() == 1
    assert panel.proxy.index(0, 0).data(Qt.ItemDataRole.DisplayRole) == "Failed"
    panel.search.clear()
    panel.filter.setCurrentText("Queued")
    assert panel.proxy.rowCount() == 1
    assert panel.select_run(a.id)
    assert "1 of 2" in panel.count.text()


def _fail_first_model_call(client: Client, run_id: str) -> None:
    """Record a failed first model call and a failed run, as the engine would."""
    import time

    from desktop_agent.engine.ports import RunPatch, StepIntent, StepOutcome

    store = client.store
    store.commit(
        run_id,
        intents=[StepIntent(1, StepKind.MODEL_CALL, "demo", {"model": "demo", "messages": 1})],
        patch=RunPatch(status=RunStatus.RUNNING, started_at=time.time()),
    )
    store.commit(
        run_id,
        outcome=StepOutcome(1, StepStatus.FAILED, {"partial": ""}, "400 bad request"),
        patch=RunPatch(
            status=RunStatus.FAILED,
            finished_at=time.time(),
            status_message="Model call failed: 400 bad request",
        ),
    )


def test_controls_have_shortcuts_and_the_toolbar_approves(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    for control in Control:
        assert not window.acts[control].shortcut().isEmpty(), control
    run = client.start_run("Summarise", model="demo", workspace=demo_ws)
    start_worker()
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    qtbot.waitUntil(lambda: window.acts[Control.APPROVE].isEnabled())
    window.acts[Control.APPROVE].trigger()  # shows the call; the dialog decides
    dialog = window.approval_dialog
    assert dialog is not None and dialog.isVisible()
    assert window.approvals_model.rowCount() == 1
    QTest.mouseClick(dialog.approve_button, Qt.MouseButton.LeftButton)
    # Decided here: hidden at once, and the controls no longer offer it.
    assert window.approvals_model.rowCount() == 0
    assert not window.acts[Control.APPROVE].isEnabled()
    wait_status(qtbot, window, run.id, RunStatus.COMPLETED)


def test_steer_sends_a_note(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    run = client.start_run("Slow demo to steer", model="demo", workspace=demo_ws)
    start_worker(delay=0.2)
    select(qtbot, window, run.id)
    wait_status(qtbot, window, run.id, RunStatus.RUNNING)
    window.acts[Control.STEER].trigger()
    prompt = window.commands.dialog
    assert isinstance(prompt, TextPrompt)
    QTest.keyClicks(prompt.text, "focus on 2025")
    QTest.mouseClick(prompt.ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: any(e.kind == StepKind.STEER for e in window.steps_model.entries()), timeout=10_000
    )
    client.pause(run.id)  # a quick teardown
    wait_status(qtbot, window, run.id, RunStatus.PAUSED)
