"""The main window walked with the keyboard alone: only key events after the first focus.

Tab leaves the run list without changing the selected run; F6 jumps between the panes;
arrows move in the lists; Return opens a run's steps, an approval and a search result;
Escape closes dialogs and windows; F1 lists every action of the menus with its keys.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from desktop_agent.client.api import Client
from desktop_agent.domain import RunStatus
from desktop_agent.gui.actions import MENUS, SPECS, SUBMENUS
from desktop_agent.gui.keyboard import EXTRA, ShortcutsDialog, plain
from desktop_agent.gui.mainwindow import MainWindow
from tests.gui.conftest import StartWorker, wait_status

Key = Qt.Key
NO = Qt.KeyboardModifier.NoModifier
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier
OFFSCREEN_NO_RAISE = pytest.mark.qt_log_ignore("This plugin does not support raise")


def _focus() -> QWidget:
    widget = QApplication.focusWidget()
    assert widget is not None, "nothing has the keyboard"
    return widget


def _press(key: Key, modifiers: Qt.KeyboardModifier = NO) -> None:
    """One key, to whatever has the keyboard (as a user's key goes)."""
    QTest.keyClick(_focus(), key, modifiers)


def _in(pane: QWidget) -> bool:
    focus = QApplication.focusWidget()
    return focus is not None and (focus is pane or pane.isAncestorOf(focus))


def _selected(window: MainWindow) -> str | None:
    return window.selected.run.id if window.selected is not None else None


def _three_waiting_runs(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, client: Client, ws: Path
) -> list[str]:
    start_worker()
    ids = [client.start_run(f"Survey {n}", workspace=str(ws)).id for n in range(3)]
    for run_id in ids:
        wait_status(qtbot, window, run_id, RunStatus.WAITING)
    window.activateWindow()
    window.run_list.table.setFocus()  # the one focus not given by a key: the start
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.run_list.table)
    return ids


def test_tab_panes_arrows_and_return_never_change_the_run_behind_the_analyst(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, client: Client, demo_ws: Path
) -> None:
    _three_waiting_runs(qtbot, window, start_worker, client, demo_ws)
    table = window.run_list.table
    _press(Key.Key_Down)
    first = _selected(window)
    assert first is not None
    _press(Key.Key_Down)
    second = _selected(window)
    assert second is not None and second != first  # arrows move in the list

    # Tab walks away from the list: the run stays the one chosen, whatever has the keys.
    _press(Key.Key_Tab)
    assert not _in(table)
    for _ in range(15):
        _press(Key.Key_Tab)
        assert _selected(window) == second
    for _ in range(15):
        _press(Key.Key_Backtab, SHIFT)
        assert _selected(window) == second

    # F6 goes pane to pane: list, steps, details, and round again; Shift+F6 back.
    timeline, inspector = window.detail.timeline, window.detail.inspector
    for _ in range(3):
        if _in(table):
            break
        _press(Key.Key_F6)
    assert _in(table)
    _press(Key.Key_F6)
    assert _in(timeline)
    _press(Key.Key_F6)
    assert _in(inspector)
    _press(Key.Key_F6)
    assert _in(table)
    _press(Key.Key_F6, SHIFT)
    assert _in(inspector)
    _press(Key.Key_F6, SHIFT)
    _press(Key.Key_F6, SHIFT)
    assert _in(table)
    assert _selected(window) == second

    # Return on a run opens its steps: the keyboard lands on its newest step.
    qtbot.waitUntil(lambda: window.steps_model.rowCount() > 2)
    _press(Key.Key_Return)
    assert _in(timeline)
    newest = window.steps_model.rowCount() - 1
    assert timeline.currentIndex().row() == newest
    _press(Key.Key_Up)
    assert timeline.currentIndex().row() == newest - 1
    seq = window.steps_model.entry(newest - 1).seq
    details = window.detail.inspector.details.toPlainText()
    assert f"{second}:{seq}" in details  # the step shown is the one the arrow reached
    assert _selected(window) == second


