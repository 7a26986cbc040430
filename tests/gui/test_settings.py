"""The settings dialog: the API key in the keyring (or the session), and saved settings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import keyring
import pytest
from keyring.backends import fail
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.config import Settings
from desktop_agent.gui.dialogs.settings import key_format_problem
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.secrets import SERVICE, USERNAME, KeyStore
from tests.helpers.fakes import MemoryKeyring

KEY = "sk-ant-api03-" + "A1b2C3d4E5" * 4


@pytest.fixture
def no_session_key() -> Iterator[None]:
    """A key kept "for the session" lives in a module global: forget it after the test."""
    yield
    KeyStore().delete()


def test_save_the_key_in_the_keyring(
    qtbot: QtBot, window: MainWindow, memory_keyring: MemoryKeyring
) -> None:
    window.acts["settings"].trigger()
    dialog = window.settings_dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.key_status.text().startswith("Key: no API key set"))
    assert not dialog.notice.isVisible()  # the in-memory backend counts as a secure store
    QTest.keyClicks(dialog.key, KEY)
    assert dialog.key.echoMode() == dialog.key.EchoMode.Password
    QTest.mouseClick(dialog.test_key, Qt.MouseButton.LeftButton)
    assert "✔" in dialog.key_result.text() and "offline" in dialog.key_result.text()
    assert KEY not in dialog.key_result.text()  # only a masked form is shown
    QTest.mouseClick(dialog.save_key, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.key_result.text() == "Saved in the OS keyring.")
    assert memory_keyring.store[(SERVICE, USERNAME)] == KEY
    qtbot.waitUntil(lambda: "OS keyring" in dialog.key_status.text())
    assert dialog.key.text() == ""  # the field does not keep the secret around


def test_no_secure_store_notice_and_session_key(
    qtbot: QtBot, window: MainWindow, no_session_key: None
) -> None:
    no_store: Any = fail.Keyring  # untyped in keyring
    keyring.set_keyring(no_store())  # restored by the autouse memory_keyring fixture
    window.acts["settings"].trigger()
    dialog = window.settings_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.notice.isVisible)
    assert dialog.notice.objectName() == "no_secure_store_notice"
    assert "No secure store" in dialog.notice.findChildren(type(dialog.key_result))[0].text()
    # The page never says both "no secure store" and "stored in the keyring".
    assert "stored in the OS keyring" not in dialog.key_note.text()
    assert "session only" in dialog.key_note.text()
    QTest.keyClicks(dialog.key, KEY)
    QTest.mouseClick(dialog.save_key, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "session only" in dialog.key_result.text())
    assert KeyStore().status().source == "session"
    assert KeyStore().get() == KEY


def test_settings_are_saved_beside_the_database(
    qtbot: QtBot, window: MainWindow, client: Client
) -> None:
    dialog = window.open_settings()
    assert dialog.data_folder.text() == str(client.db_path.parent)
    dialog.durability.setCurrentIndex(dialog.durability.findData("NORMAL"))
    dialog.close_action.setCurrentIndex(dialog.close_action.findData("quit"))
    dialog.notify_done.setChecked(False)
    dialog.cost.setValue(2.5)
    dialog.time.setText("2h")
    dialog.model.setCurrentIndex(dialog.model.findData("claude-haiku-4-5"))
    assert not dialog.watch_code.isChecked()
    dialog.watch_code.setChecked(True)
    QTest.mouseClick(
        dialog.buttons.button(dialog.buttons.StandardButton.Save), Qt.MouseButton.LeftButton
    )
    qtbot.waitUntil(lambda: not dialog.isVisible())
    saved = json.loads((client.db_path.parent / "settings.json").read_text())
    assert saved["claude_code_watch"] is True  # the workers' watch of Claude Code's sessions
    assert saved["durability"] == "NORMAL"
    assert saved["close_action"] == "quit"
    assert saved["notify_finished"] is False
    assert saved["default_max_cost_usd"] == 2.5
    assert saved["default_max_time_s"] == 7200
    assert saved["default_model"] == "claude-haiku-4-5"
    assert client.settings.default_model == "claude-haiku-4-5"
    assert "sk-ant" not in (client.db_path.parent / "settings.json").read_text()


def test_invalid_settings_are_refused_with_a_message(qtbot: QtBot, window: MainWindow) -> None:
    dialog = window.open_settings()
    dialog.deadline.setText("soon")
    QTest.mouseClick(
        dialog.buttons.button(dialog.buttons.StandardButton.Save), Qt.MouseButton.LeftButton
    )
    assert dialog.isVisible()
    assert "invalid duration" in dialog.error.text()


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        (KEY, True),
        ("", False),
        ("sk-ant-short", False),
        ("sk-proj-" + "x" * 40, False),
        (KEY[:20] + " " + KEY[20:], False),
    ],
)
def test_key_format_check_is_offline_and_explains(key: str, ok: bool) -> None:
    problem = key_format_problem(key)
    assert (problem is None) == ok


@pytest.mark.qt_log_ignore("does not support propagateSizeHints")  # offscreen: a new dialog
def test_a_bad_settings_file_is_reported_at_start_and_fixed_in_two_clicks(
    qtbot: QtBot, client: Client, open_window: Any
) -> None:
    path = client.db_path.parent / "settings.json"
    raw = json.dumps({"default_max_steps": -4, "durability": "NORMAL", "palette": "mauve"})
    path.write_text(raw)
    client.settings = Settings.load(client.db_path)  # as the app reads it when it starts
    window: MainWindow = open_window()
    room = window.settings_room
    qtbot.waitUntil(lambda: room.problems_box is not None and room.problems_box.isVisible())
    box = room.problems_box
    assert box is not None
    shown = box.informativeText()
    assert "default_max_steps = -4" in shown and 'palette = "mauve"' in shown
    assert "settings.json.bad-" in shown  # where the file as it was is kept
    # Click 1: the box's button leads to the Settings dialog.
    (open_button,) = [b for b in box.buttons() if b.text() == "Open Settings…"]
    QTest.mouseClick(open_button, Qt.MouseButton.LeftButton)
    dialog = window.settings_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    assert not box.isVisible()
    # Click 2: Save writes a valid file; the good value read from the bad one is kept.
    QTest.mouseClick(
        dialog.buttons.button(dialog.buttons.StandardButton.Save), Qt.MouseButton.LeftButton
    )
    qtbot.waitUntil(lambda: not dialog.isVisible())
    fixed = Settings.load(client.db_path)
    assert fixed.problems == [] and fixed.durability == "NORMAL"
    assert fixed.default_max_steps == 200  # the default the report named, as the dialog showed
    (kept,) = client.db_path.parent.glob("settings.json.bad-*")
    assert kept.read_text() == raw  # nothing lost
    assert client.settings.problems == []
