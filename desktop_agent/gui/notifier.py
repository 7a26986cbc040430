"""Notices reach the analyst: the tray, else desktop notifications over D-Bus, else the window.

A run that needs the analyst, finishes, fails or stalls is worth a notice (see
:mod:`desktop_agent.gui.notify` for which). Where it goes depends on the desktop:

1. **The tray**, when the desktop has one (:class:`~desktop_agent.gui.tray.TrayController`).
2. **Desktop notifications** (``org.freedesktop.Notifications`` on the session bus, through
   QtDBus) when there is no tray but a notification service: GNOME without extensions,
   most Wayland desktops. The notice carries the actions *Open* and, when it is about
   exactly one pending approval, *Review*; clicking one brings the run (or the approval)
   up in the app. A newer notice of the same run replaces the older one rather than
   stacking. Urgency is critical for failures, normal otherwise; actions are offered only
   when the service says it supports them (``GetCapabilities``).
3. **The window**: ``QApplication.alert`` (the taskbar entry asks for attention) and the
   status bar line, when neither exists or the service fails. A failing service is logged
   once, not for every notice, and the next notices go to the window.

The channel in use is chosen when the app starts and logged; :attr:`Notifier.channel` says
which (the Settings dialog shows it).
"""

from __future__ import annotations

import logging
import queue
from enum import StrEnum
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QApplication, QWidget

from desktop_agent.gui.notify import Notice, NoticeKind
from desktop_agent.gui.tray import TrayController

log = logging.getLogger(__name__)

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = "org.freedesktop.Notifications"
APP_NAME = "desktop-agent"
APP_ICON = "desktop-agent"
DESKTOP_ENTRY = "desktop-agent"
"""The desktop entry's name (``desktop-agent.desktop``): lets the desktop show our icon."""

TIMEOUT_MS = -1
"""How long a desktop notification stays: the service's own default (-1), never longer."""

CALL_TIMEOUT_S = 2.0
"""How long a call to the notification service may take before it counts as failed."""


class Channel(StrEnum):
    """Where notices go."""

    TRAY = "the tray"
    DESKTOP = "desktop notifications"
    WINDOW = "the window"


class _ToQt(queue.Queue[Any]):
    """A queue that hands each D-Bus signal to a Qt signal (queued to the GUI thread)."""

    def __init__(self, emit: Any) -> None:
        super().__init__()
        self._emit = emit

    def put_nowait(self, item: Any) -> None:
        """Called on jeepney's receiver thread: forward, never store."""
        self._emit(item)


