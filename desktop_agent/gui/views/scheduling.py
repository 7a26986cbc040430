"""Schedules, batches and watched folders in the main window, plus stuck runs and disk space.

:class:`SchedulingViews` adds the Schedules, Batches and Watched folders tabs, reads what
they show with every poll of the window's :class:`~desktop_agent.gui.poller.LivePoller`
(through :class:`SchedulingSource`, off the GUI thread), writes through
:class:`~desktop_agent.client.schedules.Scheduling` on the window's task pool, and shows
stuck flags (a badge in the run list, a line in the status bar) and the low-disk warning.
The poll source is in :mod:`.scheduling_source`, the status bar's note in :mod:`.status_note`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QStatusBar, QWidget

from desktop_agent.client.api import Client
from desktop_agent.client.messages import plain_error
from desktop_agent.client.schedules import Scheduling
from desktop_agent.client.scheduling_views import (
    SchedulingState,
    SchedulingTracker,
    count_items,
    stuck_badge,
    stuck_by_run,
)
from desktop_agent.client.views import (
    ModelChoice,
    RunRow,
    ToolInfo,
    default_tool_names,
)
from desktop_agent.config import Settings
from desktop_agent.domain.scheduling import StuckRun
from desktop_agent.gui.dialogs.prompts import MessageDialog
from desktop_agent.gui.dialogs.templates import (
    BatchDialog,
    BatchRequest,
    ScheduleDialog,
    ScheduleRequest,
    TemplateDialog,
    WatchDialog,
    WatchRequest,
    run_options,
)
from desktop_agent.gui.models.runs import RunColumn
from desktop_agent.gui.models.scheduling import (
    BatchItemModel,
    BatchListModel,
    ScheduleListModel,
    WatchListModel,
)
from desktop_agent.gui.poller import LivePoller
from desktop_agent.gui.tasks import TaskRunner
from desktop_agent.gui.views.batches import BatchesView
from desktop_agent.gui.views.common import StuckBadgeDelegate
from desktop_agent.gui.views.schedules import SchedulesView, WatchesView
from desktop_agent.gui.views.scheduling_source import SchedulingSource
from desktop_agent.gui.views.status_note import StatusNote
from desktop_agent.gui.widgets.forecast import estimate_with
from desktop_agent.gui.widgets.runlist import RunListPanel

__all__ = ["SchedulingSource", "SchedulingViews", "StatusNote", "WindowHost"]


class WindowHost(Protocol):
    """What the scheduling tabs use of the main window (which satisfies this)."""

    client: Client
    tasks: TaskRunner
    poller: LivePoller
    run_list: RunListPanel
    selected: RunRow | None
    tools: dict[str, ToolInfo]

    def add_view(self, widget: QWidget, icon: str, title: str) -> int:
        """Add a tab to the window's views; its index."""
        ...

    def select_run(self, run_id: str) -> bool:
        """Show run ``run_id``; False when the run list does not hold it."""
        ...

    def show_error(self, message: str) -> None:
        """Tell the analyst what failed."""
        ...

    def statusBar(self) -> QStatusBar:
        """The window's status bar."""
        ...

    def offered_models(self) -> list[ModelChoice]:
        """The models a new run may use, as last read."""
        ...

    def read_models(self, then: Callable[[list[ModelChoice]], None]) -> None:
        """Read the catalogue off the GUI thread; ``then`` gets the models."""
        ...


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SchedulingViews(QObject):
    """The scheduling tabs of the main window, and the notes they put in its status bar.

    Args:
        window: the main window (its client, tasks, poller, run list and status bar).
        parent: the widget that owns these tabs and their dialogs (the main window itself).
    """

    def __init__(self, window: WindowHost, parent: QWidget) -> None:
        super().__init__(parent)
        self.widget = parent
        self.window = window
        self.sched = Scheduling(window.client)
        self.state: SchedulingState | None = None
        self.stuck: dict[str, StuckRun] = {}
        self.dialog: MessageDialog | None = None
        self.template_dialog: TemplateDialog | None = None
        self.schedule_model = ScheduleListModel(self)
        self.batch_model = BatchListModel(self)
        self.item_model = BatchItemModel(self)
        self.watch_model = WatchListModel(self)
        self.schedules = SchedulesView(self.schedule_model)
        self.batches = BatchesView(self.batch_model, self.item_model)
        self.watches = WatchesView(self.watch_model)
        window.add_view(self.schedules, "schedule", "Schedules")
        window.add_view(self.batches, "batch", "Batches")
        window.add_view(self.watches, "watch", "Watched folders")
        self.source = SchedulingSource(SchedulingTracker(window.client), self)
        self.source.state_read.connect(self._on_source_state_read)
        window.poller.add_source(self.source)
        self.badges = StuckBadgeDelegate(window.run_list.table)
        window.run_list.table.setItemDelegateForColumn(RunColumn.GOAL, self.badges)
        self.stuck_note = StatusNote("stuck", parent)
        self.stuck_note.link_activated.connect(self._on_stuck_note_link_activated)
        self.storage_note = StatusNote("status-failed", parent)
        bar = window.statusBar()
        bar.insertPermanentWidget(0, self.storage_note)
        bar.insertPermanentWidget(0, self.stuck_note)
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._on_clock_timeout)
        self._clock.start()
        self._connect()

    def _connect(self) -> None:
        s, b, w = self.schedules, self.batches, self.watches
        s.new_requested.connect(self.open_new_schedule)
        s.pause_requested.connect(self._on_schedules_pause_requested)
        s.resume_requested.connect(self._on_schedules_resume_requested)
        s.remove_requested.connect(self._on_schedules_remove_requested)
        s.run_requested.connect(self.open_run)
        b.start_requested.connect(self.open_start_batch)
        b.retry_requested.connect(self._on_batches_retry_requested)
        b.batch_selected.connect(self._on_batches_batch_selected)
        b.run_requested.connect(self.open_run)
        w.new_requested.connect(self.open_add_watch)
        w.pause_requested.connect(self._on_watches_pause_requested)
        w.resume_requested.connect(self._on_watches_resume_requested)
        w.remove_requested.connect(self._on_watches_remove_requested)
        self.window.run_list.run_selected.connect(self._on_run_list_run_selected)

    def shutdown(self) -> None:
        """Stop the clock and close the dialogs (the window stops the poller and tasks)."""
        self._clock.stop()
        for dialog in (self.dialog, self.template_dialog):
            if dialog is not None:
                dialog.close()

    # ------------------------------------------------------------------ data in

    @Slot(object)
    def _on_source_state_read(self, state: SchedulingState) -> None:
        self.state = state
        self.schedule_model.set_rows(state.schedules)
        self.batch_model.set_rows(state.batches)
        self.watch_model.set_rows(state.watches)
        if state.items is not None:
            self.batches.show_items(state.items)
        stuck = stuck_by_run(state.stuck)
        if stuck or self.stuck:  # a repaint of the whole run list only when a flag may move
            self.stuck = stuck
            self.badges.set_stuck(stuck)
            self.window.run_list.table.viewport().update()
        self._show_stuck()
        warning = state.storage_warning
        self.storage_note.show_text(
            _escape(warning[:1].upper() + warning[1:]) if warning else "", warning or ""
        )

    def _show_stuck(self) -> None:
        now = time.time()
        selected = self.window.selected
        flag = self.stuck.get(selected.run.id) if selected is not None else None
        if flag is not None:
            self.stuck_note.show_text(
                f"Run {flag.run_id}: {stuck_badge(flag, now)} — a tool or the model may hang; "
                "cancel it, or wait",
                flag.message,
            )
        elif self.stuck:
            first = next(iter(self.stuck.values()))
            n = len(self.stuck)
            self.stuck_note.show_text(
                f"<a style='color:{{link}}' href='{first.run_id}'>"
                f"{n} run{'s' if n != 1 else ''} without progress</a>",
                "\n".join(f"{s.run_id}: {s.message}" for s in self.stuck.values()),
            )
        else:
            self.stuck_note.show_text("")

    @Slot()
    def _on_clock_timeout(self) -> None:
        self.schedule_model.refresh_times()
        self.watch_model.refresh_times()
        if self.stuck:
            self.badges.now = time.time()
            self._show_stuck()

    @Slot(str)
    def _on_run_list_run_selected(self, _run_id: str) -> None:
        self._show_stuck()

    @Slot(str)
    def _on_stuck_note_link_activated(self, run_id: str) -> None:
        self.open_run(run_id)

    # ------------------------------------------------------------------ navigation

    @Slot(str)
    def open_run(self, run_id: str) -> bool:
        """Select ``run_id`` in the Runs tab (a note in the status bar if it is not listed)."""
        if self.window.select_run(run_id):
            return True
        self.window.statusBar().showMessage(
            f"Run {run_id} is not in the run list (it may have been archived)", 6000
        )
        return False

    @Slot(str)
    def _on_batches_batch_selected(self, batch_id: str) -> None:
        self.source.select_batch(batch_id or None)

    # ------------------------------------------------------------------ writes

    def _write(
        self,
        fn: Callable[[], Any],
        message: Callable[[Any], str],
        failed: Callable[[Exception], None] | None = None,
    ) -> None:
        def done(result: Any) -> None:
            self.window.statusBar().showMessage(message(result), 6000)
            self.window.poller.refresh()

        def error(exc: Exception) -> None:
            if failed is not None:
                failed(exc)
            else:
                self.window.show_error(plain_error(exc))
            self.window.poller.refresh()

        self.window.tasks.submit(fn, done, error)

    @Slot(str)
    def _on_schedules_pause_requested(self, schedule_id: str) -> None:
        sched = self.sched
        self._write(
            lambda: sched.pause_schedule(schedule_id),
            lambda s: f"Schedule “{s.name}” paused: it does not fire until resumed",
        )

    @Slot(str)
    def _on_schedules_resume_requested(self, schedule_id: str) -> None:
        sched = self.sched
        self._write(
            lambda: sched.resume_schedule(schedule_id),
            lambda s: f"Schedule “{s.name}” resumed: it fires again from now on",
        )

    @Slot(str)
    def _on_schedules_remove_requested(self, schedule_id: str) -> None:
        row = self.schedule_model.get(schedule_id)
        name = row.schedule.name if row is not None else schedule_id
        sched = self.sched

        def remove() -> None:
            self._write(
                lambda: sched.remove_schedule(schedule_id),
                lambda s: f"Schedule “{s.name}” removed; the runs it started stay",
            )

        self._confirm(
            "Remove schedule?",
            f"Remove the schedule “{name}”? It will not fire again. The runs it started "
            "stay in the run list.",
            "Remove schedule",
            remove,
        )

    @Slot(str)
    def _on_watches_pause_requested(self, watch_id: str) -> None:
        sched = self.sched
        self._write(
            lambda: sched.pause_watch(watch_id),
            lambda w: f"Stopped watching {w.folder} (files that land meanwhile run on resume)",
        )

    @Slot(str)
    def _on_watches_resume_requested(self, watch_id: str) -> None:
        sched = self.sched
        self._write(lambda: sched.resume_watch(watch_id), lambda w: f"Watching {w.folder} again")

    @Slot(str)
    def _on_watches_remove_requested(self, watch_id: str) -> None:
        row = self.watch_model.get(watch_id)
        folder = row.watch.folder if row is not None else watch_id
        sched = self.sched

        def remove() -> None:
            self._write(
                lambda: sched.remove_watch(watch_id),
                lambda w: f"No longer watching {w.folder}; the runs it started stay",
            )

        self._confirm(
            "Stop watching?",
            f"Stop watching {folder}? New files there will not start runs any more. The runs "
            "already started stay in the run list.",
            "Stop watching",
            remove,
        )

    @Slot(str)
    def _on_batches_retry_requested(self, batch_id: str) -> None:
        sched = self.sched
        self._write(
            lambda: sched.retry_batch(batch_id),
            lambda items: (
                f"Retrying {len(items)} item{'s' if len(items) != 1 else ''}: "
                + ", ".join(str(i + 1) for i in items)
            ),
        )

    def _confirm(self, title: str, text: str, confirm: str, then: Callable[[], None]) -> None:
        box = MessageDialog(title, text, "remove", confirm=confirm, parent=self.widget)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.confirmed.connect(then)
        box.destroyed.connect(self._on_dialog_destroyed)
        self.dialog = box
        box.open()

    @Slot()
    def _on_dialog_destroyed(self) -> None:
        self.dialog = None

    # ------------------------------------------------------------------ dialogs

    def _dialog_args(self) -> tuple[list[ModelChoice], list[ToolInfo], Settings, tuple[str, ...]]:
        w = self.window
        return (
            w.offered_models(),
            list(w.tools.values()),
            w.client.settings,
            default_tool_names(w.client),
        )

    def _open(self, dialog: TemplateDialog, submit: Callable[[Any], None]) -> None:
        if self.template_dialog is not None:
            self.template_dialog.close()
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.submitted.connect(submit)
        dialog.destroyed.connect(self._on_template_dialog_destroyed)
        self.template_dialog = dialog
        dialog.open()

        def update(choices: list[ModelChoice]) -> None:
            if self.template_dialog is dialog:
                dialog.set_models(choices)

        self.window.read_models(update)

    @Slot()
    def _on_template_dialog_destroyed(self) -> None:
        self.template_dialog = None

    def _submit(
        self, fn: Callable[[], Any], message: Callable[[Any], str], then: Callable[[Any], None]
    ) -> None:
        dialog = self.template_dialog

        def done(result: Any) -> None:
            if dialog is not None:
                dialog.accept()
            self.window.statusBar().showMessage(message(result), 8000)
            self.window.poller.refresh()
            then(result)

        def failed(exc: Exception) -> None:
            if dialog is not None and dialog is self.template_dialog:
                dialog.show_error(plain_error(exc))
            else:
                self.window.show_error(plain_error(exc))

        self.window.tasks.submit(fn, done, failed)

    @Slot()
    def open_new_schedule(self) -> ScheduleDialog:
        """Open the new-schedule dialog."""
        dialog = ScheduleDialog(*self._dialog_args(), parent=self.widget)
        self._open(dialog, self._on_schedule_submitted)
        return dialog

    @Slot()
    def open_start_batch(self) -> BatchDialog:
        """Open the start-batch dialog."""
        dialog = BatchDialog(
            *self._dialog_args(),
            run_task=self.window.tasks.submit,
            count=count_items,
            parent=self.widget,
        )
        # The forecast for all the items, economy mode beside streamed.
        dialog.set_forecaster(self.window.tasks.submit, estimate_with(self.sched.client))
        self._open(dialog, self._on_batch_submitted)
        return dialog

    @Slot()
    def open_add_watch(self) -> WatchDialog:
        """Open the watch-a-folder dialog."""
        dialog = WatchDialog(*self._dialog_args(), parent=self.widget)
        self._open(dialog, self._on_watch_submitted)
        return dialog

    @Slot(object)
    def _on_schedule_submitted(self, r: ScheduleRequest) -> None:
        sched, options = self.sched, run_options(r.run)
        self._submit(
            lambda: sched.add_schedule(
                r.run.goal,
                cron=r.cron,
                every_s=r.every_s,
                name=r.name,
                overlap=r.overlap,
                timezone=r.timezone,
                options=options,
            ),
            lambda s: f"Schedule “{s.name}” created",
            lambda s: self._select_later(lambda: self.schedules.select(s.id)),
        )

    @Slot(object)
    def _on_batch_submitted(self, r: BatchRequest) -> None:
        sched, options = self.sched, run_options(r.run)
        self._submit(
            lambda: sched.start_batch(
                r.run.goal,
                folder=r.folder,
                pattern=r.pattern,
                lines=r.lines,
                concurrency=r.concurrency,
                options=options,
            ),
            lambda b: f"Batch of {b.total} items started, {b.concurrency} at a time",
            lambda b: self._select_later(lambda: self.batches.select(b.id)),
        )

    @Slot(object)
    def _on_watch_submitted(self, r: WatchRequest) -> None:
        sched, options = self.sched, run_options(r.run)
        self._submit(
            lambda: sched.add_watch(
                r.folder,
                r.run.goal,
                pattern=r.pattern,
                every_s=r.every_s,
                include_existing=r.include_existing,
                options=options,
            ),
            lambda w: f"Watching {w.folder}: new files matching {w.pattern} start runs",
            lambda w: self._select_later(lambda: self.watches.select(w.id)),
        )

    def _select_later(self, select: Callable[[], bool], tries: int = 20) -> None:
        """Select a new row once the poll that lists it has come in."""
        if select() or tries <= 0 or not self._clock.isActive():
            return
        QTimer.singleShot(100, self, lambda: self._select_later(select, tries - 1))
