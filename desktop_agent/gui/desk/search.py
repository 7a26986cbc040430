"""The search room: Search all runs, and Find (in the shown run, or the run list's search).

The search window reads off the GUI thread (see
:class:`~desktop_agent.gui.views.search.SearchWindow`); a result opens its run at its step
with the words marked, and a result of an archived run brings the run back first.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QApplication, QMainWindow

from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.views.search import SearchWindow


class SearchRoom(QObject):
    """Search all runs, and the Find action.

    Args:
        window: the main window.
        parent: the main window, as the search window's parent.

    Attributes:
        search_window: the search window, once opened.
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.search_window: SearchWindow | None = None
        window.acts["search_all"].triggered.connect(self._on_search_all_triggered)
        window.acts["find"].triggered.connect(self._on_find_triggered)

    @Slot()
    def _on_search_all_triggered(self) -> None:
        self.open_search()

    def open_search(self) -> SearchWindow:
        """Open (or bring forward) the window that searches every run."""
        w = self.window
        if self.search_window is None or self.search_window.closed:
            window = SearchWindow(w.client, w.tasks, self.parent_window)
            window.open_requested.connect(self._on_search_window_open_requested)
            window.unarchive_requested.connect(w.runs_room.unarchive)
            self.search_window = window
        self.search_window.show()
        self.search_window.raise_()
        self.search_window.query.setFocus()
        return self.search_window

    @Slot(str, int, object)
    def _on_search_window_open_requested(self, run_id: str, seq: int, marks: object) -> None:
        self.window.open_step(run_id, seq, marks)

    @Slot()
    def _on_find_triggered(self) -> None:
        w = self.window
        focus = QApplication.focusWidget()
        detail = w.detail_room.detail
        inside = focus is not None and detail.isAncestorOf(focus)
        if inside and w.runs_room.selected is not None:
            detail.find_field.setFocus()  # inside a run: find in it
            detail.find_field.selectAll()
            return
        run_list = w.runs_room.run_list
        w.side.setCurrentWidget(run_list)
        run_list.search.setFocus()
        run_list.search.selectAll()
