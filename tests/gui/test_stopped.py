"""A stopped run in the app: its own status, icon and color, and resume and cancel enabled."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus, WaitReason
from desktop_agent.gui import resources, theme
from desktop_agent.gui.controls import Control, allowed_controls
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.models.runs import RunColumn
from desktop_agent.gui.widgets.runlist import FILTERS
from tests.gui.conftest import StartWorker, select, wait_status


def test_a_stopped_run_can_be_resumed_or_cancelled_from_the_app(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, demo_ws: Path, client: Client
) -> None:
    run = client.start_run("Summarise the sources", model="demo", workspace=demo_ws)
    start_worker()
    wait_status(qtbot, window, run.id, RunStatus.WAITING)
    client.stop(run.id)
    stopped = wait_status(qtbot, window, run.id, RunStatus.STOPPED)
    select(qtbot, window, run.id)
    qtbot.waitUntil(lambda: window.acts[Control.RESUME].isEnabled())
    assert window.acts[Control.CANCEL].isEnabled()
    assert not window.acts[Control.STOP].isEnabled()
    assert not window.acts[Control.PAUSE].isEnabled()
    assert not window.acts[Control.RETRY].isEnabled()
    assert allowed_controls(stopped) >= {Control.RESUME, Control.CANCEL}

    # Shown as itself, not as completed.
    assert theme.status_text(stopped) == "Stopped"
    assert theme.status_color(RunStatus.STOPPED) != theme.status_color(RunStatus.COMPLETED)
    assert resources.icon_path(theme.status_icon_name(RunStatus.STOPPED)) is not None
    assert ("Stopped", RunStatus.STOPPED) in FILTERS
    row = next(
        r
        for r in range(window.runs_model.rowCount())
        if window.runs_model.row_at(r).run.id == run.id
    )
    shown = window.runs_model.index(row, RunColumn.STATUS).data()
    assert "Stopped" in str(shown)

    window.acts[Control.RESUME].trigger()
    again = wait_status(qtbot, window, run.id, RunStatus.WAITING)
    assert again.wait_reason == WaitReason.APPROVAL
    qtbot.waitUntil(lambda: window.acts[Control.STOP].isEnabled())
