"""The Schedules view and the Watched folders view.

Lists with create, pause, resume and remove actions. They only emit requests;
:class:`~desktop_agent.gui.views.scheduling.SchedulingViews` acts on them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QItemSelection, QModelIndex, Signal, Slot
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from desktop_agent.client.scheduling_views import ScheduleRow, WatchRow
from desktop_agent.gui.models.scheduling import (
    ScheduleColumn,
    ScheduleListModel,
    WatchColumn,
    WatchListModel,
)
from desktop_agent.gui.toolbuttons import add_button
from desktop_agent.gui.views.common import TablePane, icon_action, retint, spacer, view_bar


class _ListView(QWidget):
    """A toolbar (new, pause, resume, remove, a summary) over a table.

    Signals:
        new_requested: the analyst wants to create one.
        pause_requested: pause (the id).
        resume_requested: resume (the id).
        remove_requested: remove (the id); the controller asks first.
    """

    new_requested = Signal()
    pause_requested = Signal(str)
    resume_requested = Signal(str)
    remove_requested = Signal(str)

    def __init__(
        self,
        pane: TablePane,
        new_icon: str,
        new_text: str,
        noun: str,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.noun = noun
        self.pane = pane
        self.table = pane.table
        self.bar = view_bar(self, f"{noun} actions")
        self.new_action = icon_action(self, new_icon, new_text)
        self.pause_action = icon_action(self, "pause", "Pause")
        self.resume_action = icon_action(self, "resume", "Resume")
        self.remove_action = icon_action(self, "remove", "Remove…")
        for action in (self.new_action, self.pause_action, self.resume_action):
            add_button(self.bar, action)
        self.bar.addSeparator()
        add_button(self.bar, self.remove_action)
        self.bar.addWidget(spacer(self.bar))
        self.summary = QLabel(self)
        self.summary.setContentsMargins(0, 0, 6, 0)
        self.bar.addWidget(self.summary)
        self.new_action.triggered.connect(self.new_requested)
        self.pause_action.triggered.connect(self._on_pause_triggered)
        self.resume_action.triggered.connect(self._on_resume_triggered)
        self.remove_action.triggered.connect(self._on_remove_triggered)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        model = self.table.model()
        model.dataChanged.connect(self.update_actions)
        model.rowsInserted.connect(self.update_actions)
        model.rowsRemoved.connect(self.update_actions)
        model.modelReset.connect(self.update_actions)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 0)
        layout.setSpacing(2)
        layout.addWidget(self.bar)
        layout.addWidget(pane, 1)

    def changeEvent(self, event: QEvent) -> None:
        """Re-tint the toolbar's icons when the palette changes (light and dark)."""
        if event.type() == QEvent.Type.PaletteChange:
            retint(self)
        super().changeEvent(event)

    def current_id(self) -> str | None:
        """The id of the selected row."""
        rows = self.table.selectionModel().selectedRows()
        return self.key_at(rows[0].row()) if rows else None

    def key_at(self, row: int) -> str:
        """The id at ``row``."""
        raise NotImplementedError

    def paused_at(self, key: str) -> bool | None:
        """Whether the row with ``key`` is paused (None: not listed)."""
        raise NotImplementedError

    def summary_text(self) -> str:
        """The counts shown at the right of the toolbar."""
        raise NotImplementedError

    def select(self, key: str) -> bool:
        """Select the row with ``key``."""
        for row in range(self.table.model().rowCount()):
            if self.key_at(row) == key:
                self.table.selectRow(row)
                self.table.scrollTo(self.table.model().index(row, 0))
                return True
        return False

    @Slot()
    def update_actions(self) -> None:
        """Enable what applies to the selection; update the summary."""
        key = self.current_id()
        paused = self.paused_at(key) if key else None
        self.pause_action.setEnabled(paused is False)
        self.resume_action.setEnabled(paused is True)
        self.remove_action.setEnabled(paused is not None)
        self.summary.setText(self.summary_text())

    @Slot(QItemSelection, QItemSelection)
    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self.update_actions()

    @Slot()
    def _on_pause_triggered(self) -> None:
        key = self.current_id()
        if key:
            self.pause_requested.emit(key)

    @Slot()
    def _on_resume_triggered(self) -> None:
        key = self.current_id()
        if key:
            self.resume_requested.emit(key)

    @Slot()
    def _on_remove_triggered(self) -> None:
        key = self.current_id()
        if key:
            self.remove_requested.emit(key)


