"""The recovery summary after a worker is killed (a real child process, SIGKILL)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.engine.ports import RunPatch
from desktop_agent.gui.dialogs.recovery import RecoveryColumn
from tests.gui.conftest import (
    OpenWindow,
    StartChild,
    StartWorker,
    in_model_call,
    wait_status,
)
from tests.helpers.polling import wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.crash
def test_recovery_summary_after_a_killed_worker(
    qtbot: QtBot,
    client: Client,
    open_window: OpenWindow,
    start_worker: StartWorker,
    demo_ws: Path,
    start_child_worker: StartChild,
) -> None:
    run = client.start_run("Interrupted by a crash", model="demo", workspace=demo_ws)
    stuck = client.start_run("Needs a decision", model="demo", workspace=demo_ws)
    client.store.commit(
        stuck.id,
        patch=RunPatch(
            status=RunStatus.NEEDS_ATTENTION,
            status_message="Step 2 (send_email) was in flight when the worker stopped",
            attention_seq=2,
        ),
    )
    child = start_child_worker()
    wait_until(lambda: in_model_call(client, run.id), what="the worker to start a model call")
    assert client.run(run.id).lease_owner is not None
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)

    window = open_window()
    qtbot.waitUntil(lambda: window.recovery_dialog is not None, timeout=5000)
    dialog = window.recovery_dialog
    assert dialog is not None and dialog.isVisible()
    assert f"pid {child.pid}" in dialog.summary.text()
    model = dialog.model
    rows = {model.row_at(i).run.id: i for i in range(model.rowCount())}
    assert set(rows) == {run.id, stuck.id}

    def cell(run_id: str, column: RecoveryColumn) -> str:
        return str(model.index(rows[run_id], column).data())

    assert "interrupted" in cell(run.id, RecoveryColumn.BEFORE)
    assert f"worker pid {child.pid}" in cell(run.id, RecoveryColumn.WHY)
    assert "send_email" in cell(stuck.id, RecoveryColumn.WHY)
    assert cell(stuck.id, RecoveryColumn.NOW) == "needs you"

    # A new worker resumes the interrupted run from its journal; the summary follows.
    start_worker()
    qtbot.waitUntil(lambda: cell(run.id, RecoveryColumn.NOW) == "resumed", timeout=15_000)
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    steps = client.steps(run.id)
    assert steps[0].attempt == 2  # the model call in flight was re-issued, not duplicated
