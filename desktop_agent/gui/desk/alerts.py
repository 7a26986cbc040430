"""The alerts room: the tray icon, desktop notifications, and which changes are told.

The tray offers Show, New run, Approvals and Quit, and counts the runs that need the
analyst; notices go to the desktop's notifications, else the tray's balloons, else the
status bar (:class:`~desktop_agent.gui.notifier.Notifier`). Which status changes are told,
how often, and where a click leads is :class:`~desktop_agent.gui.notices.NoticeDesk`'s.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QMainWindow

from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.notices import NoticeDesk
from desktop_agent.gui.notifier import Notifier
from desktop_agent.gui.tray import TrayController


class AlertsRoom(QObject):
    """The tray, the notifier and the notices.

    Args:
        window: the main window (built: its tabs, run list and inbox exist).
        parent: the main window.
        notify_bus: the D-Bus address desktop notifications use (None: the session's).

    Attributes:
        tray: the tray icon.
        notifier: where notices go.
        notices: what is told, and where a click on a notice leads.
    """

    def __init__(self, window: Desk, parent: QMainWindow, notify_bus: str | None) -> None:
        super().__init__(parent)
        self.window = window
        a = window.acts
        self.tray = TrayController([a["show"], a["new_run"], a["inbox"], None, a["quit"]], parent)
        self.tray.show_requested.connect(self._on_tray_show_requested)
        self.tray.notice_fallback.connect(self._on_notice_fallback)
        self.notifier = Notifier(self.tray, parent, notify_bus, parent)
        self.notifier.window_notice.connect(self._on_notice_fallback)
        runs, approvals = window.runs_room, window.approvals_room
        client = window.client
        self.notices = NoticeDesk(
            parent,
            lambda: client.settings,
            self.notifier,
            self.tray,
            runs.runs_model,
            window.side,
            runs.run_list,
            approvals.inbox,
            approvals.visible,
            window.bring_up,
            window.select_run,
            window.open_approval,
            approvals.dialog_open,
        )

    @Slot()
    def _on_tray_show_requested(self) -> None:
        self.window.bring_up()

    @Slot(str)
    def _on_notice_fallback(self, text: str) -> None:
        self.window.statusBar().showMessage(text, 10_000)
