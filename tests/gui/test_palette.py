"""View ▸ Palette: light, dark or the system's, applied at once, kept in the settings."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QAction, QGuiApplication, QImage, QPalette
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from desktop_agent import config
from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.gui import theme
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.palette import apply_palette


@pytest.fixture(autouse=True)
def system_palette_after(qapp: Any) -> Iterator[None]:
    """The QApplication is shared by the whole session: give the desktop its colors back."""
    yield
    apply_palette("system")


def _palette_action(window: MainWindow, label: str) -> QAction:
    """The action ``label`` of View ▸ Palette, found as the analyst finds it: in the menus."""
    view = _submenu(window.menuBar().actions(), "&View")
    palette = _submenu(view.actions(), "&Palette")
    return next(a for a in palette.actions() if a.text() == label)


def _submenu(actions: list[QAction], title: str) -> QMenu:
    menu = next(a.menu() for a in actions if a.text() == title)
    assert isinstance(menu, QMenu)
    return menu


def _saved_palette(client: Client) -> object:
    return json.loads(config.settings_path(client.db_path).read_text())["palette"]


def _icon_image(window: MainWindow) -> QImage:
    return window.acts["new_run"].icon().pixmap(16, 16).toImage()


def test_dark_then_light_then_system_from_the_menu(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    system = QPalette(QGuiApplication.palette())
    assert not theme.is_dark()
    assert _palette_action(window, "&System").isChecked()
    light_icon = _icon_image(window)

    _palette_action(window, "&Dark").trigger()
    assert theme.is_dark()
    assert _palette_action(window, "&Dark").isChecked()
    assert not _palette_action(window, "&System").isChecked()
    qtbot.waitUntil(lambda: _icon_image(window) != light_icon)  # re-tinted for dark
    qtbot.waitUntil(lambda: _saved_palette(client) == "dark")
    qtbot.waitUntil(lambda: client.settings.palette == "dark")
    assert window.statusBar().currentMessage() == "Palette: Dark (saved)"
    assert Settings.load(client.db_path).palette == "dark"
    dark_icon = _icon_image(window)

    _palette_action(window, "&Light").trigger()
    assert not theme.is_dark()
    assert QApplication.style().name().lower() == "fusion"
    qtbot.waitUntil(lambda: _icon_image(window) != dark_icon)
    qtbot.waitUntil(lambda: _saved_palette(client) == "light")

    _palette_action(window, "&System").trigger()
    assert QGuiApplication.palette() == system  # the platform's colors, every role
    qtbot.waitUntil(lambda: _saved_palette(client) == "system")
    assert window.last_error == ""


def test_a_palette_that_cannot_be_saved_is_said(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    blocker = config.settings_path(client.db_path).with_suffix(".tmp")
    blocker.mkdir()  # where the settings are written first: now it cannot be
    _palette_action(window, "&Dark").trigger()
    assert theme.is_dark()  # applied for this session all the same
    qtbot.waitUntil(lambda: window.last_error != "")
    assert window.last_error.startswith("The palette changed, but it could not be saved (")
    assert window.last_error.endswith("the next start uses System.")
    assert "\n" not in window.last_error and "Errno" not in window.last_error
    assert _saved_palette(client) == "system"
    assert client.settings.palette == "system"
    assert "saved" not in window.statusBar().currentMessage()


def _start_app(monkeypatch: pytest.MonkeyPatch, db_path: Path) -> tuple[bool, list[str]]:
    """Start the app with ``gui.app.main``; whether it came up dark, and the checked choice."""
    from desktop_agent.gui import app as gui_app

    seen: list[tuple[bool, list[str]]] = []

    def exec_once(self: QApplication) -> int:
        window = next(
            w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()
        )
        checked = [
            c for c in ("System", "Light", "Dark") if _palette_action(window, f"&{c}").isChecked()
        ]
        seen.append((theme.is_dark(), checked))
        return 0

    monkeypatch.setattr(QApplication, "exec", exec_once)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # main() installs its own
    assert gui_app.main(db_path, spawn_workers=False) == 0
    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()
    return seen[0]


def test_the_saved_choice_applies_at_start(monkeypatch: pytest.MonkeyPatch, db_path: Path) -> None:
    Settings(default_max_cost_usd=None, default_max_steps=None, palette="dark").save(db_path)
    assert _start_app(monkeypatch, db_path) == (True, ["Dark"])


@pytest.mark.qt_log_ignore("does not support propagateSizeHints")  # offscreen: the report box
def test_a_bad_palette_in_the_file_falls_back_to_system(
    monkeypatch: pytest.MonkeyPatch, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Settings(default_max_cost_usd=None, default_max_steps=None).save(db_path)
    path = config.settings_path(db_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "palette": "purple"}))
    with caplog.at_level(logging.WARNING, logger="desktop_agent.config"):
        assert Settings.load(db_path).palette == "system"
    assert 'palette = "purple": Input should be' in caplog.text
    assert 'using the default, "system"' in caplog.text
    (kept,) = path.parent.glob("settings.json.bad-*")  # the file as it was, kept aside
    assert json.loads(kept.read_text())["palette"] == "purple"
    assert _start_app(monkeypatch, db_path) == (False, ["System"])