class DesktopNotifications(QObject):
    """The desktop's notification service on a D-Bus session bus.

    The D-Bus messages are sent with jeepney (pure Python, already installed with keyring
    on Linux) rather than QtDBus: PySide6's QtDBus sends every Python integer as a signed
    ``i`` and has no way to send the ``u`` (``replaces_id``) and ``y`` (urgency) the
    specification asks for, and daemons refuse a ``Notify`` of the wrong signature. Its
    router's receiver thread hands the service's signals (``ActionInvoked``,
    ``NotificationClosed``) to the GUI thread through a queued Qt signal.

    Args:
        address: the bus (None: the session bus of ``DBUS_SESSION_BUS_ADDRESS``).
        parent: owner.

    Signals:
        action_invoked: ``(run_id, action)`` when the analyst clicks a notice's action
            (``open``, ``review``; clicking the notice itself is ``open``).
    """

    action_invoked = Signal(str, str)
    _received = Signal(object)

    def __init__(self, address: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.address = address
        self.capabilities: list[str] = []
        self._runs: dict[int, str] = {}
        """Notification id → run, for the actions clicked later."""
        self._ids: dict[str, int] = {}
        self.notices: dict[str, Notice] = {}
        """The notice shown under each key (:attr:`Notice.key`), for a click on it."""
        """Run → its newest notification, which the next one replaces."""
        self._conn: Any = None
        self._router: Any = None
        self._filter: Any = None
        self._received.connect(self._on_received)

    def available(self) -> bool:
        """Connect and ask the service for its capabilities; whether it answered."""
        try:
            from jeepney import DBusAddress, MatchRule, new_method_call
            from jeepney.bus_messages import message_bus
            from jeepney.io.threading import DBusRouter, open_dbus_connection
        except ImportError:
            return False
        try:
            self._conn = open_dbus_connection(bus=self.address or "SESSION")
            self._router = DBusRouter(self._conn)
            owned = self._router.send_and_get_reply(
                message_bus.NameHasOwner(SERVICE), timeout=CALL_TIMEOUT_S
            )
            if not owned.body or not owned.body[0]:
                self.close()
                return False
            rule = MatchRule(type="signal", interface=INTERFACE, path=PATH)
            self._router.send_and_get_reply(message_bus.AddMatch(rule), timeout=CALL_TIMEOUT_S)
            self._filter = self._router.filter(rule, queue=_ToQt(self._received.emit))
            reply = self._router.send_and_get_reply(
                new_method_call(self._service(DBusAddress), "GetCapabilities"),
                timeout=CALL_TIMEOUT_S,
            )
        except Exception as exc:  # no bus, a bus that went away, a service that hangs
            log.info("no desktop notifications: %s", exc)
            self.close()
            return False
        self.capabilities = [str(c) for c in reply.body[0]] if reply.body else []
        return True

    @staticmethod
    def _service(address_type: Any) -> Any:
        return address_type(PATH, bus_name=SERVICE, interface=INTERFACE)

    def close(self) -> None:
        """Stop listening and close the connection (at quit)."""
        if self._filter is not None:
            self._filter.close()
            self._filter = None
        if self._router is not None:
            self._router.close()
            self._router = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def notify(self, notice: Notice, review: bool) -> bool:
        """Show ``notice`` (replacing the run's previous one); whether the service took it."""
        if self._router is None:
            return False
        from jeepney import DBusAddress, MessageType, new_method_call

        actions = ["default", "Open", "open", "Open"] + (["review", "Review"] if review else [])
        if "actions" not in self.capabilities:
            actions = []
        urgency = 2 if notice.kind == NoticeKind.FAILED else 1
        hints = {"urgency": ("y", urgency), "desktop-entry": ("s", DESKTOP_ENTRY)}
        body = (
            APP_NAME,
            self._ids.get(notice.key, 0),
            APP_ICON,
            notice.title,
            notice.text,
            actions,
            hints,
            TIMEOUT_MS,
        )
        message = new_method_call(self._service(DBusAddress), "Notify", "susssasa{sv}i", body)
        try:
            reply = self._router.send_and_get_reply(message, timeout=CALL_TIMEOUT_S)
        except Exception as exc:
            log.warning("desktop notifications: Notify failed: %s", exc)
            return False
        if reply.header.message_type != MessageType.method_return or not reply.body:
            log.warning("desktop notifications: Notify refused: %s", reply.body)
            return False
        nid = int(reply.body[0])
        old = self._ids.get(notice.key)
        if old is not None and old != nid:
            self._runs.pop(old, None)
        self._ids[notice.key] = nid
        self._runs[nid] = notice.key
        self.notices[notice.key] = notice
        return True

    @Slot(object)
    def _on_received(self, message: Any) -> None:
        from jeepney import HeaderFields

        member = message.header.fields.get(HeaderFields.member)
        if member == "ActionInvoked" and len(message.body) == 2:
            run_id = self._runs.get(int(message.body[0]))
            if run_id is not None:
                action = str(message.body[1])
                self.action_invoked.emit(run_id, "open" if action == "default" else action)
        elif member == "NotificationClosed" and message.body:
            nid = int(message.body[0])
            run_id = self._runs.pop(nid, None)
            if run_id is not None and self._ids.get(run_id) == nid:
                del self._ids[run_id]
                self.notices.pop(run_id, None)


class Notifier(QObject):
    """Sends notices down the chain: tray, desktop notifications, window (see the module).

    Args:
        tray: the tray icon's controller (its ``available`` says whether there is a tray).
        window: the window to alert and whose status bar shows the last resort.
        bus: the D-Bus address (None: the session bus; tests pass a private one).
        parent: owner.

    Signals:
        open_requested: ``run_id``: the analyst clicked a notice (or its *Open*).
        review_requested: ``run_id``: the analyst clicked *Review*.
        window_notice: the text to show in the window's status bar.
    """

    open_requested = Signal(str)
    review_requested = Signal(str)
    window_notice = Signal(str)
    open_many_requested = Signal(object)
    """A tuple of run ids: the analyst clicked a notice about several runs."""

    def __init__(
        self,
        tray: TrayController,
        window: QWidget,
        bus: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.tray = tray
        self.window = window
        self.desktop: DesktopNotifications | None = None
        self.last: Notice | None = None
        """The newest notice sent, wherever it went."""
        tray.notice_clicked.connect(self._on_tray_notice_clicked)
        if tray.available:
            self.channel = Channel.TRAY
        else:
            desktop = DesktopNotifications(bus, self)
            if desktop.available():
                self.desktop = desktop
                desktop.action_invoked.connect(self._on_desktop_action_invoked)
                self.channel = Channel.DESKTOP
            else:
                self.channel = Channel.WINDOW
        log.info("notifications go to %s", self.channel.value)

    def notify(self, notice: Notice, *, single_approval: bool = False) -> Channel:
        """Send ``notice`` down the chain; returns where it went.

        ``single_approval``: the notice is about exactly one pending approval (it gets
        *Review*).
        """
        self.last = notice
        if self.channel == Channel.TRAY:
            self.tray.notify(notice)
            return Channel.TRAY
        if self.desktop is not None:
            if self.desktop.notify(notice, single_approval):
                return Channel.DESKTOP
            log.warning("desktop notifications failed: notices go to the window from now on")
            self.desktop.close()
            self.desktop = None
            self.channel = Channel.WINDOW
        QApplication.alert(self.window)
        self.window_notice.emit(f"{notice.title}: {notice.text}")
        return Channel.WINDOW

    @Slot(str, str)
    def _on_desktop_action_invoked(self, key: str, action: str) -> None:
        notice = self.desktop.notices.get(key) if self.desktop is not None else None
        if notice is not None and len(notice.runs) > 1:
            self.open_many_requested.emit(notice.runs)
        elif action == "review":
            self.review_requested.emit(key)
        else:
            self.open_requested.emit(key)

    @Slot(object)
    def _on_tray_notice_clicked(self, notice: Notice) -> None:
        if len(notice.runs) > 1:
            self.open_many_requested.emit(notice.runs)
        else:
            self.open_requested.emit(notice.run_id)

    def close(self) -> None:
        """Let go of the notification service (at quit)."""
        if self.desktop is not None:
            self.desktop.close()
