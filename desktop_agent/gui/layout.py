"""Where the main window opens and how its panes are shared, remembered between sessions.

The run list is the analyst's home: it sits on the left at the window's full height (at
1280×800 it shows some twenty runs) with the selected run's detail beside it. The first
time, the window opens inside the screen's available geometry (never under a taskbar)
at most 1600×1000; after that, where the analyst left it, as long as that is still on
a screen. The splitters, the run list's columns (widths, order, the ones hidden) and its
order are kept in ``layout.ini`` beside the database, written when the window closes.
Until the analyst sorts by a column, the runs that need them come first, newest first
within each group (:meth:`~desktop_agent.gui.models.runs.RunFilterProxy.set_needs_first`).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QGuiApplication, QScreen
from PySide6.QtWidgets import QMainWindow, QSplitter

from desktop_agent.gui.widgets.runlist import RunListPanel

FILE_NAME = "layout.ini"
LARGEST = (1600, 1000)
"""The first window's size at most (a larger screen gets it centred)."""

MARGIN = 0.04
"""What the first window leaves free of the available geometry, on each side."""

LIST_SHARE = 0.4
"""The run list's share of the window's width the first time."""

_VERSION = 1
"""Bumped when a saved layout no longer fits the panes (then it is ignored)."""


def first_geometry(available: QRect) -> QRect:
    """The window's first geometry on a screen whose free area is ``available``."""
    width = min(LARGEST[0], int(available.width() * (1 - 2 * MARGIN)))
    height = min(LARGEST[1], int(available.height() * (1 - 2 * MARGIN)))
    rect = QRect(0, 0, width, height)
    rect.moveCenter(available.center())
    return rect


def on_a_screen(rect: QRect, screens: list[QScreen]) -> bool:
    """Whether most of ``rect``'s title bar area is on one of ``screens``' free areas."""
    top = QRect(rect.left(), rect.top(), rect.width(), 40)
    for screen in screens:
        seen = top.intersected(screen.availableGeometry())
        if seen.width() >= min(200, rect.width()) and seen.height() >= 20:
            return True
    return False


class WindowLayout(QObject):
    """Restores and saves the main window's geometry, splitters and run list columns.

    Args:
        window: the main window.
        path: the layout file (:data:`FILE_NAME` in the data folder).
        splitters: the window's splitters, by a stable name.
        runs: the run list (its columns, and its sorting proxy for the needs-you-first
            order).
    """

    def __init__(
        self,
        window: QMainWindow,
        path: Path,
        splitters: dict[str, QSplitter],
        runs: RunListPanel,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.path = path
        self.splitters = splitters
        self.runs = runs
        self.header = header = runs.table.horizontalHeader()
        self.proxy = runs.proxy
        self.restored = False
        """Whether a saved layout was applied (False: the first-time defaults)."""
        self._restoring = False
        self._share_pending = False
        header.sortIndicatorChanged.connect(self._on_header_sort_indicator_changed)
        runs.default_order_requested.connect(self._on_default_order_requested)

    def _settings(self) -> QSettings:
        return QSettings(str(self.path), QSettings.Format.IniFormat)

    def restore(self) -> None:
        """Apply the saved layout, or the first-time one; the window fits a screen."""
        self._restoring = True
        try:
            self.restored = self._restore_saved()
            if not self.restored:
                self._first_time()
        finally:
            self._restoring = False

    def _restore_saved(self) -> bool:
        s = self._settings()
        if s.value("version") != str(_VERSION):
            return False
        geometry = s.value("window/geometry")
        if not isinstance(geometry, QByteArray) or not self.window.restoreGeometry(geometry):
            return False
        if not on_a_screen(self.window.frameGeometry(), QGuiApplication.screens()):
            self._place()
        for name, splitter in self.splitters.items():
            state = s.value(f"splitters/{name}")
            if isinstance(state, QByteArray):
                splitter.restoreState(state)
        columns = s.value("runs/columns")
        if isinstance(columns, QByteArray):
            self.header.restoreState(columns)
        self.runs.auto_columns = s.value("runs/auto_columns", "true") == "true"
        self.runs.fit_columns()
        self._set_needs_first(s.value("runs/needs_first", "true") == "true")
        return True

    def _first_time(self) -> None:
        self._place()
        self._share_pending = True  # a splitter not shown yet ignores sizes: at the show
        self.window.installEventFilter(self)
        self._set_needs_first(True)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """At the window's first show, the first time: the run list's share of its width."""
        if watched is self.window and event.type() == QEvent.Type.Show and self._share_pending:
            self._share_pending = False
            self.window.removeEventFilter(self)
            QTimer.singleShot(0, self._share)  # once the window's layout gave it its width
        return super().eventFilter(watched, event)

    @Slot()
    def _share(self) -> None:
        main = self.splitters.get("main")
        if main is not None:
            width = sum(main.sizes())
            main.setSizes([int(width * LIST_SHARE), width - int(width * LIST_SHARE)])

    def _place(self) -> None:
        screen = self.window.screen()
        self.window.setGeometry(first_geometry(screen.availableGeometry()))

    def save(self) -> None:
        """Write the layout (at close); a file that cannot be written keeps the old one."""
        s = self._settings()
        s.setValue("version", str(_VERSION))
        s.setValue("window/geometry", self.window.saveGeometry())
        for name, splitter in self.splitters.items():
            s.setValue(f"splitters/{name}", splitter.saveState())
        s.setValue("runs/columns", self.header.saveState())
        s.setValue("runs/needs_first", "true" if self.proxy.needs_first else "false")
        s.setValue("runs/auto_columns", "true" if self.runs.auto_columns else "false")
        s.sync()

    def use_default_order(self) -> None:
        """Back to the runs that need the analyst first, newest first in each group."""
        self._set_needs_first(True)

    def _set_needs_first(self, on: bool) -> None:
        self.proxy.set_needs_first(on)
        self.header.setSortIndicatorShown(not on)
        if on:
            self._restoring, was = True, self._restoring
            try:
                self.proxy.sort(self.proxy.default_sort_column, Qt.SortOrder.DescendingOrder)
            finally:
                self._restoring = was

    @Slot()
    def _on_default_order_requested(self) -> None:
        self.use_default_order()

    @Slot(int, Qt.SortOrder)
    def _on_header_sort_indicator_changed(self, _column: int, _order: Qt.SortOrder) -> None:
        if not self._restoring and self.proxy.needs_first:
            self._set_needs_first(False)  # the analyst chose an order: theirs from now on
