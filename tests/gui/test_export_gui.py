"""Export from the app: File > Export run... asks format and file, writes off the GUI thread."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from PySide6.QtWidgets import QDialogButtonBox
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


@pytest.mark.qt_log_ignore("does not support propagateSizeHints")  # offscreen: a new dialog
def test_the_export_action_asks_format_and_file_and_writes_a_bundle(
    qtbot: QtBot, open_window: OpenWindow, client: Client, workspace: Path, tmp_path: Path
) -> None:
    run_id = first_run(client, workspace)
    window = open_window()
    qtbot.waitUntil(lambda: window.runs_model.get(run_id) is not None)
    assert window.select_run(run_id)
    assert window.acts["export"] in window.run_list.table.actions()  # the context menu
    window.acts["export"].trigger()
    dialog = window.export_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.path().name == f"{run_id}.html"
    dialog.set_format("bundle")
    assert dialog.path().name == f"{run_id}.tar.gz"  # the name follows the format
    target = tmp_path / "handed-on.tar.gz"
    dialog.set_path(target)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: "Exported to" in window.statusBar().currentMessage())
    assert str(target) in window.statusBar().currentMessage()
    with tarfile.open(target, "r:gz") as tar:
        assert {"manifest.json", "run.jsonl"} <= set(tar.getnames())


def test_import_brings_a_bundle_in_and_says_so_or_why_not(
    qtbot: QtBot, open_window: OpenWindow, workspace: Path, tmp_path: Path
) -> None:
    from desktop_agent.client.export import bundle_bytes

    colleague = Client(tmp_path / "colleague" / "desktop-agent.db")
    try:
        run_id = first_run(colleague, workspace)
        bundle = tmp_path / "from-a-colleague.tar.gz"
        bundle.write_bytes(bundle_bytes(colleague, run_id)[1])
    finally:
        colleague.close()
    window = open_window()
    assert window.acts["import"].isEnabled()
    window.import_bundle(bundle)
    qtbot.waitUntil(lambda: "Imported run" in window.statusBar().currentMessage())
    assert run_id in window.statusBar().currentMessage()
    window.import_bundle(bundle)  # twice: refused
    qtbot.waitUntil(lambda: "already here (among the archived runs)" in window.last_error)
    broken = tmp_path / "notes.tar.gz"
    broken.write_text("not a bundle")
    window.import_bundle(broken)
    qtbot.waitUntil(lambda: "is not a desktop-agent bundle" in window.last_error)
    assert window.last_error.startswith("Could not import the run: ")
