"""A test that leaves a Qt window open fails; one whose windows pytest-qt closes passes."""

from __future__ import annotations

from tests.hygiene.conftest import RunInner

LEAKS = """
from PySide6.QtWidgets import QWidget

KEPT = []  # held past the test: the check, not the garbage collector, must find it


class Panel(QWidget):
    pass


def test_leaves_a_window_open(qapp):
    window = QWidget()
    window.setWindowTitle("Left open")
    window.show()
    KEPT.append(window)


def test_leaves_a_hidden_window_of_ours(qapp):
    panel = Panel()
    panel.setWindowTitle("Never deleted")
    KEPT.append(panel)
"""

CLEAN = """
from PySide6.QtWidgets import QDialog, QWidget


def test_window_given_to_qtbot(qtbot):
    window = QWidget()
    window.setWindowTitle("Closed by pytest-qt")
    qtbot.addWidget(window)  # closed by pytest-qt's teardown, before the check looks
    window.show()
    qtbot.waitExposed(window)


def test_window_closed_and_dropped(qapp):
    dialog = QDialog()
    dialog.show()
    dialog.close()  # hidden; deleted with its last reference, at the end of the test
"""


def test_a_window_left_open_fails_the_test_and_is_named(run_inner: RunInner) -> None:
    result = run_inner(LEAKS)
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaves_a_window_open*",
            "*the test left Qt windows open:*",
            "*window PySide6.QtWidgets.QWidget titled 'Left open' (visible)*",
            "*ERROR at teardown of test_leaves_a_hidden_window_of_ours*",
            "*window test_inner.Panel titled 'Never deleted' (hidden, never deleted)*",
        ]
    )


def test_windows_closed_are_not_leaks(run_inner: RunInner) -> None:
    run_inner(CLEAN).assert_outcomes(passed=2)
