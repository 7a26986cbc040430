"""The worker dies while the window is open: the app says what that did to the runs.

The worker is a real child process killed with SIGKILL; the window's supervisor notices at
its next heartbeat check and shows the same recovery summary as at start.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.gui.dialogs.recovery import RecoveryColumn, RecoveryDialog
from desktop_agent.gui.mainwindow import MainWindow
from tests.gui.conftest import StartChild, in_model_call
from tests.helpers.polling import wait_until


def _recovery_dialog(window: MainWindow) -> RecoveryDialog | None:
    return window.recovery_dialog


def _supervisor_sees(window: MainWindow, alive: bool) -> bool:
    status = window.supervisor.status
    return status is not None and status.alive == alive


@pytest.mark.crash
def test_a_killed_worker_brings_up_the_recovery_summary(
    qtbot: QtBot,
    client: Client,
    window: MainWindow,
    start_child_worker: StartChild,
    demo_ws: Path,
) -> None:
    child_worker = start_child_worker()
    run = client.start_run("Interrupted while the app watches", model="demo", workspace=demo_ws)
    wait_until(lambda: in_model_call(client, run.id), what="the worker to start a model call")
    qtbot.waitUntil(lambda: _supervisor_sees(window, True), timeout=30_000)
    assert _recovery_dialog(window) is None  # nothing to report yet

    os.kill(child_worker.pid, signal.SIGKILL)
    child_worker.wait(timeout=30)

    qtbot.waitUntil(lambda: window.recovery_dialog is not None, timeout=30_000)
    dialog = _recovery_dialog(window)
    assert dialog is not None and dialog.isVisible()
    assert f"pid {child_worker.pid}" in dialog.summary.text()
    assert "1 run(s) were interrupted" in dialog.summary.text()
    model = dialog.model
    assert model.rowCount() == 1
    assert model.row_at(0).run.id == run.id and model.row_at(0).interrupted
    before = model.data(model.index(0, RecoveryColumn.BEFORE))
    assert "(interrupted)" in str(before)
    assert "stopped unexpectedly" in window.statusBar().currentMessage()
    notice = window.notifier.last
    assert notice is not None and notice.title == "Worker stopped"
    assert f"pid {child_worker.pid}" in notice.text


@pytest.mark.crash
def test_a_killed_idle_worker_is_reported_without_a_summary(
    qtbot: QtBot, window: MainWindow, start_child_worker: StartChild
) -> None:
    child_worker = start_child_worker()
    qtbot.waitUntil(lambda: _supervisor_sees(window, True), timeout=30_000)
    os.kill(child_worker.pid, signal.SIGKILL)
    child_worker.wait(timeout=30)
    qtbot.waitUntil(
        lambda: "no run was interrupted" in window.statusBar().currentMessage(), timeout=30_000
    )
    assert f"pid {child_worker.pid}" in window.statusBar().currentMessage()
    assert window.recovery_dialog is None


def test_a_worker_that_shuts_down_in_order_is_no_crash(
    qtbot: QtBot, window: MainWindow, start_child_worker: StartChild
) -> None:
    child_worker = start_child_worker()
    qtbot.waitUntil(lambda: _supervisor_sees(window, True), timeout=30_000)
    child_worker.send_signal(signal.SIGTERM)  # the worker records a clean exit
    child_worker.wait(timeout=30)
    qtbot.waitUntil(
        lambda: window.statusBar().currentMessage() == "The worker stopped.", timeout=30_000
    )
    assert window.recovery_dialog is None
    assert window.notifier.last is None
