"""The usage room: what all runs spent, by day, model and mode, against the monthly cap.

The usage window reads off the GUI thread (see
:class:`~desktop_agent.gui.views.usage.UsageWindow`); opening it again reads it anew. A
run's own budget is extended from its controls (the controls room), and the monthly cap
from the cap dialog that a run held by it opens.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.views.usage import UsageWindow


class UsageRoom(QObject):
    """The usage window.

    Args:
        window: the main window.
        parent: the main window, as the usage window's parent.

    Attributes:
        usage_window: the usage window, once opened.
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.usage_window: UsageWindow | None = None
        window.acts["usage"].triggered.connect(self._on_usage_triggered)

    @Slot()
    def _on_usage_triggered(self) -> None:
        self.open_usage()

    def open_usage(self) -> UsageWindow:
        """Open (or bring forward, read anew) the window of what all runs spent."""
        if self.usage_window is None or self.usage_window.closed:
            w = self.window
            self.usage_window = UsageWindow(w.client, w.tasks, self.parent_window)
        else:
            self.usage_window.reload()
        self.usage_window.show()
        self.usage_window.raise_()
        return self.usage_window
