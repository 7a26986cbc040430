"""The toolbars' buttons follow their actions, work when clicked, and keep no memory.

A stock ``QToolButton`` showing an action kept 144 bytes of C heap at every change of
that action (PySide6-Essentials 6.11.3); the window changes its toolbar's actions at
every change of the pending approvals' count, so a window left open grew by megabytes an
hour. The toolbars now carry :class:`ActionButton`, which copies the action's look.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QToolBar, QToolButton
from pytestqt.qtbot import QtBot

from desktop_agent.gui import resources
from desktop_agent.gui.controls import Control
from desktop_agent.gui.mainwindow import MainWindow
from desktop_agent.gui.toolbuttons import ActionButton, button_for


def _button(window: MainWindow, key: str) -> ActionButton:
    bar = window.findChild(QToolBar, "controls")
    assert bar is not None
    button = button_for(bar, window.acts[key])
    assert button is not None, f"a toolbar button for {key}"
    return button


def test_a_toolbar_button_shows_its_action_and_a_click_triggers_it(
    qtbot: QtBot, window: MainWindow
) -> None:
    button = _button(window, "inbox")
    # The window renames the action once it has counted the approvals (it may have done so
    # already): set its text here, and the button follows.
    window.acts["inbox"].setText("Approvals &inbox")
    assert button.text() == "Approvals inbox"  # the icon text: no mnemonic's "&"
    # "&Edit && approve…": a literal "&" is kept (doubled: a button's text has mnemonics)
    assert _button(window, Control.EDIT).text() == "Edit && approve"
    assert "Ctrl+I" in button.toolTip()
    triggered: list[bool] = []
    window.acts["inbox"].triggered.connect(lambda: triggered.append(True))
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert triggered == [True]
    assert window.side.currentWidget() is window.inbox

    window.acts["inbox"].setText("Approvals (3)")
    assert button.text() == "Approvals (3)"

    pause = _button(window, Control.PAUSE)
    assert not pause.isEnabled()  # nothing selected: nothing to pause
    window.acts[Control.PAUSE].setEnabled(True)
    assert pause.isEnabled()
    window.acts[Control.PAUSE].setVisible(False)
    qtbot.waitUntil(lambda: not pause.isVisibleTo(window))
    window.acts[Control.PAUSE].setVisible(True)
    qtbot.waitUntil(lambda: pause.isVisibleTo(window))


def test_a_disabled_button_does_not_trigger(qtbot: QtBot, window: MainWindow) -> None:
    window.acts[Control.CANCEL].setEnabled(False)
    triggered: list[bool] = []
    window.acts[Control.CANCEL].triggered.connect(lambda: triggered.append(True))
    QTest.mouseClick(_button(window, Control.CANCEL), Qt.MouseButton.LeftButton)
    assert triggered == []


def test_a_checkable_action_and_its_button_agree(qtbot: QtBot, window: MainWindow) -> None:
    follow = window.acts["follow"]
    button = window.detail.follow_button
    assert isinstance(button, ActionButton)
    assert follow.isChecked() and button.isChecked()
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert not follow.isChecked() and not button.isChecked()
    follow.setChecked(True)
    assert button.isChecked()


_MALLINFO2_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2_FIELDS.split()]


def _heap_in_use() -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    try:
        mallinfo2 = libc.mallinfo2
    except AttributeError:
        pytest.skip("needs glibc's mallinfo2 to read the C heap")
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().uordblks)


def test_changing_toolbar_actions_keeps_no_memory(qtbot: QtBot, window: MainWindow) -> None:
    inbox = window.acts["inbox"]
    pause = window.acts[Control.PAUSE]
    icons = [resources.badge_icon("inbox", n) for n in range(4)]

    def churn(times: int) -> None:
        for i in range(times):
            inbox.setText(f"Approvals ({i % 4})")
            inbox.setIcon(icons[i % 4])
            pause.setEnabled(bool(i % 2))
        QApplication.processEvents()
        gc.collect()

    churn(500)  # caches warm
    before = _heap_in_use()
    changes = 3 * 10_000
    churn(changes // 3)
    kept = _heap_in_use() - before
    # 144 B per change with the stock buttons (4.3 MB here); allow a little noise.
    assert kept / changes < 16, f"{kept / changes:.1f} B of C heap kept per action change"


def test_every_toolbar_uses_these_buttons(window: MainWindow) -> None:
    bars = window.findChildren(QToolBar)
    assert {"controls", "Batch actions"} <= {bar.objectName() for bar in bars}
    for bar in bars:
        stock = [a.text() for a in bar.actions() if type(bar.widgetForAction(a)) is QToolButton]
        assert stock == [], f"{bar.objectName()} has stock buttons for {stock}"
