"""Run again in the app: New run opens filled as the selected run was started."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from tests.cli.test_rerun import first_run
from tests.gui.conftest import OpenWindow


def test_run_again_opens_new_run_filled_as_the_run_was_started(
    qtbot: QtBot, open_window: OpenWindow, client: Client, workspace: Path
) -> None:
    first = client.run(first_run(client, workspace))
    window = open_window()
    qtbot.waitUntil(lambda: window.runs_model.get(first.id) is not None)
    assert window.select_run(first.id)
    assert window.acts["run_again"].isEnabled()
    assert window.acts["run_again"] in window.run_list.table.actions()
    window.acts["run_again"].trigger()
    dialog = window.new_run_dialog
    assert dialog is not None and dialog.windowTitle() == "Run again"
    assert dialog.goal.toPlainText() == "Summarise the Q3 notes"
    assert dialog.model.currentData() == "claude-haiku-4-5"
    assert dialog.workspace.text() == str(workspace)
    assert sorted(dialog.chosen_tools()) == ["append_note", "read_file"]
    assert (dialog.cost.value(), dialog.steps.value()) == (2.5, 40)
    assert Qt.CheckState.Checked in {
        dialog.tools.item(i).checkState() for i in range(dialog.tools.count())
    }
    dialog.close()