@OFFSCREEN_NO_RAISE
def test_return_opens_an_approval_and_escape_closes_what_opened(
    qtbot: QtBot, window: MainWindow, start_worker: StartWorker, client: Client, demo_ws: Path
) -> None:
    ids = _three_waiting_runs(qtbot, window, start_worker, client, demo_ws)
    qtbot.waitUntil(lambda: window.approvals_model.rowCount() == 3)

    # Ctrl+I: the inbox, the keyboard on its oldest call; Return reviews it.
    _press(Key.Key_I, CTRL)
    assert window.side.currentWidget() is window.inbox
    assert _in(window.inbox.table)
    oldest = window.inbox.current()
    assert oldest is not None
    _press(Key.Key_Down)
    chosen = window.inbox.current()
    assert chosen is not None and chosen != oldest
    _press(Key.Key_Return)
    qtbot.waitUntil(lambda: window.approval_dialog is not None)
    dialog = window.approval_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    assert dialog.approval.run_id == chosen.run_id
    dialog.activateWindow()
    qtbot.waitUntil(lambda: _in(dialog))
    _press(Key.Key_Escape)
    qtbot.waitUntil(lambda: not dialog.isVisible())
    assert client.run(chosen.run_id).status == RunStatus.WAITING  # nothing was decided

    # Ctrl+K: search; Return searches, Down reaches the results, Return opens one.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    _press(Key.Key_K, CTRL)
    search = window.search_window
    assert search is not None
    qtbot.waitUntil(search.isVisible)
    search.activateWindow()
    qtbot.waitUntil(lambda: _in(search.query))
    QTest.keyClicks(_focus(), "Survey")
    _press(Key.Key_Return)
    qtbot.waitUntil(lambda: len({h.run_id for h in search.hits}) >= 3)
    _press(Key.Key_Down)
    assert _in(search.table)
    first = search.current_hit()
    _press(Key.Key_Down)  # arrows walk the results, across the runs' groups
    hit = search.current_hit()
    assert first is not None and hit is not None and hit != first
    wanted = hit.run_id
    assert wanted in ids
    _press(Key.Key_Return)
    qtbot.waitUntil(lambda: _selected(window) == wanted)
    if search.isVisible():
        search.activateWindow()
        qtbot.waitUntil(lambda: _in(search))
        _press(Key.Key_Escape)
        qtbot.waitUntil(lambda: not search.isVisible())

    # Ctrl+U: usage; Escape closes it.
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    _press(Key.Key_U, CTRL)
    usage = window.usage_window
    assert usage is not None
    qtbot.waitUntil(usage.isVisible)
    usage.activateWindow()
    qtbot.waitUntil(lambda: _in(usage))
    _press(Key.Key_Escape)
    qtbot.waitUntil(lambda: not usage.isVisible())


@pytest.mark.qt_log_ignore(  # offscreen: no stacking, and a new dialog
    "This plugin does not support raise", "does not support propagateSizeHints"
)
def test_f1_lists_every_menu_action_with_keys(qtbot: QtBot, window: MainWindow) -> None:
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    window.run_list.search.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.run_list.search)
    _press(Key.Key_F1)
    dialog = window.keyboard.dialog
    assert isinstance(dialog, ShortcutsDialog)
    qtbot.waitUntil(dialog.isVisible)
    shown = dict(dialog.rows())
    expected: list[str] = []
    for _title, keys in (*MENUS, *EXTRA):
        for key in keys:
            if key is None:
                continue
            if key in SUBMENUS:
                sub_title, sub_keys = SUBMENUS[key]
                expected += [f"{plain(sub_title)} ▸ {plain(SPECS[k].text)}" for k in sub_keys]
            else:
                expected.append(plain(SPECS[key].text))
    missing = [name for name in expected if not shown.get(name)]
    assert not missing, f"menu actions without keys: {missing}"
    assert shown["Keyboard shortcuts"] == "F1"
    assert shown["Palette ▸ Dark"] == "Alt+V, P, D"  # reached through the menus' letters
    assert "Escape" in shown and "F6, Shift+F6" in shown
    dialog.activateWindow()
    qtbot.waitUntil(lambda: _in(dialog))
    _press(Key.Key_Escape)
    qtbot.waitUntil(lambda: not dialog.isVisible())
