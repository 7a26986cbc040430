"""Closing the window with no tray never quits silently while runs go on: it asks.

Offscreen there is no system tray, as on a desktop without one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QPushButton
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.mainwindow import MainWindow


def _queued(qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path) -> str:
    run = client.start_run("Waits for a worker", model="demo", workspace=demo_ws)
    qtbot.waitUntil(lambda: window.runs_model.get(run.id) is not None)
    return run.id


def _question(window: MainWindow) -> MessageDialog:
    assert not window.tray.available
    window.close()
    box = window.commands.dialog
    assert isinstance(box, MessageDialog) and box.isVisible()
    assert box.windowTitle() == "Close desktop-agent?"
    assert "1 run is running or waiting" in box.text.text()
    assert window.isVisible()  # nothing closed before the analyst answers
    return box


def _button(box: MessageDialog, text: str) -> QPushButton:
    (found,) = [b for b in box.buttons.buttons() if b.text() == text]
    assert isinstance(found, QPushButton)
    return found


@pytest.fixture
def stops(window: MainWindow, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each time the worker would be stopped (the app started none here)."""
    calls: list[str] = []
    monkeypatch.setattr(window.supervisor, "stop_started_workers", lambda: calls.append("stop"))
    return calls


def test_cancel_keeps_the_window(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path, stops: list[str]
) -> None:
    _queued(qtbot, window, client, demo_ws)
    box = _question(window)
    QTest.mouseClick(box.cancel_button, Qt.MouseButton.LeftButton)
    assert not box.isVisible() and window.isVisible() and stops == []


def test_keep_running_closes_the_window_and_leaves_the_runs_and_worker(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path, stops: list[str]
) -> None:
    run_id = _queued(qtbot, window, client, demo_ws)
    box = _question(window)
    QTest.mouseClick(_button(box, "Keep running in the background"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.isVisible())
    assert stops == []  # the worker was not asked to stop
    assert client.run(run_id).status == RunStatus.QUEUED


def test_quit_everything_stops_the_worker(
    qtbot: QtBot, window: MainWindow, client: Client, demo_ws: Path, stops: list[str]
) -> None:
    _queued(qtbot, window, client, demo_ws)
    box = _question(window)
    QTest.mouseClick(_button(box, "Quit everything"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.isVisible())
    assert stops == ["stop"]


def test_with_nothing_going_on_it_closes_at_once(window: MainWindow, stops: list[str]) -> None:
    assert window.runs_model.rowCount() == 0
    window.close()
    assert not window.isVisible() and window.commands.dialog is None and stops == []
