"""The app: files dropped on New run are attached, and the run's header lists them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.gui.mainwindow import MainWindow
from tests.gui.conftest import OpenWindow, open_window, select  # noqa: F401 (the fixture)


def drop(target: QWidget, mime: QMimeData) -> bool:
    """Drag ``mime`` onto ``target`` and drop it there; whether the drag was accepted."""
    at = QPointF(target.rect().center())
    actions = Qt.DropAction.CopyAction
    buttons, keys = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(at.toPoint(), actions, mime, buttons, keys)
    QApplication.sendEvent(target, enter)
    if not enter.isAccepted():
        return False
    QApplication.sendEvent(target, QDropEvent(at, actions, mime, buttons, keys, QEvent.Type.Drop))
    return True


def files(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def settle(qtbot: QtBot, window: MainWindow) -> None:
    qtbot.waitUntil(lambda: not window.tasks.busy)


def test_drop_two_files_on_new_run_start_and_the_header_lists_them(
    qtbot: QtBot,
    open_window: OpenWindow,  # noqa: F811
    client: Client,
    sources: tuple[Path, Path],
    workspace: Path,
) -> None:
    window = open_window()
    dialog = window.open_new_run()
    settle(qtbot, window)
    assert not dialog.attachments.list.isVisible() and dialog.attachments.hint.isVisible()
    text = QMimeData()
    text.setText("just words")
    assert not drop(dialog, text)  # not files: left to whoever takes text
    assert drop(dialog, files(*sources))
    assert drop(dialog, files(sources[0]))  # the same file again is listed once
    assert dialog.attachments.paths() == tuple(str(p) for p in sources)
    assert dialog.attachments.list.isVisible()
    assert "1.0 KB" in dialog.attachments.list.item(0).toolTip()
    dialog.goal.setPlainText("Summarise the attached report against the data")
    dialog.model.setCurrentIndex(dialog.model.findData("demo"))
    dialog.workspace.setText(str(workspace))
    dialog.start.click()
    qtbot.waitUntil(lambda: len(client.runs()) == 1)
    (run,) = client.runs()
    assert [a.path for a in run.spec.attachments] == [
        "attachments/report.pdf",
        "attachments/data.csv",
    ]
    assert (workspace / "attachments" / "data.csv").read_bytes() == sources[1].read_bytes()
    qtbot.waitUntil(lambda: not dialog.isVisible())
    assert dialog.attachments.paths() == ()  # the next New run starts empty
    select(qtbot, window, run.id)
    line = window.detail.header.attachments
    qtbot.waitUntil(lambda: line.isVisible())
    assert line.text() == "Attachments: report.pdf, data.csv"
    assert run.spec.attachments[1].sha256 in line.toolTip()
    assert "32 bytes" in line.toolTip()


def test_run_again_lists_the_runs_attachments_and_remove_leaves_one_out(
    qtbot: QtBot,
    open_window: OpenWindow,  # noqa: F811
    client: Client,
    sources: tuple[Path, Path],
    workspace: Path,
) -> None:
    first = client.start_run("Read", model="demo", workspace=workspace, attachments=list(sources))
    window = open_window()
    select(qtbot, window, first.id)
    window.acts["run_again"].trigger()
    dialog = window.new_run_dialog
    assert dialog is not None
    settle(qtbot, window)
    kept = (
        str(workspace / "attachments" / "report.pdf"),
        str(workspace / "attachments" / "data.csv"),
    )
    assert dialog.attachments.paths() == kept
    dialog.attachments.list.item(0).setSelected(True)
    dialog.attachments.remove.click()
    assert dialog.attachments.paths() == kept[1:]
    dialog.close()
