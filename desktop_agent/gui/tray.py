"""The tray icon: keeps the app reachable while the window is closed, and notifies."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from desktop_agent.gui import resources
from desktop_agent.gui.notify import Notice, NoticeKind


class TrayController(QObject):
    """A system tray icon when the desktop has a tray; otherwise notices go to the window.

    Args:
        actions: menu actions (show window, new run, quit everything...).
        parent: owner.

    Signals:
        show_requested: the analyst clicked the icon or a notification.
        notice_fallback: there is no tray: show this text in the window instead.
    """

    show_requested = Signal()
    notice_fallback = Signal(str)
    notice_clicked = Signal(object)
    """The analyst clicked the balloon of this :class:`Notice`."""

    def __init__(self, actions: list[QAction | None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.icon: QSystemTrayIcon | None = None
        self.last_notice: Notice | None = None
        self._menu: QMenu | None = None
        self._count = 0
        if QSystemTrayIcon.isSystemTrayAvailable():
            self._menu = QMenu()
            for action in actions:
                if action is None:
                    self._menu.addSeparator()
                else:
                    self._menu.addAction(action)
            self.icon = QSystemTrayIcon(resources.app_icon(), self)
            self.icon.setToolTip("desktop-agent")
            self.icon.setContextMenu(self._menu)
            self.icon.activated.connect(self._on_icon_activated)
            self.icon.messageClicked.connect(self._on_icon_message_clicked)
            self.icon.show()

    @property
    def available(self) -> bool:
        """Whether a tray icon is shown."""
        return self.icon is not None

    def set_tooltip(self, text: str) -> None:
        """Update the icon's tooltip (e.g. how many runs need the analyst)."""
        if self.icon is not None:
            self.icon.setToolTip(text)

    def notify(self, notice: Notice) -> None:
        """Show a notification (in the tray, or in the window when there is none)."""
        self.last_notice = notice
        if self.icon is None:
            self.notice_fallback.emit(f"{notice.title}: {notice.text}")
            return
        icon = {
            NoticeKind.FAILED: QSystemTrayIcon.MessageIcon.Critical,
            NoticeKind.NEEDS_USER: QSystemTrayIcon.MessageIcon.Warning,
            NoticeKind.STALLED: QSystemTrayIcon.MessageIcon.Warning,
        }.get(notice.kind, QSystemTrayIcon.MessageIcon.Information)
        self.icon.showMessage(notice.title, notice.text, icon)  # the platform's own time

    def set_count(self, needing: int) -> None:
        """Show how many runs need the analyst on the icon (and in its tooltip)."""
        if self.icon is None or needing == self._count:
            return
        self._count = needing
        self.icon.setIcon(resources.badge_icon("app", needing))
        self.icon.setToolTip(
            f"desktop-agent: {needing} run(s) need you" if needing else "desktop-agent"
        )

    @Slot()
    def _on_icon_message_clicked(self) -> None:
        if self.last_notice is not None:
            self.notice_clicked.emit(self.last_notice)
        else:
            self.show_requested.emit()

    @Slot(QSystemTrayIcon.ActivationReason)
    def _on_icon_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason in (
            QSystemTrayIcon.ActivationReason.Trigger,
            QSystemTrayIcon.ActivationReason.DoubleClick,
        ):
            self.show_requested.emit()

    def hide(self) -> None:
        """Remove the icon (at quit)."""
        if self.icon is not None:
            self.icon.hide()
