"""The main window: run list and approvals inbox on the left, the selected run beside them.

Data flows one way: :class:`LivePoller` reads the database off the GUI thread and the
window hands what changed to its rooms, which merge it into thin item models. Commands go
through :class:`RunCommands` as rows the worker applies.

The window is the frame (toolbar, menus, the tabs, the splitter, the status bar, the
clock, its own life); each feature is a room of :mod:`desktop_agent.gui.desk` that owns
its widgets and its reads and writes (always on the task runner, never on the GUI
thread). The window builds the rooms, wires them to each other, and keeps the names the
rest of the app, the tests and the benchmarks use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, QTimer, Slot
from PySide6.QtGui import QCloseEvent, QHideEvent, QShowEvent
from PySide6.QtWidgets import QMainWindow, QSplitter, QTabWidget, QWidget

from desktop_agent import memory
from desktop_agent.client.api import Client, WorkerStatus
from desktop_agent.client.checks import RecoveryReport
from desktop_agent.client.messages import plain_error
from desktop_agent.client.models import ModelList
from desktop_agent.client.views import ModelChoice, RunRow, RunsDelta, ToolInfo
from desktop_agent.crashlog import PreviousCrash
from desktop_agent.domain import Approval, Run
from desktop_agent.gui import resources
from desktop_agent.gui.actions import Actions
from desktop_agent.gui.commands import RunCommands
from desktop_agent.gui.controls import Control
from desktop_agent.gui.desk.alerts import AlertsRoom
from desktop_agent.gui.desk.approvals import ApprovalsRoom
from desktop_agent.gui.desk.closing import ClosingRoom, runs_that_stop
from desktop_agent.gui.desk.controls import ControlsRoom
from desktop_agent.gui.desk.detail import DetailRoom
from desktop_agent.gui.desk.history import HistoryRoom
from desktop_agent.gui.desk.new_run import NewRunRoom
from desktop_agent.gui.desk.runs import RunsRoom
from desktop_agent.gui.desk.search import SearchRoom
from desktop_agent.gui.desk.settings import SettingsRoom
from desktop_agent.gui.desk.usage import UsageRoom
from desktop_agent.gui.desk.worker import WorkerRoom
from desktop_agent.gui.dialogs.approval import ApprovalDialog
from desktop_agent.gui.dialogs.crash import CrashReportDialog
from desktop_agent.gui.dialogs.export import ExportDialog
from desktop_agent.gui.dialogs.fork import ForkDialog
from desktop_agent.gui.dialogs.managed_sessions import add_follow_action
from desktop_agent.gui.dialogs.new_run import NewRunDialog, NewRunRequest
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.dialogs.recovery import RecoveryDialog
from desktop_agent.gui.dialogs.settings import SettingsDialog
from desktop_agent.gui.keyboard import Keyboard
from desktop_agent.gui.layout import FILE_NAME as LAYOUT_FILE
from desktop_agent.gui.layout import WindowLayout
from desktop_agent.gui.models.steps import StepTimelineModel
from desktop_agent.gui.poller import LivePoller, StepsBatch
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.views.compare import CompareWindow
from desktop_agent.gui.views.scheduling import SchedulingViews
from desktop_agent.gui.views.search import SearchWindow
from desktop_agent.gui.views.usage import UsageWindow
from desktop_agent.gui.widgets.run_detail import RunDetailPane
from desktop_agent.gui.widgets.runlist import RunListPanel
from desktop_agent.secrets import KeyStore

__all__ = ["MainWindow", "runs_that_stop"]


class MainWindow(QMainWindow):
    """The desktop app's window.

    Args:
        client: the client over the database.
        spawn_workers: start (and restart) a detached worker when none is alive; tests
            run a worker in a thread and pass False.
        poll_ms: how often the change token is polled while the window is visible.
        keys: the API key store (the settings dialog uses it).
        notify_bus: the D-Bus address desktop notifications use (None: the session's).
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
        """Build the rooms in the order their widgets are laid out, wire them, start."""
        super().__init__()
        self.client = client
        self.keys = keys or KeyStore()
        self.setWindowTitle("desktop-agent")
        self.setWindowIcon(resources.app_icon())
        self.tasks = TaskRunner(2, self)
        self.last_error = ""
        self._shut_down = False
        self._built = False
        self.commands = RunCommands(client, self.tasks, self)
        self.acts = Actions(self)
        self.settings_room = SettingsRoom(self, self)
        self.palette_chooser = self.settings_room.palette_chooser
        self.new_run_room = NewRunRoom(self, self)
        self._build(spawn_workers)
        self.poller = LivePoller(
            client, self.tasks, self.steps_model.resume_seq, interval_ms=poll_ms, parent=self
        )
        # File ▸ Follow a Managed Agents session… (the run that follows one is selected).
        started = self.commands.run_started.emit
        self.follow_managed = add_follow_action(self, client, self.tasks, started)
        self.history_room = HistoryRoom(self, self)
        self.exporting, self.forking = self.history_room.exporting, self.history_room.forking
        self.controls_room = ControlsRoom(self, self)
        self.search_room = SearchRoom(self, self)
        self.usage_room = UsageRoom(self, self)
        self._connect()
        detail = self.detail
        self.keyboard = Keyboard(
            self, self.acts, self.side, detail.timeline, detail.inspector, self.run_list.table
        )
        # The Schedules, Batches and Watched folders tabs.
        self.scheduling = SchedulingViews(self, self)
        self._built = True
        self.alerts_room = AlertsRoom(self, self, notify_bus)
        self.tray, self.notifier = self.alerts_room.tray, self.alerts_room.notifier
        self.notices = self.alerts_room.notices
        self.closing_room = ClosingRoom(self, self)
        self._ticks = 0
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._on_clock_timeout)
        self._update_controls()
        # An explicit minimum keeps layouts from resizing the window's limits as panes
        # appear (which also spares the offscreen platform a warning per change).
        self.setMinimumSize(900, 600)
        splits = {"main": self.split, "detail": detail.body_split, "steps": detail.list_split}
        where = client.db_path.parent / LAYOUT_FILE
        self.layout_memory = WindowLayout(self, where, splits, self.run_list)
        self.layout_memory.restore()
        self.poller.start()
        self._clock.start()
        self.worker_room.start()

    # ------------------------------------------------------------------ layout

    def _build(self, spawn_workers: bool) -> None:
        toolbar = self.addToolBar("Run controls")
        toolbar.setObjectName("controls")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.acts.fill_toolbar(toolbar)
        self.acts.fill_menus(self.menuBar())
        self.runs_room = RunsRoom(self, self)
        self.runs_model = self.runs_room.runs_model
        self.run_list: RunListPanel = self.runs_room.run_list
        self.tagging = self.runs_room.tagging
        self.approvals_room = ApprovalsRoom(self, self)
        self.approvals_model = self.approvals_room.approvals_model
        self.inbox = self.approvals_room.inbox
        self.side: QTabWidget = QTabWidget(self)
        self.side.setDocumentMode(True)
        self.side.addTab(self.run_list, resources.icon("status-running"), "Runs")
        self.side.addTab(self.inbox, resources.icon("inbox"), "Approvals")
        self.detail_room = DetailRoom(self, self)
        self.steps_model: StepTimelineModel = self.detail_room.steps_model
        self.detail: RunDetailPane = self.detail_room.detail
        self.noting = self.detail_room.noting
        # The run list at the window's full height, the run's detail beside it.
        self.split: QSplitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.split.addWidget(self.side)
        self.split.addWidget(self.detail)
        self.split.setStretchFactor(1, 1)
        self.split.setChildrenCollapsible(False)
        # Explicit minimums: the tabs' pages (schedules, batches) and the detail ask for
        # more than a 1280-wide window can give both, and the splitter would halve it.
        self.side.setMinimumWidth(360)
        self.detail.setMinimumWidth(520)
        self.setCentralWidget(self.split)
        self.worker_room: WorkerRoom = WorkerRoom(self, self, spawn_workers=spawn_workers)
        self.supervisor = self.worker_room.supervisor
        self.worker_label, self.worker_icon = self.worker_room.status_widgets()

    def _connect(self) -> None:
        """Wire what goes from one room (or the poller, or the tasks) to another."""
        self.acts["refresh"].triggered.connect(self.poller.refresh)
        self.acts["show"].triggered.connect(self.bring_up)
        runs, detail, approvals = self.runs_room, self.detail, self.approvals_room
        self.run_list.demo_requested.connect(self.new_run_room.start_demo)
        self.run_list.new_run_requested.connect(self.new_run_room.open_new_run)
        self.inbox.approval_selected.connect(runs.show_approval_run)
        detail.unarchive_requested.connect(runs.unarchive_shown)
        detail.approval_step_activated.connect(approvals.open_step_approvals)
        detail.review_requested.connect(approvals.open_approval)
        detail.control_requested.connect(self.controls_room.run_control)
        self.poller.runs_changed.connect(self._on_poller_runs_changed)
        self.poller.steps_loaded.connect(self._on_poller_steps_loaded)
        self.worker_room.connect_supervisor()
        self.commands.run_started.connect(self.new_run_room.run_started)
        self.tasks.task_failed.connect(self._on_tasks_task_failed)

    def add_view(self, widget: QWidget, icon: str, title: str) -> int:
        """Add a tab beside Runs and Approvals (e.g. schedules or batches); returns its index."""
        return self.side.addTab(widget, resources.icon(icon), title)

    @property
    def timeline(self) -> QWidget:
        """The timeline view of the selected run."""
        return self.detail.timeline

    @property
    def is_shut_down(self) -> bool:
        """Whether :meth:`shutdown` stopped the window's polling, timers and tasks."""
        return self._shut_down

    # ------------------------------------------------------------------ the rooms' state

    @property
    def selected(self) -> RunRow | None:
        """The selected run as last polled (None: none, or an archived one)."""
        return self.runs_room.selected

    @selected.setter
    def selected(self, row: RunRow | None) -> None:
        self.runs_room.selected = row

    @property
    def tools(self) -> dict[str, ToolInfo]:
        """Every tool new runs may use, by name."""
        return self.new_run_room.tools

    @tools.setter
    def tools(self, tools: dict[str, ToolInfo]) -> None:
        self.new_run_room.tools = tools

    @property
    def approvals(self) -> tuple[Approval, ...]:
        """The pending approvals as last polled (decided ones included)."""
        return self.approvals_room.approvals

    @property
    def approval_dialog(self) -> ApprovalDialog | None:
        """The approval dialog, while open."""
        return self.commands.approval_dialog

    @property
    def new_run_dialog(self) -> NewRunDialog | None:
        """The new-run dialog, once opened."""
        return self.new_run_room.new_run_dialog

    @property
    def model_list(self) -> ModelList | None:
        """The catalogue as last read from the database (None: not yet; the shipped one)."""
        return self.new_run_room.model_list

    @property
    def settings_dialog(self) -> SettingsDialog | None:
        """The settings dialog opened last."""
        return self.settings_room.settings_dialog

    @property
    def worker_status(self) -> WorkerStatus | None:
        """The worker's status as last read (None: not yet)."""
        return self.worker_room.worker_status

    @property
    def recovery(self) -> RecoveryReport | None:
        """The recovery report read last."""
        return self.worker_room.recovery

    @property
    def recovery_dialog(self) -> RecoveryDialog | None:
        """The recovery summary opened last."""
        return self.worker_room.recovery_dialog

    @property
    def crash_dialog(self) -> CrashReportDialog | None:
        """The previous session's crash report, while open."""
        return self.worker_room.crash_dialog

    @property
    def compare_windows(self) -> list[CompareWindow]:
        """The compare windows opened."""
        return self.history_room.compare_windows

    @property
    def export_dialog(self) -> ExportDialog | None:
        """The export dialog, once opened."""
        return self.exporting.dialog

    @property
    def fork_dialog(self) -> ForkDialog | None:
        """The fork dialog, once opened."""
        return self.forking.dialog

    @property
    def search_window(self) -> SearchWindow | None:
        """The search window, once opened."""
        return self.search_room.search_window

    @property
    def usage_window(self) -> UsageWindow | None:
        """The usage window, once opened."""
        return self.usage_room.usage_window

    # ------------------------------------------------------------------ data in

    @Slot(object)
    def _on_poller_runs_changed(self, delta: RunsDelta) -> None:
        self.runs_model.apply(delta.rows, full=delta.full)
        self.approvals_room.polled(delta.approvals)  # before the notices: they offer Review
        self.notices.polled(self.runs_model.rows() if delta.full else delta.rows, full=delta.full)
        self._show_approvals()
        self.worker_room.runs_polled(delta.rows)
        self.runs_room.polled()
        self._update_controls()

    @Slot(object)
    def _on_poller_steps_loaded(self, batch: StepsBatch) -> None:
        self.detail_room.steps_loaded(batch)

    def _show_approvals(self) -> None:
        self.approvals_room.show_pending()

    def _update_controls(self) -> None:
        self.controls_room.update()

    @Slot()
    def _on_clock_timeout(self) -> None:
        self._ticks += 1
        if self._ticks % memory.TRIM_EVERY_S == 0:  # one tick a second
            memory.release_free_memory()
        self.runs_model.refresh_times()
        self.approvals_model.refresh_times()
        self.detail.tick()
        self.notices.tick()

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

    # ------------------------------------------------------------------ the rooms' doors

    def select_run(self, run_id: str) -> bool:
        """Select a run in the list (showing the Runs tab)."""
        return self.runs_room.select_run(run_id)

    @Slot()
    def read_archived(self) -> None:
        """Read the archived and imported runs off the GUI thread, for the run list's filters."""
        self.runs_room.read_archived()

    @Slot(str, int)
    def open_step(self, run_id: str, seq: int, marks: object = ()) -> None:
        """Select ``run_id`` with step ``seq`` selected in its timeline (0: the run only).

        ``marks``: words to mark in the step's details (a search's).
        """
        self.runs_room.open_step(run_id, seq, marks)

    @Slot(object)
    def open_approval(self, approval: Approval, of: int = 1) -> ApprovalDialog:
        """Open the approval dialog for ``approval`` (the first of ``of`` pending calls)."""
        return self.approvals_room.open_approval(approval, of)

    def run_control(self, control: Control) -> None:
        """Apply ``control`` to the selected run (if it applies now)."""
        self.controls_room.run_control(control)

    def open_new_run(self) -> NewRunDialog:
        """Open the new-run dialog (one dialog, emptied and filled anew at each opening)."""
        return self.new_run_room.open_new_run()

    def _on_new_run_dialog_start_requested(self, request: NewRunRequest) -> None:
        self.new_run_room.start_requested(request)

    def offered_models(self) -> list[ModelChoice]:
        """The models a new run may use, as last read (retired ones left out, the demo last)."""
        return self.new_run_room.offered_models()

    def read_models(self, then: Callable[[list[ModelChoice]], None]) -> None:
        """Read the catalogue the workers stored, off the GUI thread; ``then`` gets the models."""
        self.new_run_room.read_models(then)

    def run_again(self, run: Run) -> NewRunDialog:
        """Open New run filled as ``run`` was started, to change what should change."""
        return self.history_room.run_again(run)

    def fork_from_step(self, run_id: str, seq: int) -> None:
        """Offer a fork of ``run_id`` from step ``seq`` (or the nearest that can be)."""
        self.forking.fork_from_step(run_id, seq)

    def open_compare(self, run_a: str, run_b: str) -> CompareWindow:
        """Open a window comparing two runs (older first when both are listed)."""
        return self.history_room.open_compare(run_a, run_b)

    def export_run(self, run_id: str, path: Path, fmt: str) -> None:
        """Write the run as ``fmt`` to ``path`` (see :mod:`desktop_agent.gui.exporting`)."""
        self.history_room.export_run(run_id, path, fmt)

    def import_bundle(self, path: Path) -> None:
        """Bring a bundle in, read-only (see :mod:`desktop_agent.gui.exporting`)."""
        self.history_room.import_bundle(path)

    def open_search(self) -> SearchWindow:
        """Open (or bring forward) the window that searches every run."""
        return self.search_room.open_search()

    def open_usage(self) -> UsageWindow:
        """Open (or bring forward, read anew) the window of what all runs spent."""
        return self.usage_room.open_usage()

    def open_settings(self) -> SettingsDialog:
        """Open the settings dialog."""
        return self.settings_room.open_settings()

    def show_previous_crash(self, crash: PreviousCrash) -> CrashReportDialog:
        """Say that the previous session ended abnormally, and offer its crash log."""
        return self.worker_room.show_previous_crash(crash)

    # ------------------------------------------------------------------ window life

    @Slot()
    def bring_up(self) -> None:
        """Show, raise and activate the window (from the tray, a notice, a search)."""
        self.showNormal()
        self.raise_()
        self.activateWindow()

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
        self.approvals_room.recolor()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Hide to the tray (runs go on), or close the app leaving the worker running."""
        if self.closing_room.closes(event):
            self.shutdown()
            event.accept()

    @Slot()
    def quit_everything(self) -> None:
        """Stop the worker this app started (by PID) and quit."""
        self.closing_room.quit_everything()

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
