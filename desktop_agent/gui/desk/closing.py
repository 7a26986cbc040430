"""The closing room: close to the tray, ask before closing on runs, quit everything.

Closing the window never stops a run: with a tray icon (and the setting that says so) the
window hides and the app lives on; without one, runs going on are never left quietly (the
analyst keeps them running in the background, or quits everything). *Quit everything*
stops the worker this app started, by PID, and quits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QMainWindow

from desktop_agent.client.views import RunRow
from desktop_agent.domain import RunStatus
from desktop_agent.gui import notify
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.prompts import MessageDialog

log = logging.getLogger(__name__)


class ClosingRoom(QObject):
    """What closing the window and quitting do.

    Args:
        window: the main window.
        parent: the main window, as the questions' parent.
    """

    def __init__(self, window: Desk, parent: QMainWindow) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.quitting = False
        """Quit everything was chosen: the window closes for good."""
        self.leave_confirmed = False
        """The analyst chose to leave the runs going on in the background."""
        window.acts["close"].triggered.connect(self._on_close_triggered)
        window.acts["quit"].triggered.connect(self._on_quit_triggered)

    @Slot()
    def _on_close_triggered(self) -> None:
        self.window.close()

    def closes(self, event: QCloseEvent) -> bool:
        """Whether the window closes for good (else ``event`` is ignored and this said why).

        Hides to the tray (runs go on), or asks first when runs go on without a tray.
        """
        w = self.window
        tray = w.alerts_room.tray
        to_tray = w.client.settings.close_action == "tray" and tray.available
        if not self.quitting and to_tray:
            event.ignore()
            w.layout_memory.save()
            w.hide()
            tray.notify(
                notify.Notice(
                    notify.NoticeKind.FINISHED,
                    "",
                    "desktop-agent keeps running",
                    "Runs go on. Use the tray icon to come back, or to quit everything.",
                )
            )
            return False
        going_on = self._runs_going_on()
        if going_on and not (self.quitting or w.is_shut_down or self.leave_confirmed):
            event.ignore()  # never quietly: with no tray, nothing would show they go on
            self._ask_before_closing(going_on)
            return False
        return True

    def _runs_going_on(self) -> int:
        """Runs that go on or wait for the analyst (paused and stopped ones do not count)."""
        idle = (RunStatus.PAUSED, RunStatus.STOPPED)
        rows = self.window.runs_room.runs_model.rows()
        return sum(1 for r in rows if r.run.status.is_active and r.run.status not in idle)

    def _ask_before_closing(self, going_on: int) -> None:
        """Keep the runs going in the background, quit everything, or stay open."""
        runs = "1 run is" if going_on == 1 else f"{going_on} runs are"
        box = MessageDialog(
            "Close desktop-agent?",
            f"{runs} running or waiting, and there is no tray icon to show them.\n\n"
            "Keep running in the background: the worker goes on with them; launch "
            "desktop-agent again to come back.\n"
            "Quit everything: the worker stops too; unfinished runs continue when a worker "
            "runs again.",
            "quit",
            confirm="Keep running in the background",
            parent=self.parent_window,
        )
        quit_all = box.buttons.addButton(
            "Quit everything", QDialogButtonBox.ButtonRole.DestructiveRole
        )
        quit_all.clicked.connect(box.reject)
        quit_all.clicked.connect(self.quit_everything)
        box.confirmed.connect(self._close_leaving_runs)
        self.window.commands.dialog = box
        box.open()

    @Slot()
    def _close_leaving_runs(self) -> None:
        self.leave_confirmed = True
        self.window.close()

    @Slot()
    def _on_quit_triggered(self) -> None:
        supervisor = self.window.worker_room.supervisor
        if not supervisor.started:
            self.quit_everything()
            return
        running = runs_that_stop(self.window.runs_room.runs_model.rows())
        more = (
            f"\n\n{running} running run(s) stop at their next step boundary and continue "
            "when a worker runs again."
            if running
            else ""
        )
        box = MessageDialog(
            "Quit everything?",
            "Quit the app and stop the worker it started?" + more,
            "quit",
            confirm="Quit and stop the worker",
            parent=self.parent_window,
        )
        box.confirmed.connect(self.quit_everything)
        self.window.commands.dialog = box
        box.open()

    @Slot()
    def quit_everything(self) -> None:
        """Stop the worker this app started (by PID) and quit."""
        stopped = self.window.worker_room.supervisor.stop_started_workers()
        if stopped:
            log.info("asked worker(s) %s to stop", stopped)
        self.quitting = True
        self.window.close()
        app = QApplication.instance()
        if app is not None:
            app.quit()


def runs_that_stop(rows: Iterable[RunRow]) -> int:
    """Runs a stopped worker interrupts: the running ones.

    Waiting, paused and queued runs are not being worked on: nothing of theirs stops.
    """
    return sum(1 for r in rows if r.run.status == RunStatus.RUNNING)