class SchedulesView(_ListView):
    """Schedules: when they fire next, their overlap policy, state and last run.

    Args:
        model: the schedules.
        parent: owner.

    Signals:
        run_requested: the analyst double-clicked a schedule that has run (its newest run).
    """

    run_requested = Signal(str)

    def __init__(self, model: ScheduleListModel, parent: QWidget | None = None) -> None:
        self.model = model
        pane = TablePane(
            model,
            "No schedules yet. New schedule… starts a run from a template at an interval "
            "(every 6 hours) or on a cron expression (9:00 on weekdays).",
            parent,
        )
        super().__init__(pane, "schedule", "New schedule…", "Schedules", parent)
        pane.size_columns(
            {
                ScheduleColumn.WHEN: "On weekdays at 09:00",
                ScheduleColumn.NEXT: "tomorrow 09:00",
                ScheduleColumn.OVERLAP: "If still running",
                ScheduleColumn.STATE: "Active",
                ScheduleColumn.LAST: "Completed · Wed 00:00",
            },
            ScheduleColumn.NAME,
        )
        self.table.doubleClicked.connect(self._on_table_double_clicked)
        self.update_actions()

    def key_at(self, row: int) -> str:
        """The schedule id at ``row``."""
        return self.model.row_at(row).schedule.id

    def paused_at(self, key: str) -> bool | None:
        """Whether the schedule is paused."""
        row = self.model.get(key)
        return row.schedule.paused if row is not None else None

    def current(self) -> ScheduleRow | None:
        """The selected schedule."""
        key = self.current_id()
        return self.model.get(key) if key else None

    def summary_text(self) -> str:
        """``3 schedules · 1 paused``."""
        rows = self.model.rows()
        paused = sum(1 for r in rows if r.schedule.paused)
        text = f"{len(rows)} schedule{'s' if len(rows) != 1 else ''}"
        return text + (f" · {paused} paused" if paused else "")

    @Slot(QModelIndex)
    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        row = self.model.row_at(index.row())
        if row.schedule.last_run_id:
            self.run_requested.emit(row.schedule.last_run_id)


class WatchesView(_ListView):
    """Watched folders: pattern, scan interval, state and the files seen.

    Args:
        model: the watches.
        parent: owner.
    """

    def __init__(self, model: WatchListModel, parent: QWidget | None = None) -> None:
        self.model = model
        pane = TablePane(
            model,
            "No watched folders. Watch folder… starts a run for each new file that lands in a "
            "folder (an invoice inbox, a scanner's output).",
            parent,
        )
        super().__init__(pane, "watch", "Watch folder…", "Watched folders", parent)
        pane.size_columns(
            {
                WatchColumn.PATTERN: "*.pdf, *.docx",
                WatchColumn.SCAN: "every 10 seconds",
                WatchColumn.STATE: "Watching",
                WatchColumn.SEEN: "Files seen",
                WatchColumn.RUNS: "Runs started",
                WatchColumn.LAST: "Last file",
            },
            WatchColumn.FOLDER,
        )
        self.update_actions()

    def key_at(self, row: int) -> str:
        """The watch id at ``row``."""
        return self.model.row_at(row).watch.id

    def paused_at(self, key: str) -> bool | None:
        """Whether the watch is paused."""
        row = self.model.get(key)
        return row.watch.paused if row is not None else None

    def current(self) -> WatchRow | None:
        """The selected watch."""
        key = self.current_id()
        return self.model.get(key) if key else None

    def summary_text(self) -> str:
        """``2 folders · 14 runs started``."""
        rows = self.model.rows()
        runs = sum(r.runs_started for r in rows)
        text = f"{len(rows)} folder{'s' if len(rows) != 1 else ''}"
        return text + (f" · {runs} run{'s' if runs != 1 else ''} started" if rows else "")
