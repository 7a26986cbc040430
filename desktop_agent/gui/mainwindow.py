"""The main window: run list and approvals inbox above, the selected run below.

Data flows one way: :class:`LivePoller` reads the database off the GUI thread and the
window merges what changed into thin item models. Commands go through
:class:`RunCommands` as rows the worker applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, QUrl, Slot
from PySide6.QtGui import QCloseEvent, QDesktopServices, QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialogButtonBox,
    QLabel,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QWidget,
)

from desktop_agent import memory
from desktop_agent.client import forks as client_forks
from desktop_agent.client.api import Client, WorkerStatus
from desktop_agent.client.archived import ArchivedListing, archived_runs
from desktop_agent.client.checks import RecoveryReport, recovery_report
from desktop_agent.client.economy import batch_wait
from desktop_agent.client.forecast import run_forecast
from desktop_agent.client.messages import plain_error
from desktop_agent.client.models import ModelList
from desktop_agent.client.views import (
    ModelChoice,
    RunRow,
    RunsDelta,
    default_tool_names,
    model_choices,
    tool_catalog,
)
from desktop_agent.client.workspaces import start_demo_run
from desktop_agent.config import PALETTES, Settings
from desktop_agent.crashlog import PreviousCrash
from desktop_agent.domain import Approval, Run, RunStatus
from desktop_agent.gui import notify, resources
from desktop_agent.gui.actions import APPROVAL_CONTROLS, RUN_CONTROLS, Actions
from desktop_agent.gui.commands import RunCommands
from desktop_agent.gui.controls import Control, allowed_controls
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.crash import CrashReportDialog
from desktop_agent.gui.dialogs.export import ExportDialog
from desktop_agent.gui.dialogs.fork import ForkDialog
from desktop_agent.gui.dialogs.new_run import NewRunDialog, NewRunRequest
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.dialogs.recovery import RecoveryDialog
from desktop_agent.gui.dialogs.settings import SettingsDialog
from desktop_agent.gui.exporting import Exporting
from desktop_agent.gui.forking import Forking
from desktop_agent.gui.keyboard import Keyboard
from desktop_agent.gui.layout import FILE_NAME as LAYOUT_FILE
from desktop_agent.gui.layout import WindowLayout
from desktop_agent.gui.models.approvals import ApprovalListModel, ApprovalRow
from desktop_agent.gui.models.runs import RunListModel
from desktop_agent.gui.models.steps import StepTimelineModel
from desktop_agent.gui.notices import NoticeDesk
from desktop_agent.gui.notifier import Notifier
from desktop_agent.gui.palette import PaletteChooser
from desktop_agent.gui.poller import LivePoller, StepsBatch
from desktop_agent.gui.run_tags import RunTagging
from desktop_agent.gui.step_notes import StepNoting
from desktop_agent.gui.supervisor import WorkerSupervisor
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.tray import TrayController
from desktop_agent.gui.views.compare import CompareWindow
from desktop_agent.gui.views.scheduling import SchedulingViews
from desktop_agent.gui.views.search import SearchWindow
from desktop_agent.gui.views.usage import UsageWindow
from desktop_agent.gui.widgets.forecast import estimate_with
from desktop_agent.gui.widgets.inbox import ApprovalInbox
from desktop_agent.gui.widgets.run_detail import RunDetailPane
from desktop_agent.gui.widgets.runlist import RunListPanel
from desktop_agent.secrets import KeyStore

log = logging.getLogger(__name__)

MODEL_NOTICE_MS = 30_000
"""How long the status bar says that a run just started uses a deprecated model."""


class MainWindow(QMainWindow):
    """The desktop app's window.

    Args:
        client: the client over the database.
        spawn_workers: start (and restart) a detached worker when none is alive; tests
            run a worker in a thread and pass False.
        poll_ms: how often the change token is polled while the window is visible.
        keys: the API key store (the settings dialog uses it).
    """

    def __init__(
        self,
        client: Client,
        *,
        spawn_workers: bool = True,
        poll_ms: int = 250,
        keys: KeyStore | None = None,
        notify_bus: str | None = None,
    ) -> None:
        """``notify_bus``: the D-Bus address desktop notifications use (None: the session's)."""
        super().__init__()
        self.client = client
        self.keys = keys or KeyStore()
        self.setWindowTitle("desktop-agent")
        self.setWindowIcon(resources.app_icon())
        self.tasks = TaskRunner(2, self)
        self.runs_model = RunListModel(self)
        self.steps_model = StepTimelineModel(self)
        self.approvals_model = ApprovalListModel(self)
        self.poller = LivePoller(
            client, self.tasks, self.steps_model.resume_seq, interval_ms=poll_ms, parent=self
        )
        self.supervisor = WorkerSupervisor(client, self.tasks, spawn=spawn_workers, parent=self)
        self.commands = RunCommands(client, self.tasks, self)
        self.acts = Actions(self)
        self.palette_chooser = PaletteChooser(
            {c: self.acts[f"palette_{c}"] for c in PALETTES}, client, self.tasks.submit, self
        )
        self.tools = {t.name: t for t in tool_catalog(client)}
        self.approvals: tuple[Approval, ...] = ()
        self.selected: RunRow | None = None
        self.new_run_dialog: NewRunDialog | None = None
        self.model_list: ModelList | None = None
        """The catalogue as last read from the database (None: not yet; the shipped one)."""
        self.settings_dialog: SettingsDialog | None = None
        self.recovery_dialog: RecoveryDialog | None = None
        self.crash_dialog: CrashReportDialog | None = None
        self.recovery: RecoveryReport | None = None
        self.compare_windows: list[CompareWindow] = []
        self.search_window: SearchWindow | None = None
        self.usage_window: UsageWindow | None = None
        self._pending_step: tuple[str, int] | None = None
        self._pending_marks: list[str] = []
        """A search result to show once its run's steps are loaded: (run, seq)."""
        self.last_error = ""
        self.worker_status: WorkerStatus | None = None
        self._quitting = False
        self._leave_confirmed = False
        self._shut_down = False
        self._pending_select: str | None = None
        self._shown_pending = -1
        self._built = False
        self.exporting = Exporting(
            client,
            self.tasks,
            self,
            lambda: self.selected.run if self.selected is not None else None,
            self.show_error,
        )
        self._build()
        self._connect()
        self.forking = Forking(client, self.tasks, self, self.show_error, self._on_fork_made)
        self.keyboard = Keyboard(
            self,
            self.acts,
            self.side,
            self.detail.timeline,
            self.detail.inspector,
            self.run_list.table,
        )
        # The Schedules, Batches and Watched folders tabs.
        self.scheduling = SchedulingViews(self, self)
        self._built = True
        self.tray = TrayController(
            [
                self.acts["show"],
                self.acts["new_run"],
                self.acts["inbox"],
                None,
                self.acts["quit"],
            ],
            self,
        )
        self.tray.show_requested.connect(self._on_tray_show_requested)
        self.tray.notice_fallback.connect(self._on_tray_notice_fallback)
        self.notifier = Notifier(self.tray, self, notify_bus, self)
        self.notifier.window_notice.connect(self._on_tray_notice_fallback)
        self.notices = NoticeDesk(
            self,
            lambda: self.client.settings,
            self.notifier,
            self.tray,
            self.runs_model,
            self.side,
            self.run_list,
            self.inbox,
            self._visible_approvals,
            self._on_tray_show_requested,
            self.select_run,
            self.open_approval,
            lambda: self.approval_dialog is not None and self.approval_dialog.isVisible(),
        )
        self._ticks = 0
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._on_clock_timeout)
        self._update_controls()
        # An explicit minimum keeps layouts from resizing the window's limits as panes
        # appear (which also spares the offscreen platform a warning per change).
        self.setMinimumSize(900, 600)
        self.layout_memory = WindowLayout(
            self,
            client.db_path.parent / LAYOUT_FILE,
            {
                "main": self.split,
                "detail": self.detail.body_split,
                "steps": self.detail.list_split,
            },
            self.run_list,
        )
        self.layout_memory.restore()
        self._start()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        toolbar = self.addToolBar("Run controls")
        toolbar.setObjectName("controls")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.acts.fill_toolbar(toolbar)
        self.acts.fill_menus(self.menuBar())
        self.run_list = RunListPanel(self.runs_model, self)
        self.inbox = ApprovalInbox(self.approvals_model, self)
        self.side = QTabWidget(self)
        self.side.setDocumentMode(True)
        self.side.addTab(self.run_list, resources.icon("status-running"), "Runs")
        self.side.addTab(self.inbox, resources.icon("inbox"), "Approvals")
        self.detail = RunDetailPane(self.steps_model, self.acts["follow"], self)
        # The run list at the window's full height, the run's detail beside it.
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self.split.addWidget(self.side)
        self.split.addWidget(self.detail)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)
        # Explicit minimums: the tabs' pages (schedules, batches) and the detail ask for
        # more than a 1280-wide window can give both, and the splitter would halve it.
        self.side.setMinimumWidth(360)
        self.detail.setMinimumWidth(520)
        self.setCentralWidget(self.split)
        self.worker_label = QLabel(self)
        self.worker_icon = QLabel(self)
        self.statusBar().addPermanentWidget(self.worker_icon)
        self.statusBar().addPermanentWidget(self.worker_label)
        self._show_worker(None)

    def add_view(self, widget: QWidget, icon: str, title: str) -> int:
        """Add a tab beside Runs and Approvals (e.g. schedules or batches); returns its index."""
        return self.side.addTab(widget, resources.icon(icon), title)

    @property
    def timeline(self) -> QWidget:
        """The timeline view of the selected run."""
        return self.detail.timeline

    @property
    def approval_dialog(self) -> ApprovalDialog | None:
        """The approval dialog, while open."""
        return self.commands.approval_dialog

    def _connect(self) -> None:
        a = self.acts
        a["new_run"].triggered.connect(self._on_new_run_triggered)
        a["settings"].triggered.connect(self._on_settings_triggered)
        a["refresh"].triggered.connect(self.poller.refresh)
        a["find"].triggered.connect(self._on_find_triggered)
        a["inbox"].triggered.connect(self._on_inbox_triggered)
        a["compare"].triggered.connect(self._on_compare_triggered)
        a["run_again"].triggered.connect(self._on_run_again_triggered)
        a["search_all"].triggered.connect(self.open_search)
        a["export"].triggered.connect(self.exporting.ask_export)
        a["import"].triggered.connect(self.exporting.ask_import)
        a["usage"].triggered.connect(self.open_usage)
        self.run_list.table.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.run_list.table.addAction(a["run_again"])
        self.run_list.table.addAction(a["compare"])
        self.run_list.table.addAction(a["export"])
        a["fork_step"].triggered.connect(self._on_fork_step_triggered)
        self.detail.timeline.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.detail.timeline.addAction(a["fork_step"])
        self.noting = StepNoting(self, lambda _note: self.poller.refresh())
        self.tagging = RunTagging(self, lambda _change: self.poller.refresh())
        self.detail.header.run_link_activated.connect(self.select_run)
        a["show"].triggered.connect(self._on_tray_show_requested)
        a["close"].triggered.connect(self.close)
        a["quit"].triggered.connect(self._on_quit_triggered)
        for control in (*RUN_CONTROLS, *APPROVAL_CONTROLS):
            a[control].triggered.connect(self._control_slot(control))
        self.run_list.run_selected.connect(self._on_run_list_run_selected)
        self.run_list.archived_wanted.connect(self.read_archived)
        self.detail.unarchive_requested.connect(self._on_detail_unarchive_requested)
        self.run_list.demo_requested.connect(self._on_run_list_demo_requested)
        self.run_list.new_run_requested.connect(self._on_new_run_triggered)
        self.inbox.review_requested.connect(self.open_approval)
        self.inbox.approve_requested.connect(self._on_inbox_approve_requested)
        self.inbox.reject_requested.connect(self._on_inbox_reject_requested)
        self.inbox.approval_selected.connect(self._on_inbox_approval_selected)
        self.detail.open_workspace_requested.connect(self._on_detail_open_workspace_requested)
        self.detail.approval_step_activated.connect(self._on_detail_approval_step_activated)
        self.detail.review_requested.connect(self.open_approval)
        self.detail.control_requested.connect(self.run_control)
        self.detail.batch_wait_wanted.connect(self._read_batch_wait)
        self.poller.runs_changed.connect(self._on_poller_runs_changed)
        self.poller.steps_loaded.connect(self._on_poller_steps_loaded)
        self.poller.poll_failed.connect(self._on_poller_poll_failed)
        self.supervisor.status_changed.connect(self._on_supervisor_status_changed)
        self.supervisor.worker_started.connect(self._on_supervisor_worker_started)
        self.supervisor.restart_failing.connect(self.show_error)
        self.supervisor.worker_lost.connect(self._on_supervisor_worker_lost)
        self.commands.done.connect(self._on_commands_done)
        self.commands.failed.connect(self._on_commands_failed)
        self.commands.run_started.connect(self._on_commands_run_started)
        self.commands.model_notice.connect(self._on_commands_model_notice)
        self.commands.decisions_changed.connect(self._on_commands_decisions_changed)
        self.tasks.task_failed.connect(self._on_tasks_task_failed)
        self.palette_chooser.saved.connect(self._on_palette_chooser_saved)
        self.palette_chooser.failed.connect(self.show_error)

    def _start(self) -> None:
        self.poller.start()
        self._clock.start()
        client = self.client
        # The report must see the dead worker's leases before a new worker takes them.
        self.tasks.submit(
            lambda: recovery_report(client), self._on_recovery_read, self._on_recovery_failed
        )

    # ------------------------------------------------------------------ data in

    def _on_recovery_read(self, report: RecoveryReport) -> None:
        self.recovery = report
        if not report.empty:
            self._show_recovery(report)
        self.supervisor.start()

    def _show_recovery(self, report: RecoveryReport) -> None:
        """Open the recovery summary (replacing one still open: the newer report wins)."""
        if self.recovery_dialog is not None:
            self.recovery_dialog.close()
            self.recovery_dialog.deleteLater()
        dialog = RecoveryDialog(report, self)
        dialog.run_activated.connect(self.select_run)
        self.recovery_dialog = dialog
        dialog.update_runs(list(self.runs_model.rows()))
        dialog.show()

    def show_previous_crash(self, crash: PreviousCrash) -> CrashReportDialog:
        """Say that the previous session ended abnormally, and offer its crash log."""
        log.warning("%s", crash.describe())
        dialog = CrashReportDialog(crash, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.crash_dialog = dialog
        dialog.destroyed.connect(self._on_crash_dialog_destroyed)
        dialog.show()
        return dialog

    @Slot()
    def _on_crash_dialog_destroyed(self) -> None:
        self.crash_dialog = None

    @Slot(object)
    def _on_supervisor_worker_lost(self, report: RecoveryReport) -> None:
        """The worker died while the window was open: say what that did to the runs."""
        self.recovery = report
        pids = ", ".join(str(w.pid) for w in report.dead_workers)
        interrupted = sum(1 for item in report.items if item.interrupted)
        if report.vanished:  # its database file was deleted or replaced: say what it said
            text = f"The worker stopped: {report.vanished[:1].upper()}{report.vanished[1:]}"
            log.warning("%s", text)
            self.statusBar().showMessage(text, 60_000)
            self.notifier.notify(
                notify.Notice(notify.NoticeKind.FAILED, "", "Database file gone", text)
            )
            return
        if not report.dead_workers:  # it shut down in order (e.g. ``worker --until-idle``)
            self.statusBar().showMessage("The worker stopped.", 10_000)
            return
        if interrupted:
            text = (
                f"The worker (pid {pids}) stopped unexpectedly while it held {interrupted} "
                "run(s); they resume from their journals."
            )
            self._show_recovery(report)
        else:
            text = f"The worker (pid {pids}) stopped unexpectedly; no run was interrupted."
        log.warning("%s", text)
        self.statusBar().showMessage(text, 30_000)
        self.notifier.notify(notify.Notice(notify.NoticeKind.FAILED, "", "Worker stopped", text))

    def _on_recovery_failed(self, exc: Exception) -> None:
        log.warning("recovery check failed: %s", exc)
        self.supervisor.start()

    @Slot(object)
    def _on_poller_runs_changed(self, delta: RunsDelta) -> None:
        self.runs_model.apply(delta.rows, full=delta.full)
        self.commands.decided &= {a.id for a in delta.approvals}
        self.approvals = delta.approvals  # before the notices: a notice offers Review
        self.notices.polled(self.runs_model.rows() if delta.full else delta.rows, full=delta.full)
        self._show_approvals()
        if self.recovery_dialog is not None:
            self.recovery_dialog.update_runs(list(delta.rows))
        if self.selected is not None:
            row = self.runs_model.get(self.selected.run.id)
            if row is not None and row != self.selected:
                self.selected = row
                self.detail.update_row(row)
        self._update_controls()

    def _visible_approvals(self) -> list[Approval]:
        return [a for a in self.approvals if a.id not in self.commands.decided]

    def _show_approvals(self) -> None:
        pending = self._visible_approvals()
        titles = {r.run.id: (r.run.title or r.run.goal) for r in self.runs_model.rows()}
        self.approvals_model.set_rows(
            ApprovalRow(a, titles.get(a.run_id, a.run_id)) for a in pending
        )
        n = len(pending)
        if n == self._shown_pending:
            return
        self._shown_pending = n
        index = self.side.indexOf(self.inbox)
        self.side.setTabText(index, f"Approvals ({n})" if n else "Approvals")
        self.side.setTabIcon(index, resources.badge_icon("inbox", n))
        self.acts["inbox"].setIcon(resources.badge_icon("inbox", n))
        self.acts["inbox"].setText(f"Approvals ({n})" if n else "Approvals")
        # The app's name last: the platform adds it to a title that does not end with it.
        waiting = f"{n} approval{'s' if n != 1 else ''} waiting — " if n else ""
        self.setWindowTitle(f"{waiting}desktop-agent")

    @Slot(object)
    def _on_poller_steps_loaded(self, batch: StepsBatch) -> None:
        self.detail.apply(batch)
        self._show_pending_step()

    # ------------------------------------------------------------------ search

    def open_usage(self) -> UsageWindow:
        """Open (or bring forward, read anew) the window of what all runs spent."""
        if self.usage_window is None or self.usage_window.closed:
            self.usage_window = UsageWindow(self.client, self.tasks, self)
        else:
            self.usage_window.reload()
        self.usage_window.show()
        self.usage_window.raise_()
        return self.usage_window

    def open_search(self) -> SearchWindow:
        """Open (or bring forward) the window that searches every run."""
        if self.search_window is None or self.search_window.closed:
            window = SearchWindow(self.client, self.tasks, self)
            window.open_requested.connect(self.open_step)
            window.unarchive_requested.connect(self._on_search_unarchive_requested)
            self.search_window = window
        self.search_window.show()
        self.search_window.raise_()
        self.search_window.query.setFocus()
        return self.search_window

    @Slot(str, int)
    def open_step(self, run_id: str, seq: int, marks: object = ()) -> None:
        """Select ``run_id`` with step ``seq`` selected in its timeline (0: the run only).

        ``marks``: words to mark in the step's details (a search's).
        """
        self._on_tray_show_requested()
        self._pending_step = (run_id, seq) if seq else None
        self._pending_marks = [str(m) for m in marks] if isinstance(marks, list | tuple) else []
        if not self.select_run(run_id):  # not listed yet (just brought back): at the next poll
            self._pending_select = run_id
            self.poller.refresh()
            QTimer.singleShot(0, self._select_pending)
        self._show_pending_step()

    def _show_pending_step(self) -> None:
        if self._pending_step is None or self.selected is None:
            return
        run_id, seq = self._pending_step
        if self.selected.run.id != run_id or self.steps_model.run_id != run_id:
            return
        row = self.steps_model.row_of(seq)
        if row < 0:
            return  # not loaded yet
        index = self.steps_model.index(row)
        self.detail.timeline.setCurrentIndex(index)
        self.detail.timeline.scrollTo(index)
        self.detail.inspector.mark(self._pending_marks)
        self._pending_step = None

    @Slot(str, int)
    def _on_search_unarchive_requested(self, run_id: str, seq: int) -> None:
        client = self.client

        def bring_back() -> Run:
            from desktop_agent.client.schedules import Scheduling

            return Scheduling(client).unarchive(run_id)

        def back(run: Run) -> None:
            self.statusBar().showMessage(f"Run {run.id} is back from its archive", 10_000)
            self.poller.reload_all()  # its old times: an incremental read would miss it
            self.open_step(run.id, seq)

        self.tasks.submit(bring_back, back, lambda exc: self.show_error(plain_error(exc)))

    @Slot(str)
    def _on_poller_poll_failed(self, message: str) -> None:
        self.statusBar().showMessage(f"Could not read the database: {message}", 10_000)

    @Slot(object)
    def _on_supervisor_status_changed(self, status: WorkerStatus) -> None:
        self._show_worker(status)

    def _show_worker(self, status: WorkerStatus | None) -> None:
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
        self.statusBar().showMessage(f"Started a worker (pid {pid})", 5000)

    @Slot()
    def _on_clock_timeout(self) -> None:
        self._ticks += 1
        if self._ticks % memory.TRIM_EVERY_S == 0:  # one tick a second
            memory.release_free_memory()
        self.runs_model.refresh_times()
        self.approvals_model.refresh_times()
        self.detail.tick()
        self.notices.tick()

    # ------------------------------------------------------------------ selection

    @Slot()
    def read_archived(self) -> None:
        """Read the archived and imported runs off the GUI thread, for the run list's filters."""
        client = self.client

        def read() -> list[ArchivedListing]:
            return archived_runs(client)

        def show(found: list[ArchivedListing]) -> None:
            imported = {a.run.id for a in found if a.imported}
            self.run_list.show_archived([RunRow(a.run) for a in found], imported)

        self.tasks.submit(read, show, lambda exc: self.show_error(plain_error(exc)))

    @Slot(str)
    def _on_detail_unarchive_requested(self, run_id: str) -> None:
        self._on_search_unarchive_requested(run_id, 0)

    def _show_archived_run(self, run_id: str) -> bool:
        """Show an archived run of the list (read-only: no controls); False if it is none."""
        found = self.run_list.archived_row(run_id) if run_id else None
        if found is None:
            return False
        self.selected = None
        self.detail.show_archived(*found)
        self.poller.select_run(None)
        self._update_controls()
        return True

    @Slot(str)
    def _on_run_list_run_selected(self, run_id: str) -> None:
        self._update_compare()
        if self.runs_model.get(run_id) is None and self._show_archived_run(run_id):
            return
        row = self.runs_model.get(run_id) if run_id else None
        if row is not None and self.selected is not None and row.run.id == self.selected.run.id:
            return
        self.selected = row
        self.detail.show_run(row)
        self._read_forks(row)
        self.poller.select_run(run_id or None)
        self._update_controls()

    def select_run(self, run_id: str) -> bool:
        """Select a run in the list (showing the Runs tab)."""
        self.side.setCurrentWidget(self.run_list)
        return self.run_list.select_run(run_id)

    @Slot(str)
    def _on_inbox_approval_selected(self, run_id: str) -> None:
        if run_id and self.runs_model.get(run_id) is not None:
            self._on_run_list_run_selected(run_id)

    # ------------------------------------------------------------------ controls

    def _pending_for_selected(self) -> list[Approval]:
        if self.selected is None:
            return []
        return [a for a in self._visible_approvals() if a.run_id == self.selected.run.id]

    def _update_controls(self) -> None:
        run = self.selected.run if self.selected else None
        pending = self._pending_for_selected()
        self.detail.show_pending(pending)  # the header's banner: shown, never popped up
        allowed = allowed_controls(run, len(pending))
        for control in (*RUN_CONTROLS, *APPROVAL_CONTROLS):
            self.acts[control].setEnabled(control in allowed)
        self._update_compare()

    def _update_compare(self) -> None:
        self.acts["compare"].setEnabled(len(self.run_list.selected_run_ids()) == 2)
        self.acts["run_again"].setEnabled(self.selected is not None)
        self.acts["export"].setEnabled(self.selected is not None)

    def export_run(self, run_id: str, path: Path, fmt: str) -> None:
        """Write the run as ``fmt`` to ``path`` (see :mod:`desktop_agent.gui.exporting`)."""
        self.exporting.export_run(run_id, path, fmt)

    def import_bundle(self, path: Path) -> None:
        """Bring a bundle in, read-only (see :mod:`desktop_agent.gui.exporting`)."""
        self.exporting.import_bundle(path)

    @property
    def export_dialog(self) -> ExportDialog | None:
        """The export dialog, once opened."""
        return self.exporting.dialog

    @Slot()
    def _on_run_again_triggered(self) -> None:
        if self.selected is not None:
            self.run_again(self.selected.run)

    def _read_forks(self, row: RunRow | None) -> None:
        """The selected run's forks, inherited cost and forecast in its header (read off-thread)."""
        if row is None:
            return
        client, run = self.client, row.run

        def read() -> tuple[list[Run], float]:
            return client.forks_of(run.id), client_forks.inherited_cost(client, run)

        def show(found: tuple[list[Run], float]) -> None:
            self.detail.header.show_forks(run.id, *found)

        self.tasks.submit(read, show, lambda exc: None)
        self.tasks.submit(
            lambda: run_forecast(client, run.id),
            lambda kept: self.detail.header.show_forecast(run.id, kept),
            lambda exc: None,
        )

    @Slot(str)
    def _read_batch_wait(self, run_id: str) -> None:
        """Where a run waiting in a Message Batch has its turn, for its header (off-thread)."""
        client = self.client
        self.tasks.submit(
            lambda: batch_wait(client, run_id),
            lambda wait: self.detail.header.show_batch_wait(run_id, wait),
            lambda exc: None,
        )

    @Slot()
    def _on_fork_step_triggered(self) -> None:
        entry = self.detail.current_entry()
        if self.selected is None or entry is None:
            self.show_error("Select a step in the timeline to fork the run from it.")
            return
        self.fork_from_step(self.selected.run.id, entry.seq)

    def fork_from_step(self, run_id: str, seq: int) -> None:
        """Offer a fork of ``run_id`` from step ``seq`` (or the nearest that can be)."""
        self.forking.fork_from_step(run_id, seq)

    @property
    def fork_dialog(self) -> ForkDialog | None:
        """The fork dialog, once opened."""
        return self.forking.dialog

    def _on_fork_made(self, run: Run) -> None:
        """The new fork opens at once: selected, its header saying what it shares."""
        self.statusBar().showMessage(
            f"Forked run {run.forked_from} at step {run.forked_at_seq}: {run.id}", 30_000
        )
        self._on_commands_run_started(run)

    def run_again(self, run: Run) -> NewRunDialog:
        """Open New run filled as ``run`` was started, to change what should change."""
        dialog = self.open_new_run()
        dialog.prefill(run)
        return dialog

    @Slot()
    def _on_compare_triggered(self) -> None:
        chosen = self.run_list.selected_run_ids()
        if len(chosen) != 2:
            self.show_error("Select two runs to compare them (Ctrl+click the second one).")
            return
        self.open_compare(*chosen)

    def open_compare(self, run_a: str, run_b: str) -> CompareWindow:
        """Open a window comparing two runs (older first when both are listed)."""
        a, b = self.runs_model.get(run_a), self.runs_model.get(run_b)
        if a is not None and b is not None and a.run.created_at > b.run.created_at:
            run_a, run_b = run_b, run_a
        window = CompareWindow(self.client, self.tasks, run_a, run_b, self)
        self.compare_windows = [w for w in self.compare_windows if not w.closed] + [window]
        window.show()
        return window

    def _control_slot(self, control: Control) -> Callable[[], None]:
        def triggered() -> None:
            self.run_control(control)

        return triggered

    def run_control(self, control: Control) -> None:
        """Apply ``control`` to the selected run (if it applies now)."""
        if self.selected is None:
            return
        run = self.selected.run
        pending = self._pending_for_selected()
        if control not in allowed_controls(run, len(pending)):
            return
        c = self.commands
        handlers: dict[Control, Callable[[], object]] = {
            Control.PAUSE: lambda: c.pause(run),
            Control.RESUME: lambda: c.resume(run),
            Control.RETRY: lambda: c.retry(run),
            Control.CANCEL: lambda: c.cancel(run),
            Control.STOP: lambda: c.stop(run),
            Control.STEER: lambda: c.steer(run),
            Control.ANSWER: lambda: c.answer(run),
            Control.EXTEND_BUDGET: lambda: c.extend_budget(run),
            Control.RESOLVE: lambda: c.resolve(run),
            # Never blind: each opens the first pending call; the decision is made there.
            Control.APPROVE: lambda: self.open_approval(pending[0], len(pending)),
            Control.EDIT: lambda: self.open_approval(pending[0], len(pending)),
            Control.REJECT: lambda: self.open_approval(pending[0], len(pending)).ask_reject(),
        }
        handlers[control]()

    @Slot(object)
    def open_approval(self, approval: Approval, of: int = 1) -> ApprovalDialog:
        """Open the approval dialog for ``approval`` (the first of ``of`` pending calls)."""
        row = self.runs_model.get(approval.run_id)
        title = (row.run.title or row.run.goal) if row else approval.run_id
        position = f"1 of {of}" if of > 1 else ""
        tool = self.tools.get(approval.tool)
        return self.commands.open_approval(approval, title, tool, position)

    @Slot(object)
    def _on_inbox_approve_requested(self, approvals: list[Approval]) -> None:
        if len(approvals) == 1:
            self.open_approval(approvals[0])
        else:
            self.commands.approve_many(approvals)

    @Slot(object)
    def _on_inbox_reject_requested(self, approvals: list[Approval]) -> None:
        if len(approvals) == 1:
            self.open_approval(approvals[0]).ask_reject()
        else:
            self.commands.reject_many(approvals)

    @Slot()
    def _on_commands_decisions_changed(self) -> None:
        self._show_approvals()
        self._update_controls()

    @Slot(str)
    def _on_commands_done(self, message: str) -> None:
        self.statusBar().showMessage(message, 6000)
        self.poller.refresh()

    @Slot(str)
    def _on_commands_model_notice(self, message: str) -> None:
        self.statusBar().showMessage(message, MODEL_NOTICE_MS)

    @Slot(str)
    def _on_commands_failed(self, message: str) -> None:
        self.show_error(message)
        self.poller.refresh()

    @Slot(object)
    def _on_tasks_task_failed(self, exc: Exception) -> None:
        self.show_error(plain_error(exc))

    @Slot(str)
    def show_error(self, message: str) -> None:
        """Tell the analyst something did not work (without blocking the window)."""
        self.last_error = message
        box = MessageDialog("desktop-agent", message, "status-failed", parent=self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    # ------------------------------------------------------------------ dialogs

    @Slot()
    def _on_new_run_triggered(self) -> None:
        self.open_new_run()

    def open_new_run(self) -> NewRunDialog:
        """Open the new-run dialog (one dialog, emptied and filled anew at each opening)."""
        # MCP tools a worker listed since the app started (a small local file).
        self.client.reload_mcp_tools()
        self.tools = {t.name: t for t in tool_catalog(self.client)}
        models, tools = self.offered_models(), list(self.tools.values())
        settings, defaults = self.client.settings, default_tool_names(self.client)
        dialog = self.new_run_dialog
        if dialog is None:
            dialog = NewRunDialog(models, tools, settings, defaults, self)
            dialog.start_requested.connect(self._on_new_run_dialog_start_requested)
            dialog.set_forecaster(self.tasks.submit, estimate_with(self.client))
            self.new_run_dialog = dialog
        else:  # never one built per opening: see NewRunDialog.refill
            dialog.refill(models, tools, settings, defaults)
        dialog.open()

        def update(choices: list[ModelChoice]) -> None:
            if self.new_run_dialog is dialog:
                dialog.set_models(choices)

        self.read_models(update)
        return dialog

    def offered_models(self) -> list[ModelChoice]:
        """The models a new run may use, as last read (retired ones left out, the demo last)."""
        return model_choices(self.model_list)

    def read_models(self, then: Callable[[list[ModelChoice]], None]) -> None:
        """Read the catalogue the workers stored, off the GUI thread; ``then`` gets the models.

        Until it is read, dialogs offer the catalogue shipped with the program; a reading
        that fails leaves them so.
        """
        client = self.client

        def read() -> ModelList:
            return client.models()

        def done(models: ModelList) -> None:
            self.model_list = models
            then(model_choices(models))

        self.tasks.submit(read, done, _ignore_failure)

    @Slot(object)
    def _on_new_run_dialog_start_requested(self, request: NewRunRequest) -> None:
        dialog = self.new_run_dialog

        def failed(exc: Exception) -> None:
            if dialog is not None:
                dialog.show_error(plain_error(exc))

        self.commands.start_run(request, failed)

    @Slot()
    def _on_run_list_demo_requested(self) -> None:
        """Start the offline demo on the sample workspace, and select it."""
        empty = self.run_list.empty
        empty.set_demo_busy(True)
        client = self.client

        def failed(exc: Exception) -> None:
            empty.set_demo_busy(False)
            self.show_error(plain_error(exc))

        def started(run: Run) -> None:
            empty.set_demo_busy(False)
            self.statusBar().showMessage(f"Started the offline demo (run {run.id})", 6000)
            self._on_commands_run_started(run)

        self.tasks.submit(lambda: start_demo_run(client), started, failed)

    @Slot(object)
    def _on_commands_run_started(self, run: Run) -> None:
        if self.new_run_dialog is not None:
            self.new_run_dialog.accept()
        self._pending_select = run.id
        self.poller.refresh()
        QTimer.singleShot(0, self._select_pending)

    def _select_pending(self) -> None:
        if self._pending_select is None or self._shut_down:
            return
        if self.select_run(self._pending_select):
            self._pending_select = None
        else:  # the poll that lists the new run has not arrived yet
            QTimer.singleShot(100, self._select_pending)

    @Slot()
    def _on_settings_triggered(self) -> None:
        self.open_settings()

    def open_settings(self) -> SettingsDialog:
        """Open the settings dialog."""
        dialog = SettingsDialog(
            self.client.settings,
            Path(self.client.db_path),
            self.offered_models(),
            self.tasks.submit,
            self.keys,
            self,
        )
        dialog.show_notice_channel(self.notifier.channel.value)
        dialog.saved.connect(self._on_settings_dialog_saved)
        dialog.key_saved.connect(self._on_settings_dialog_key_saved)
        self.settings_dialog = dialog
        dialog.open()
        return dialog

    @Slot(object)
    def _on_settings_dialog_saved(self, settings: Settings) -> None:
        self.client.settings = settings
        self.statusBar().showMessage("Settings saved", 5000)

    @Slot(str)
    def _on_palette_chooser_saved(self, message: str) -> None:
        self.statusBar().showMessage(message, 5000)

    @Slot(str)
    def _on_settings_dialog_key_saved(self, _where: str) -> None:
        def resumed(n: int) -> None:
            if n:
                self.statusBar().showMessage(f"Resuming {n} run(s) that waited for a key", 6000)

        self.tasks.submit(self.client.resume_runs_waiting_for_key, resumed)

    @Slot()
    def _on_find_triggered(self) -> None:
        focus = QApplication.focusWidget()
        if focus is not None and self.detail.isAncestorOf(focus) and self.selected is not None:
            self.detail.find_field.setFocus()  # inside a run: find in it
            self.detail.find_field.selectAll()
            return
        self.side.setCurrentWidget(self.run_list)
        self.run_list.search.setFocus()
        self.run_list.search.selectAll()

    @Slot()
    def _on_inbox_triggered(self) -> None:
        self.side.setCurrentWidget(self.inbox)
        self.inbox.take_focus()
        if self.isHidden() or self.isMinimized():
            self._on_tray_show_requested()

    @Slot(str, int)
    def _on_detail_approval_step_activated(self, run_id: str, seq: int) -> None:
        row = self.runs_model.get(run_id)
        title = (row.run.title or row.run.goal) if row else run_id
        self.commands.open_step_approvals(run_id, seq, title, self.tools)

    @Slot(str)
    def _on_detail_open_workspace_requested(self, path: str) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(path))

    # ------------------------------------------------------------------ window life

    @Slot()
    def _on_tray_show_requested(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()

    @Slot(str)
    def _on_tray_notice_fallback(self, text: str) -> None:
        self.statusBar().showMessage(text, 10_000)

    def showEvent(self, event: QShowEvent) -> None:
        """Poll often while visible."""
        self.poller.set_visible(True)
        super().showEvent(event)

    def hideEvent(self, event: QHideEvent) -> None:
        """Poll rarely while hidden (the tray still needs status changes)."""
        self.poller.set_visible(False)
        super().hideEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        """Re-tint icons when the palette switches between light and dark."""
        if event.type() == QEvent.Type.PaletteChange and self._built:
            # The children get the new palette after this event: re-color once they have it.
            QTimer.singleShot(0, self, self._refresh_colors)
        super().changeEvent(event)

    def _refresh_colors(self) -> None:
        if self._shut_down:
            return
        self.acts.refresh_icons()
        self.detail.refresh_colors()
        self._shown_pending = -1
        self._show_approvals()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hide to the tray (runs go on), or close the app leaving the worker running."""
        to_tray = self.client.settings.close_action == "tray" and self.tray.available
        if not self._quitting and to_tray:
            event.ignore()
            self.layout_memory.save()
            self.hide()
            self.tray.notify(
                notify.Notice(
                    notify.NoticeKind.FINISHED,
                    "",
                    "desktop-agent keeps running",
                    "Runs go on. Use the tray icon to come back, or to quit everything.",
                )
            )
            return
        going_on = self._runs_going_on()
        if going_on and not (self._quitting or self._shut_down or self._leave_confirmed):
            event.ignore()  # never quietly: with no tray, nothing would show they go on
            self._ask_before_closing(going_on)
            return
        self.shutdown()
        event.accept()

    def _runs_going_on(self) -> int:
        """Runs that go on or wait for the analyst (paused and stopped ones do not count)."""
        idle = (RunStatus.PAUSED, RunStatus.STOPPED)
        return sum(
            1 for r in self.runs_model.rows() if r.run.status.is_active and r.run.status not in idle
        )

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
            parent=self,
        )
        quit_all = box.buttons.addButton(
            "Quit everything", QDialogButtonBox.ButtonRole.DestructiveRole
        )
        quit_all.clicked.connect(box.reject)
        quit_all.clicked.connect(self.quit_everything)
        box.confirmed.connect(self._close_leaving_runs)
        self.commands.dialog = box
        box.open()

    @Slot()
    def _close_leaving_runs(self) -> None:
        self._leave_confirmed = True
        self.close()

    @Slot()
    def _on_quit_triggered(self) -> None:
        if not self.supervisor.started:
            self.quit_everything()
            return
        running = runs_that_stop(self.runs_model.rows())
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
            parent=self,
        )
        box.confirmed.connect(self.quit_everything)
        self.commands.dialog = box
        box.open()

    @Slot()
    def quit_everything(self) -> None:
        """Stop the worker this app started (by PID) and quit."""
        stopped = self.supervisor.stop_started_workers()
        if stopped:
            log.info("asked worker(s) %s to stop", stopped)
        self._quitting = True
        self.close()
        app = QApplication.instance()
        if app is not None:
            app.quit()

    def shutdown(self) -> None:
        """Stop polling, timers and background tasks (the worker keeps running)."""
        if self._shut_down:
            return
        self._shut_down = True
        self.layout_memory.save()
        self.poller.stop()
        self.supervisor.stop()
        self._clock.stop()
        self.scheduling.shutdown()
        self.detail.stop()
        self.statusBar().clearMessage()
        self.tasks.shutdown()
        self.tray.hide()
        self.notifier.close()
        if self.approval_dialog is not None:
            self.approval_dialog.close_discarding()  # quitting: no question about an edit
        for dialog in (self.recovery_dialog, self.approval_dialog, self.crash_dialog):
            if dialog is not None:
                dialog.close()


def runs_that_stop(rows: Iterable[RunRow]) -> int:
    """Runs a stopped worker interrupts: the running ones.

    Waiting, paused and queued runs are not being worked on: nothing of theirs stops.
    """
    return sum(1 for r in rows if r.run.status == RunStatus.RUNNING)


def _ignore_failure(_exc: Exception) -> None:
    """A background read whose failure changes nothing the analyst sees."""
