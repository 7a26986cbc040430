"""The worker room: the worker's status, recovery after a crash, and the crash report.

At start the recovery report is read off the GUI thread before a worker is started (it
must see the dead worker's leases before a new worker takes them); a report that is not
empty opens the recovery summary. The supervisor then watches the worker: its status shows
in the status bar, and a worker that died while the window was open is told, with what
that did to the runs. A previous session that ended abnormally offers its crash log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtWidgets import QLabel, QMainWindow

from desktop_agent.client.api import WorkerStatus
from desktop_agent.client.checks import RecoveryReport, recovery_report
from desktop_agent.client.views import RunRow
from desktop_agent.crashlog import PreviousCrash
from desktop_agent.gui import notify, resources
from desktop_agent.gui.desk.host import Desk
from desktop_agent.gui.dialogs.crash import CrashReportDialog
from desktop_agent.gui.dialogs.recovery import RecoveryDialog
from desktop_agent.gui.supervisor import WorkerSupervisor

log = logging.getLogger(__name__)


class WorkerRoom(QObject):
    """The worker's supervision and what the window says about it.

    Args:
        window: the main window.
        parent: the main window (the dialogs' parent, its status bar shows the worker).
        spawn_workers: whether this app starts (and restarts) a detached worker.

    Attributes:
        supervisor: watches the worker's heartbeat.
        worker_label: the worker's status, in the status bar.
        worker_icon: online or offline, in the status bar.
        worker_status: the status as last read (None: not yet).
        recovery: the recovery report read last (at start, or when a worker died).
        recovery_dialog: the recovery summary opened last.
        crash_dialog: the previous session's crash report, while open.
    """

    def __init__(self, window: Desk, parent: QMainWindow, *, spawn_workers: bool) -> None:
        super().__init__(parent)
        self.window = window
        self.parent_window = parent
        self.supervisor = WorkerSupervisor(
            window.client, window.tasks, spawn=spawn_workers, parent=parent
        )
        self.worker_status: WorkerStatus | None = None
        self.recovery: RecoveryReport | None = None
        self.recovery_dialog: RecoveryDialog | None = None
        self.crash_dialog: CrashReportDialog | None = None
        self.worker_label = QLabel(parent)
        self.worker_icon = QLabel(parent)
        parent.statusBar().addPermanentWidget(self.worker_icon)
        parent.statusBar().addPermanentWidget(self.worker_label)
        self.show_worker(None)

    def status_widgets(self) -> tuple[QLabel, QLabel]:
        """The status bar's widgets: the worker's status, and its icon."""
        return self.worker_label, self.worker_icon

    def connect_supervisor(self) -> None:
        """Listen to the supervisor and the poller (once the window has both)."""
        s = self.supervisor
        s.status_changed.connect(self._on_supervisor_status_changed)
        s.worker_started.connect(self._on_supervisor_worker_started)
        s.restart_failing.connect(self._on_supervisor_restart_failing)
        s.worker_lost.connect(self._on_supervisor_worker_lost)
        self.window.poller.poll_failed.connect(self._on_poller_poll_failed)

    def start(self) -> None:
        """Read the recovery report off the GUI thread, then start supervising."""
        client = self.window.client
        # The report must see the dead worker's leases before a new worker takes them.
        self.window.tasks.submit(
            lambda: recovery_report(client), self._on_recovery_read, self._on_recovery_failed
        )

    def _on_recovery_read(self, report: RecoveryReport) -> None:
        self.recovery = report
        if not report.empty:
            self.show_recovery(report)
        self.supervisor.start()

    def _on_recovery_failed(self, exc: Exception) -> None:
        log.warning("recovery check failed: %s", exc)
        self.supervisor.start()

    def show_recovery(self, report: RecoveryReport) -> None:
        """Open the recovery summary (replacing one still open: the newer report wins)."""
        if self.recovery_dialog is not None:
            self.recovery_dialog.close()
            self.recovery_dialog.deleteLater()
        dialog = RecoveryDialog(report, self.parent_window)
        dialog.run_activated.connect(self._on_recovery_dialog_run_activated)
        self.recovery_dialog = dialog
        dialog.update_runs(list(self.window.runs_room.runs_model.rows()))
        dialog.show()

    @Slot(str)
    def _on_recovery_dialog_run_activated(self, run_id: str) -> None:
        self.window.select_run(run_id)

    def runs_polled(self, rows: Sequence[RunRow]) -> None:
        """The recovery summary follows the runs it lists."""
        if self.recovery_dialog is not None:
            self.recovery_dialog.update_runs(list(rows))

    def show_previous_crash(self, crash: PreviousCrash) -> CrashReportDialog:
        """Say that the previous session ended abnormally, and offer its crash log."""
        log.warning("%s", crash.describe())
        dialog = CrashReportDialog(crash, self.parent_window)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.crash_dialog = dialog
        dialog.destroyed.connect(self._on_crash_dialog_destroyed)
        dialog.show()
        return dialog

    @Slot()
    def _on_crash_dialog_destroyed(self) -> None:
        self.crash_dialog = None

    # ------------------------------------------------------------------ the worker

    @Slot(object)
    def _on_supervisor_worker_lost(self, report: RecoveryReport) -> None:
        """The worker died while the window was open: say what that did to the runs."""
        self.recovery = report
        bar, notifier = self.window.statusBar(), self.window.alerts_room.notifier
        pids = ", ".join(str(w.pid) for w in report.dead_workers)
        interrupted = sum(1 for item in report.items if item.interrupted)
        if report.vanished:  # its database file was deleted or replaced: say what it said
            text = f"The worker stopped: {report.vanished[:1].upper()}{report.vanished[1:]}"
            log.warning("%s", text)
            bar.showMessage(text, 60_000)
            notifier.notify(notify.Notice(notify.NoticeKind.FAILED, "", "Database file gone", text))
            return
        if not report.dead_workers:  # it shut down in order (e.g. ``worker --until-idle``)
            bar.showMessage("The worker stopped.", 10_000)
            return
        if interrupted:
            text = (
                f"The worker (pid {pids}) stopped unexpectedly while it held {interrupted} "
                "run(s); they resume from their journals."
            )
            self.show_recovery(report)
        else:
            text = f"The worker (pid {pids}) stopped unexpectedly; no run was interrupted."
        log.warning("%s", text)
        bar.showMessage(text, 30_000)
        notifier.notify(notify.Notice(notify.NoticeKind.FAILED, "", "Worker stopped", text))

    @Slot(object)
    def _on_supervisor_status_changed(self, status: WorkerStatus) -> None:
        self.show_worker(status)

    def show_worker(self, status: WorkerStatus | None) -> None:
        """Show the worker's status (None: not read yet) in the status bar."""
        self.worker_status = status
        alive = status is not None and status.alive
        if status is None:
            text = "checking the worker…"
        elif alive:
            text = status.describe()
        elif self.supervisor.spawn:
            text = status.describe() + " — starting one"
        else:
            text = status.describe() + " — start one with: desktop-agent worker"
        self.worker_label.setText(text)
        name = "worker-online" if alive else "worker-offline"
        self.worker_icon.setPixmap(resources.icon(name).pixmap(14, 14))

    @Slot(int)
    def _on_supervisor_worker_started(self, pid: int) -> None:
        self.window.statusBar().showMessage(f"Started a worker (pid {pid})", 5000)

    @Slot(str)
    def _on_supervisor_restart_failing(self, message: str) -> None:
        self.window.show_error(message)

    @Slot(str)
    def _on_poller_poll_failed(self, message: str) -> None:
        self.window.statusBar().showMessage(f"Could not read the database: {message}", 10_000)
