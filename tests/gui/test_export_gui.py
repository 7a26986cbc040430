"""Export from the app: File > Export run... writes the selected run off the GUI thread."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from tests.cli.test_rerun import first_run
from tests.gui.conftest import OpenWindow


def test_the_selected_run_is_exported_and_the_status_bar_says_where(
    qtbot: QtBot, open_window: OpenWindow, client: Client, workspace: Path, tmp_path: Path
) -> None:
    run_id = first_run(client, workspace)
    window = open_window()
    assert not window.acts["export"].isEnabled()  # nothing selected
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    assert window.acts["export"].isEnabled()
    target = tmp_path / "out" / "run.md"
    target.parent.mkdir()
    window.export_run(run_id, target, "md")
    qtbot.waitUntil(
        lambda: target.exists() and "Exported to" in window.statusBar().currentMessage()
    )
    assert target.read_text().startswith("# Summarise the Q3 notes")
    window.export_run(run_id, tmp_path / "missing" / "run.md", "md")  # no such folder
    qtbot.waitUntil(lambda: "Could not export the run" in window.last_error)
